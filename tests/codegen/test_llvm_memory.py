"""LLVM code generation of memory access and statements: vector loads/stores, gathers,
predicates, allocations, control flow, symbolic shapes and parallel loops.

All kernels are compiled as one module.
"""
import numpy as np
import pytest

from ember import CompileError
from ember import runtime as rt
from ember.codegen.llvm import build, emit_llvm
from ember.loop import (Allocate, Broadcast, Buffer, Cast, Evaluate, FloatImm, For, IfThenElse,
                        IntImm, Let, LetStmt, Not, PrimFunc, Ramp, Select, Store, Var, as_expr,
                        seq)
from ember.loop import intrinsics, parse

L = 8


def ramp(base, stride=1, lanes=L):
    return Ramp(as_expr(base), IntImm(stride), lanes)


def kernels():
    i, j, k = Var("i"), Var("j"), Var("k")
    n, m = Var("n"), Var("m")
    fs = []

    # Contiguous vector access in 2-D, and a strided (gather) read down columns.
    A2, C2 = Buffer("A", (4, 32)), Buffer("C", (4, 32))
    fs.append(PrimFunc("vec2d", (A2, C2), For(j, 0, 4, "serial", For(k, 0, 4, "serial", Store(
        C2, A2[j, ramp(k * 8)] * 2.0, (j, ramp(k * 8)))))))
    AT, CT = Buffer("A", (8, 4)), Buffer("C", (4, 8))
    fs.append(PrimFunc("transpose", (AT, CT), For(j, 0, 4, "serial", Store(CT, AT[ramp(0), j], (j, ramp(0))))))

    # Gathers and scatters.
    A, C, Idx = Buffer("A", (64,)), Buffer("C", (32,)), Buffer("Idx", (32,), "int32")
    fs.append(PrimFunc("gather_stride", (A, C), For(i, 0, 4, "serial", Store(
        C, A[ramp(i * 16, 2)], (ramp(i * 8),)))))
    fs.append(PrimFunc("gather_index", (A, Idx, C), For(i, 0, 4, "serial", Store(
        C, A[Idx[ramp(i * 8)]], (ramp(i * 8),)))))
    fs.append(PrimFunc("scatter_stride", (C, A), For(i, 0, 4, "serial", Store(
        A, C[ramp(i * 8)], (ramp(i * 16, 2),)))))

    # Vector indices as an unsimplified vectorizer leaves them: sums with broadcasts, folded
    # constant strides, casts. Still one contiguous access each (see test_unsimplified_indices).
    i32 = Var("i32", "int32")
    lane = Ramp(IntImm(0), IntImm(1) * IntImm(1), L) * Broadcast(IntImm(1), L) + Broadcast(i * 8, L)
    lane32 = Cast("int64x8", Ramp(i32 * 8, IntImm(1, "int32"), L))
    fs.append(PrimFunc("unsimplified", (A, C), seq(
        For(i, 0, 2, "serial", Store(C, A[lane + Broadcast(IntImm(16), L)], (lane,))),
        For(i32, 2, 2, "serial", Store(C, A[lane32], (lane32,))))))

    # Predicated (masked) vector access over a tail, with n <= 32 a scalar parameter.
    Am, Cm = Buffer("A", (32,)), Buffer("C", (32,))
    pred = ramp(i * 8) < Broadcast(n, L)
    fs.append(PrimFunc("masked", (Am, Cm, n), For(i, 0, (n + 7) // 8, "serial", Store(
        Cm, Am.load(ramp(i * 8), predicate=pred) + 1.0, (ramp(i * 8),), pred))))
    gpred = ramp(i * 8) < Broadcast(n, L)
    fs.append(PrimFunc("masked_gather", (A, Cm, n), For(i, 0, 4, "serial", Store(
        Cm, A.load(ramp(i * 16, 2), predicate=gpred), (ramp(i * 8, 1),), gpred))))
    fs.append(PrimFunc("scalar_pred", (Am, Cm, n, m), For(i, 0, 32, "serial", Store(
        Cm, Am.load(i, predicate=i < n), (i,), i < m))))

    # bool vectors, broadcast index (all lanes read one element), select on vectors.
    Bb, Cb = Buffer("B", (32,), "bool"), Buffer("C", (32,), "bool")
    fs.append(PrimFunc("not_bool", (Bb, Cb), For(i, 0, 4, "serial", Store(
        Cb, Not(Bb[ramp(i * 8)]), (ramp(i * 8),)))))
    A8, C64 = Buffer("A", (8,)), Buffer("C", (64,))
    fs.append(PrimFunc("bcast_index", (A8, C64), For(i, 0, 8, "serial", Store(
        C64, A8[Broadcast(i, L)], (ramp(i * 8),)))))
    fs.append(PrimFunc("vselect", (Am, Cm), For(i, 0, 4, "serial", Store(
        Cm, Select(Am[ramp(i * 8)] > Broadcast(FloatImm(0.0), L), Am[ramp(i * 8)],
                   Broadcast(FloatImm(-1.0), L)), (ramp(i * 8),)))))

    # Lets, ifs, evaluate, unrolled/vectorized kinds left for codegen.
    x = Var("x", "float32")
    fs.append(PrimFunc("control", (Am, Cm), For(i, 0, 32, "unrolled", LetStmt(x, Am[i] * 2.0, seq(
        Evaluate(IntImm(0)),
        IfThenElse(i < 16, Store(Cm, Let(Var("y", "float32"), x + 1.0, Var("y", "float32") * 3.0), (i,)),
                   IfThenElse(i % 2 < 1, Store(Cm, x, (i,)))))))))
    fs.append(PrimFunc("vector_kind", (Am, Cm), For(i, 0, 32, "vectorized", Store(Cm, Am[i] + 1.0, (i,)))))

    # Allocations: local (registers), global with a symbolic size.
    tmp = Buffer("tmp", (8,), scope="local")
    fs.append(PrimFunc("local_alloc", (Am, Cm), For(i, 0, 4, "serial", Allocate(tmp, seq(
        For(j, 0, 8, "unrolled", Store(tmp, Am[i * 8 + j] * 2.0, (j,))),
        For(j, 0, 8, "unrolled", Store(Cm, tmp[7 - j], (i * 8 + j,))))))))
    An, Cn = Buffer("A", (n,)), Buffer("C", (n,))
    heap = Buffer("heap", (n,), scope="global")
    fs.append(PrimFunc("global_alloc", (An, Cn), Allocate(heap, seq(
        For(i, 0, n, "serial", Store(heap, An[i] + 1.0, (i,))),
        For(i, 0, n, "serial", Store(Cn, heap[n - 1 - i], (i,)))))))

    # Symbolic shapes and scalar parameters.
    S, T = Buffer("S", (n, 4)), Buffer("T", (n, 4))
    alpha = Var("alpha", "float32")
    fs.append(PrimFunc("scale_rows", (S, T, alpha), For(i, 0, n, "serial", For(j, 0, 4, "serial", Store(
        T, S[i, j] * alpha + Cast("float32", i), (i, j))))))
    # Explicit strides: a transposed view of a (4, n) array.
    V = Buffer("V", (n, 4), strides=(IntImm(1), n), align=4)
    fs.append(PrimFunc("strided", (V, T), For(i, 0, n, "serial", For(j, 0, 4, "serial", Store(
        T, V[i, j], (i, j))))))

    # Parallel loops: plain, with a captured let and a nonzero min, nested, with scratch.
    P, Q = Buffer("P", (n,)), Buffer("Q", (n,))
    fs.append(PrimFunc("par", (P, Q), For(i, 0, n, "parallel", Store(Q, intrinsics.sqrt(P[i]) + 1.0, (i,)))))
    c = Var("c", "float32")
    fs.append(PrimFunc("par_let", (P, Q, alpha), LetStmt(c, alpha * 2.0, seq(
        Store(Q, FloatImm(-1.0), (0,)),
        For(i, 1, n - 2, "parallel", Store(Q, P[i] * c, (i,)))))))  # [1, n - 1)
    M2, N2 = Buffer("M", (n, 16)), Buffer("N", (n, 16))
    fs.append(PrimFunc("par_nested", (M2, N2), For(i, 0, n, "parallel", For(j, 0, 16, "parallel", Store(
        N2, M2[i, j] + Cast("float32", j), (i, j))))))
    row = Buffer("row", (16,), scope="local")
    whole = Buffer("whole", (n, 16), scope="global")
    fs.append(PrimFunc("par_scratch", (M2, N2), Allocate(whole, seq(
        For(i, 0, n, "parallel", Allocate(row, seq(
            For(j, 0, 16, "serial", Store(row, M2[i, j] * 2.0, (j,))),
            For(j, 0, 16, "serial", Store(whole, row[15 - j], (i, j)))))),
        For(i, 0, n, "parallel", For(j, 0, 4, "serial", Store(
            N2, whole[i, ramp(j * 4, 1, 4)] + Broadcast(FloatImm(1.0), 4), (i, ramp(j * 4, 1, 4)))))))))
    fs.append(PrimFunc("fastmath", (P, Q), For(i, 0, n, "serial", Store(Q, P[i] * 2.0 + 1.0, (i,))),
                       attrs=(("fastmath", True),)))
    return fs


@pytest.fixture(scope="module")
def mod():
    return build(kernels(), name="memory_tests")


def arr(x, dtype="float32"):
    return rt.array(np.asarray(x, dtype=dtype))


def test_vector_2d_and_column_gather(mod):
    a = np.arange(128, dtype=np.float32).reshape(4, 32)
    c = rt.zeros((4, 32))
    mod["vec2d"](arr(a), c)
    np.testing.assert_array_equal(c.numpy(), a * 2)
    at = np.arange(32, dtype=np.float32).reshape(8, 4)
    ct = rt.zeros((4, 8))
    mod["transpose"](arr(at), ct)
    np.testing.assert_array_equal(ct.numpy(), at.T)


def test_gather_scatter(mod):
    a = np.arange(64, dtype=np.float32)
    c = rt.zeros(32)
    mod["gather_stride"](arr(a), c)
    np.testing.assert_array_equal(c.numpy(), a[::2])
    idx = np.random.default_rng(0).integers(0, 64, 32).astype(np.int32)
    mod["gather_index"](arr(a), arr(idx, "int32"), c)
    np.testing.assert_array_equal(c.numpy(), a[idx])
    out = rt.zeros(64)
    mod["scatter_stride"](arr(a[:32]), out)
    want = np.zeros(64, np.float32)
    want[::2] = a[:32]
    np.testing.assert_array_equal(out.numpy(), want)


def test_unsimplified_indices(mod):
    a = np.arange(64, dtype=np.float32)
    c = rt.zeros(32)
    mod["unsimplified"](arr(a), c)
    np.testing.assert_array_equal(c.numpy(), np.concatenate([a[16:32], a[16:32]]))
    f = next(k for k in kernels() if k.name == "unsimplified")
    text = emit_llvm(f)
    assert "<8 x float>" in text and "gather" not in text and "scatter" not in text


def _grouped_lanes(g: int, step: int, c: int, extent: int, rows: int = 3):
    """Lane k of row i reads A[i, (k // g) step + c]: with step g, a narrow grouped conv's
    input lanes."""
    i = Var("i")
    A, C = Buffer("A", (rows, extent)), Buffer("C", (rows * L,))
    lane = Ramp(IntImm(0), IntImm(1), L) // Broadcast(IntImm(g), L) * Broadcast(IntImm(step), L) \
        + Broadcast(IntImm(c), L)
    return PrimFunc(f"grouped_{g}_{step}_{c}_{extent}", (A, C), For(i, 0, rows, "serial",
                                                                   Store(C, A[i, lane], (ramp(i * L),))))


@pytest.mark.parametrize("g, step, c, extent", [(4, 4, 0, L), (4, 4, 3, L), (2, 2, 1, L), (4, 4, 3, L + 3),
                                                (2, 4, 1, 2 * L)])
def test_lanes_reading_constants_of_one_vector_shuffle_it(g, step, c, extent):
    """Lanes whose innermost indices are constants within one vector of the row load that
    vector once and shuffle it (in a row longer than a vector too: the window then ends with
    the row); spread over more than a vector they gather."""
    f = _grouped_lanes(g, step, c, extent)
    text = emit_llvm(f)
    spread = (L - 1) // g * step >= L
    assert ("masked.gather" in text) == spread
    a = np.arange(3 * extent, dtype=np.float32).reshape(3, extent)
    out = rt.zeros(3 * L)
    build(f)[f.name](arr(a), out)
    k = np.arange(L)
    np.testing.assert_array_equal(out.numpy().reshape(3, L), a[:, (k // g) * step + c])


@pytest.mark.parametrize("factor", [2, 4, 3])
def test_lanes_reading_a_base_plus_constants_load_the_window_they_read(factor):
    """Lane k of block j reads A[b(j) + k // f] (a nearest upsample by f, the base known at
    run time): one load of the elements the lanes read -- no further, so the last block reads
    nothing past the row -- and a shuffle, not a gather."""
    j = Var("j")
    n = 4 * L // factor + (1 if L % factor else 0)
    A, C = Buffer("A", (n,)), Buffer("C", (4 * L,))
    lane = Ramp(IntImm(0), IntImm(1), L) // Broadcast(IntImm(factor), L)
    base = j * (L // factor) if L % factor == 0 else j * L // factor
    f = PrimFunc(f"upsample_{factor}", (A, C), For(j, 0, 4, "serial", Store(
        C, A[Broadcast(base, L) + lane], (ramp(j * L),))))
    text = emit_llvm(f)
    assert "masked.gather" not in text and f"load <{(L - 1) // factor + 1} x float>" in text, text
    a = np.arange(n, dtype=np.float32)
    out = rt.zeros(4 * L)
    build(f)[f.name](arr(a), out)
    k = np.arange(4 * L)
    want = a[(k // L) * L // factor + (k % L) // factor] if L % factor else a[k // factor]
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("planes, block, dtype", [(3, 4, "float32"), (4, 4, "uint8"), (2, 2, "int32"),
                                                  (3, 8, "float32")])
def test_lanes_interleaving_runs_load_each_run_and_shuffle(planes, block, dtype):
    """Lane k of block j reads A[k % b, j (16 / b) + k // b]: a pixel's channels from their
    planes, the quantized stem's input packed into words. One vector load a run (none for a
    plane the predicate turns off: A has ``planes`` of the ``b``) and a shuffle, not a gather;
    the lanes past the planes read as zeros, as a masked load's."""
    lanes, j = 16, Var("j")
    W = 4 * lanes // block
    A, C = Buffer("A", (planes, W), dtype), Buffer("C", (4 * lanes,), dtype)
    k = Ramp(IntImm(0), IntImm(1), lanes)
    c, x = k % Broadcast(IntImm(block), lanes), k // Broadcast(IntImm(block), lanes)
    pred = c < Broadcast(IntImm(planes), lanes) if planes < block else None
    f = PrimFunc(f"planes_{planes}_{block}_{dtype}", (A, C), For(j, 0, 4, "serial", Store(
        C, A.load(c, Broadcast(j * (lanes // block), lanes) + x, predicate=pred), (ramp(j * lanes, lanes=lanes),))))
    text = emit_llvm(f)
    assert "masked.gather" not in text and text.count(f"load <{lanes // block} x") == planes, text
    a = (np.arange(planes * W) % 251 + 1).astype(dtype).reshape(planes, W)
    out = rt.empty((4 * lanes,), dtype)
    build(f)[f.name](rt.array(a), out)
    want = np.zeros((W, block), dtype)
    want[:, :planes] = a.T
    np.testing.assert_array_equal(out.numpy(), want.reshape(-1))


@pytest.mark.parametrize("rows", [7, 8])
def test_interleaved_runs_under_a_predicate_each_run_holds_or_fails_whole(rows):
    """A packed dot's pairs from two rows (``B[2 i + t, j]``, lane ``k``: ``t = k % 2``,
    ``j = k // 2``), an odd row count zero-filled by ``2 i + t < rows``: the predicate is the
    same within each run, so each run is one masked load and a shuffle, not a gather."""
    lanes, i = 16, Var("i")
    half = (rows + 1) // 2
    A, C = Buffer("A", (rows, lanes // 2), "float32"), Buffer("C", (half * lanes,), "float32")
    k = Ramp(IntImm(0), IntImm(1), lanes)
    t, j = k % Broadcast(IntImm(2), lanes), k // Broadcast(IntImm(2), lanes)
    row = Broadcast(i * 2, lanes) + t
    f = PrimFunc(f"pairs_{rows}", (A, C), For(i, 0, half, "serial", Store(
        C, A.load(row, j, predicate=row < Broadcast(IntImm(rows), lanes)), (ramp(i * lanes, lanes=lanes),))))
    text = emit_llvm(f)
    assert "masked.gather" not in text and "masked.load" in text, text
    a = (np.arange(rows * lanes // 2) + 1).astype(np.float32).reshape(rows, lanes // 2)
    out = rt.empty((half * lanes,), "float32")
    build(f)[f.name](rt.array(a), out)
    want = np.zeros((2 * half, lanes // 2), np.float32)
    want[:rows] = a
    np.testing.assert_array_equal(out.numpy(), want.reshape(half, 2, lanes // 2).transpose(0, 2, 1).reshape(-1))


@pytest.mark.parametrize("n", [0, 3, 13, 16, 32])
def test_masked(mod, n):
    a = np.arange(32, dtype=np.float32)
    c = rt.array(np.full(32, -5, np.float32))
    mod["masked"](arr(a), c, n)
    want = np.full(32, -5, np.float32)
    want[:n] = a[:n] + 1
    np.testing.assert_array_equal(c.numpy(), want)
    a64 = np.arange(64, dtype=np.float32)
    c = rt.array(np.full(32, -5, np.float32))
    mod["masked_gather"](arr(a64), c, n)
    want = np.full(32, -5, np.float32)
    want[:n] = a64[: 2 * n : 2]
    np.testing.assert_array_equal(c.numpy(), want)


def test_scalar_predicates(mod):
    a = np.arange(32, dtype=np.float32) + 1
    c = rt.array(np.full(32, -5, np.float32))
    mod["scalar_pred"](arr(a), c, 10, 20)
    want = np.full(32, -5, np.float32)
    want[:20] = np.where(np.arange(20) < 10, a[:20], 0)  # a masked-off load reads as zero
    np.testing.assert_array_equal(c.numpy(), want)


def test_bool_broadcast_select(mod):
    b = np.random.default_rng(1).integers(0, 2, 32).astype(bool)
    c = rt.zeros(32, "bool")
    mod["not_bool"](rt.array(b), c)
    np.testing.assert_array_equal(c.numpy(), ~b)
    a8 = np.arange(8, dtype=np.float32)
    c = rt.zeros(64)
    mod["bcast_index"](arr(a8), c)
    np.testing.assert_array_equal(c.numpy(), np.repeat(a8, 8))
    a = np.random.default_rng(2).standard_normal(32).astype(np.float32)
    c = rt.zeros(32)
    mod["vselect"](arr(a), c)
    np.testing.assert_array_equal(c.numpy(), np.where(a > 0, a, -1))


def test_control_flow(mod):
    a = np.arange(32, dtype=np.float32)
    c = rt.array(np.full(32, -5, np.float32))
    mod["control"](arr(a), c)
    i = np.arange(32)
    want = np.where(i < 16, (a * 2 + 1) * 3, np.where(i % 2 == 0, a * 2, -5)).astype(np.float32)
    np.testing.assert_array_equal(c.numpy(), want)
    mod["vector_kind"](arr(a), c)
    np.testing.assert_array_equal(c.numpy(), a + 1)


def test_allocations(mod):
    a = np.arange(32, dtype=np.float32)
    c = rt.zeros(32)
    mod["local_alloc"](arr(a), c)
    np.testing.assert_array_equal(c.numpy(), (a * 2).reshape(4, 8)[:, ::-1].ravel())
    for n in (1, 5, 1000):
        x = np.arange(n, dtype=np.float32)
        out = rt.zeros(n)
        mod["global_alloc"](arr(x), out)
        np.testing.assert_array_equal(out.numpy(), (x + 1)[::-1])


@pytest.mark.parametrize("n", [0, 1, 3, 10])
def test_symbolic_dims(mod, n):
    s = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
    t = rt.zeros((n, 4))
    mod["scale_rows"](arr(s), t, 1.5)
    want = s * np.float32(1.5) + np.arange(n, dtype=np.float32)[:, None]
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6, atol=1e-6)  # a*b+c may fuse
    v = np.asarray(s.T.copy()).T  # (n, 4) view of a (4, n) array: strides (1, n) elements
    mod["strided"](v, t)
    np.testing.assert_array_equal(t.numpy(), s)


@pytest.mark.parametrize("n", [1, 7, 10000])
def test_parallel(mod, n):
    p = np.random.default_rng(0).uniform(0, 4, n).astype(np.float32)
    q = rt.zeros(n)
    mod["par"](arr(p), q)
    np.testing.assert_allclose(q.numpy(), np.sqrt(p) + 1, rtol=1e-6)
    q = rt.zeros(n)
    mod["par_let"](arr(p), q, 0.5)
    want = np.zeros(n, np.float32)
    want[1:n - 1] = p[1:n - 1] * 1.0
    want[0] = -1
    np.testing.assert_array_equal(q.numpy(), want)
    mm = np.random.default_rng(1).standard_normal((n, 16)).astype(np.float32)
    out = rt.zeros((n, 16))
    mod["par_nested"](arr(mm), out)
    np.testing.assert_array_equal(out.numpy(), mm + np.arange(16, dtype=np.float32))
    mod["par_scratch"](arr(mm), out)
    np.testing.assert_array_equal(out.numpy(), (mm * 2)[:, ::-1] + 1)


def test_parallel_calls_libgomp(mod):
    with open(mod.path, "rb") as f:
        assert b"GOMP_parallel" in f.read()


def test_fastmath(mod):
    p = np.arange(100, dtype=np.float32)
    q = rt.zeros(100)
    mod["fastmath"](arr(p), q)
    np.testing.assert_allclose(q.numpy(), p * 2 + 1)


def test_unbound_variable_names_kernel():
    i, ghost = Var("i"), Var("ghost")
    A = Buffer("A", (4,))
    f = PrimFunc("haunted", (A,), For(i, 0, 4, "serial", Store(A, Cast("float32", ghost), (i,))))
    with pytest.raises(CompileError, match="haunted.*ghost"):
        build([f])


def test_unknown_buffer_names_kernel():
    i = Var("i")
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    f = PrimFunc("lost", (A,), For(i, 0, 4, "serial", Store(A, B[i], (i,))))
    with pytest.raises(CompileError, match="lost.*'B'"):
        build([f])


def test_kernel_names_checked():
    i = Var("i")
    A = Buffer("A", (4,))
    body = For(i, 0, 4, "serial", Store(A, FloatImm(1.0), (i,)))
    with pytest.raises(CompileError, match="'expf' is a C library function"):
        build([PrimFunc("expf", (A,), body)])
    with pytest.raises(CompileError, match="two kernels are named 'k'"):
        build([PrimFunc("k", (A,), body), PrimFunc("k", (A,), body)])


def _accumulate(rows: int):
    """``acc[r] += A[k, r] * 2`` for ``rows`` vectors of 8 lanes, reduced over k (the shape of
    a register block's reduction step when ``rows`` is large)."""
    k = Var("k")
    A = Buffer("A", (16, rows * 8), "float32")
    out = Buffer("out", (rows * 8,), "float32")
    steps = []
    for r in range(rows):
        lanes = Ramp(IntImm(r * 8), IntImm(1), 8)
        steps.append(Store(out, out[lanes] + A[k, lanes] * Broadcast(FloatImm(2.0), 8),
                           (lanes,)))
    return PrimFunc(f"acc{rows}", (A, out), For(k, 0, 16, "serial", seq(*steps)))


def test_register_block_loops_are_not_unrolled_by_llvm():
    """A loop around a register block (8 or more vector stores, no inner loop) tells LLVM not
    to unroll it (unrolled, a conv's taps share broadcasts and the block spills); a small body
    is left to LLVM. Both compute the same sums."""
    big, small = emit_llvm(_accumulate(8)), emit_llvm(_accumulate(2))
    assert "llvm.loop.unroll.disable" in big and "distinct" in big
    assert "llvm.loop" not in small
    for rows in (8, 2):
        lib = build(_accumulate(rows))
        a = np.random.rand(16, rows * 8).astype(np.float32)
        out = rt.zeros((rows * 8,), "float32")
        lib[f"acc{rows}"](rt.array(a), out)
        np.testing.assert_allclose(out.numpy(), 2 * a.sum(0), rtol=1e-5)


def test_a_scalar_load_guarded_lane_by_lane_reads_where_any_lane_needs_it():
    """A 0-d constant in a vectorized select's branch: its load's guard is a vector (found by
    compiling BERT's attention-mask group without the CPU's layout passes)."""
    text = '''
def k(c: Buffer((16,), "float32"), s: Buffer((), "float32"), o: Buffer((16,), "float32")):
    o[ramp(0, 1, 16)] = select(c[ramp(0, 1, 16)] > broadcast(0.0, 16), broadcast(s.load((), predicate=c[ramp(0, 1, 16)] > broadcast(0.0, 16)), 16), c[ramp(0, 1, 16)])
'''
    c = np.linspace(-1, 1, 16).astype(np.float32)
    out = rt.zeros((16,), "float32")
    build(parse(text))["k"](rt.array(c), rt.array(np.array(5.0, np.float32)), out)
    np.testing.assert_array_equal(out.numpy(), np.where(c > 0, 5.0, c))


def test_lanes_stepping_through_two_dimensions_load_and_store_one_vector():
    """A loop fused over a pixel and its channel block, vectorized by 64, indexes
    ``[w // 16, w % 16]``-style: no index is linear in the lanes, the flattened offset is --
    one vector, not 64 gathered loads (a quantized MobileNetV2's residual adds)."""
    from ember.loop import compute as te
    from ember.loop.lower import lower
    from ember.loop.passes import default_pipeline
    from ember.loop.schedule import Schedule

    a = te.placeholder((2, 7, 12, 16), "uint8", "a")
    b = te.compute((2, 7, 12, 16), lambda n, h, w, c: a[n, h, w, c] + 1, "b")
    s = Schedule(b)
    *_, w, c = s[b].leaf
    _, lanes = s[b].split(s[b].fuse(w, c), factor=64)
    s[b].vectorize(lanes)
    func = default_pipeline(lower(s, [a, b], "k"))
    assert "// broadcast(16, 64)" in func.script()  # (the lanes' indices step through both axes)
    text = emit_llvm([func])
    assert "masked.gather" not in text and "masked.scatter" not in text
    x = np.random.default_rng(0).integers(0, 200, (2, 7, 12, 16)).astype(np.uint8)
    out = rt.empty((2, 7, 12, 16), "uint8")
    build([func])["k"](rt.array(x), out)
    np.testing.assert_array_equal(out.numpy(), x + 1)


def test_a_masked_accumulator_in_a_local_stays_in_a_register():
    """A vector accumulator in a local buffer of constant shape, masked by a tail over ``n``
    columns: its loads and stores are plain ones and selects (SROA keeps it in a register;
    masked intrinsics on the stack kept it in memory, a store and reload each step), and the
    masked-off lanes never reach the output."""
    i, k, n = Var("i"), Var("k"), Var("n")
    A, B, C = Buffer("A", (16,)), Buffer("B", (16, n)), Buffer("C", (n,))
    acc = Buffer("acc", (L,), scope="local")
    lanes = Ramp(IntImm(0), IntImm(1), L)
    mask = Broadcast(i * L, L) + lanes < Broadcast(n, L)
    body = For(i, 0, (n + L - 1) // L, "serial", Allocate(acc, seq(
        Store(acc, Broadcast(FloatImm(0.0), L), (lanes,), mask),
        For(k, 0, 16, "serial", Store(acc, acc.load(lanes, predicate=mask) + Broadcast(A[k], L) * B.load(k, ramp(i * L), predicate=mask),
                                      (lanes,), mask)),
        Store(C, acc.load(lanes, predicate=mask), (ramp(i * L),), mask))))
    f = PrimFunc("local_acc", (A, B, C), body)
    text = emit_llvm(f)
    # (only B's masked load and C's masked store: the accumulator's are plain)
    assert text.count('call void @"llvm.masked.store') == 1 and text.count('call <8 x float> @"llvm.masked.load') == 1, text
    a = np.arange(16, dtype=np.float32)
    for cols in (5, 8, 13):
        b = np.arange(16 * cols, dtype=np.float32).reshape(16, cols)
        out = rt.zeros(cols)
        build(f)[f.name](arr(a), arr(b), out)
        np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-6)
