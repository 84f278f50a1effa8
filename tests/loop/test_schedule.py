"""Schedule primitives, lowered and compiled, against numpy; traces replay exactly."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from ember.driver import lower_kernel
from ember.errors import LoweringError, ScheduleError
from ember.loop import compute as te
from ember.loop import parse
from ember.loop.expr import max_
from ember.loop.schedule import Schedule, Trace

RNG = np.random.default_rng(0)


def _elementwise(n=37, m=29):
    A = te.placeholder((n, m), "float32", "A")
    B = te.placeholder((n, m), "float32", "B")
    C = te.compute((n, m), lambda i, j: A[i, j] * 2.0 + B[i, j], "C")
    return A, B, C


def _matmul(n=13, m=21, k=17):
    A = te.placeholder((n, k), "float32", "A")
    B = te.placeholder((k, m), "float32", "B")
    r = te.reduce_axis(k, "r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), "C")
    return A, B, C


def _run(s, args, *arrays):
    mod = ember.build(s, args, "k")
    out = np.zeros([d.value for d in args[-1].shape], np.float32)
    mod["k"](*arrays, out)
    f = lower_kernel(s, args, "k")
    text = f.script()
    assert parse(text).script() == text  # the text form round-trips for every tested kernel
    return out


def _check_ew(schedule_fn):
    A, B, C = _elementwise()
    s = Schedule(C)
    schedule_fn(s, C)
    a, b = RNG.standard_normal((37, 29), np.float32), RNG.standard_normal((37, 29), np.float32)
    np.testing.assert_allclose(_run(s, [A, B, C], a, b), a * 2 + b, rtol=1e-6)
    return s


def _check_mm(schedule_fn, n=13, m=21, k=17):
    A, B, C = _matmul(n, m, k)
    s = Schedule(C)
    schedule_fn(s, C)
    a, b = RNG.standard_normal((n, k), np.float32), RNG.standard_normal((k, m), np.float32)
    np.testing.assert_allclose(_run(s, [A, B, C], a, b), a @ b, rtol=1e-4, atol=1e-4)
    return s


def test_naive():
    _check_ew(lambda s, C: None)
    _check_mm(lambda s, C: None)


@pytest.mark.parametrize("factor", [1, 4, 8, 29, 64])
def test_split_factor_with_tails(factor):
    _check_ew(lambda s, C: s[C].split(s[C].leaf[1], factor=factor))


@pytest.mark.parametrize("nparts", [1, 3, 5])
def test_split_nparts(nparts):
    _check_ew(lambda s, C: s[C].split(s[C].leaf[0], nparts=nparts))


def test_fuse_reorder_tile():
    def sched(s, C):
        i, j = s[C].leaf
        s[C].reorder(j, i)
        f = s[C].fuse(j, i)
        s[C].split(f, factor=7)
    _check_ew(sched)
    _check_ew(lambda s, C: s[C].tile(*s[C].leaf, 4, 8))


def test_parallel_vectorize_unroll():
    def sched(s, C):
        i, j = s[C].leaf
        jo, ji = s[C].split(j, factor=8)
        s[C].vectorize(ji)
        io, ii = s[C].split(i, factor=4)
        s[C].unroll(ii)
        s[C].parallel(io)
    _check_ew(sched)


def test_reduction_split_reorder():
    def sched(s, C):
        i, j, r = s[C].leaf
        ro, ri = s[C].split(r, factor=4)
        s[C].reorder(ro, i, ri, j)
        jo, ji = s[C].split(j, factor=8)
        s[C].vectorize(ji)
    _check_mm(sched)


def test_compute_inline_and_at():
    A = te.placeholder((20, 30), "float32", "A")
    T = te.compute((20, 30), lambda i, j: A[i, j] + 1.0, "T")
    U = te.compute((20, 30), lambda i, j: T[i, j] * 3.0, "U")
    V = te.compute((20, 30), lambda i, j: U[i, j] - A[i, j], "V")
    a = RNG.standard_normal((20, 30), np.float32)
    s = Schedule(V)
    s[T].compute_inline()
    io, ii = s[V].split(s[V].leaf[0], factor=6)
    s[U].compute_at(s[V], io)
    np.testing.assert_allclose(_run(s, [A, V], a), (a + 1) * 3 - a, rtol=1e-6)


def test_compute_at_a_consumer_through_inlined_stages():
    # an epilogue chain (bias, residual, relu) inlined into the output: the reduction is
    # computed at the output's tile, its readers being the inlined stages
    A, B, C = _matmul(16, 24, 8)
    bias = te.placeholder((24,), "float32", "bias")
    T = te.compute((16, 24), lambda i, j: C[i, j] + bias[j], "T")
    U = te.compute((16, 24), lambda i, j: T[i, j] + C[i, j] * 0.5, "U")
    V = te.compute((16, 24), lambda i, j: max_(U[i, j], 0.0), "V")
    s = Schedule(V)
    s[T].compute_inline()
    s[U].compute_inline()
    io, jo, ii, ji = s[V].tile(*s[V].leaf, 4, 8)
    s[C].compute_at(s[V], jo)
    s[V].vectorize(ji)
    a, b = RNG.standard_normal((16, 8), np.float32), RNG.standard_normal((8, 24), np.float32)
    bb = RNG.standard_normal(24).astype(np.float32)
    mod = ember.build(s, [A, B, bias, V], "k")
    out = np.zeros((16, 24), np.float32)
    mod["k"](a, b, bb, out)
    np.testing.assert_allclose(out, np.maximum(a @ b * 1.5 + bb, 0), rtol=1e-5, atol=1e-5)


def test_cache_read_and_write():
    def sched(s, C):
        A = s.stage("A").tensor
        CL = s.cache_write(C, "local")
        io, jo, ii, ji = s[C].tile(*s[C].leaf, 4, 8)
        s[CL].compute_at(s[C], jo)
        ci, cj, cr = s[CL].leaf
        s[CL].reorder(cr, ci, cj)
        s[CL].unroll(ci)
        s[CL].vectorize(cj)
        AL = s.cache_read(A, "local", [CL])
        s[AL].compute_at(s[CL], cr)
        s[C].parallel(io)
    _check_mm(sched)
    _check_mm(sched, 32, 32, 32)


def test_symbolic_batch():
    A = te.placeholder(("batch", 16), "float32", "A")
    C = te.compute(A.shape, lambda i, j: A[i, j] * A[i, j], "C")
    s = Schedule(C)
    jo, ji = s[C].split(s[C].leaf[1], factor=8)
    s[C].vectorize(ji)
    s[C].parallel(s[C].leaf[0])
    mod = ember.build(s, [A, C], "sq")
    for n in (1, 3, 10):
        a = RNG.standard_normal((n, 16), np.float32)
        c = np.empty_like(a)
        mod["sq"](a, c)
        np.testing.assert_allclose(c, a * a, rtol=1e-6)


def test_trace_replay_gives_same_program():
    A, B, C = _matmul(16, 16, 16)
    s = Schedule(C)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*s[C].leaf, 4, 8)
    s[CL].compute_at(s[C], jo)
    s[C].parallel(io)
    s[C].vectorize(ji)
    trace = Trace.from_json(s.trace.to_json())
    A2, B2, C2 = _matmul(16, 16, 16)
    s2 = trace.apply(Schedule(C2))
    assert lower_kernel(s, [A, B, C]) == lower_kernel(s2, [A2, B2, C2])


def test_schedule_errors_name_loop_and_reason():
    A, B, C = _matmul()
    s = Schedule(C)
    i, j, r = s[C].leaf
    with pytest.raises(ScheduleError, match=r"r.*reduction"):
        s[C].parallel(r)
    with pytest.raises(ScheduleError, match=r"r.*reduction"):
        s[C].vectorize(r)
    with pytest.raises(ScheduleError, match="not one of its loops"):
        s[C].split("nope", factor=2)
    with pytest.raises(ScheduleError, match="positive"):
        s[C].split(i, factor=0)
    with pytest.raises(ScheduleError, match="positive"):
        s[C].split(i, factor=-3)
    with pytest.raises(ScheduleError, match="adjacent"):
        s[C].fuse(i, r)
    with pytest.raises(ScheduleError, match="reduction"):
        s[C].compute_inline()
    Ab = te.placeholder(("n",), "float32", "A")
    Cb = te.compute(Ab.shape, lambda i: Ab[i] + 1.0, "C")
    sb = Schedule(Cb)
    with pytest.raises(ScheduleError, match="not a constant"):
        sb[Cb].vectorize(sb[Cb].leaf[0])


def test_a_stage_computed_at_a_block_may_vectorize_an_axis_wider_or_unknown_until_then():
    """A stage computed at a consumer's block runs the region that block needs: its axis of
    200 (over 64 lanes) or of a symbolic n is a vector there, which only lowering knows --
    the annotation waits for it, and lowering refuses what stays too wide or unknown."""
    A = te.placeholder((7, 200), "float32", "A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2.0, "B")
    C = te.compute(A.shape, lambda i, j: B[i, j] + 1.0, "C")
    s = Schedule(C)
    jo, ji = s[C].split(s[C].leaf[1], factor=16)
    s[C].vectorize(ji)
    s[B].compute_at(s[C], jo)
    s[B].vectorize(s[B].leaf[1])
    a = RNG.standard_normal((7, 200), np.float32)
    np.testing.assert_allclose(_run(s, [A, C], a), a * 2 + 1, rtol=1e-6)

    An = te.placeholder(("n",), "float32", "A")
    Bn = te.compute(An.shape, lambda i: An[i] * 2.0, "B")
    Cn = te.compute(An.shape, lambda i: Bn[i] + 1.0, "C")
    s = Schedule(Cn)
    io, ii = s[Cn].split(s[Cn].leaf[0], factor=16)
    s[Bn].compute_at(s[Cn], io)
    s[Bn].unroll(s[Bn].leaf[0])
    assert "B[15] = A[i_o * 16 + 15]" in lower_kernel(s, [An, Cn], "k").script()  # 16 copies

    s = Schedule(Cn)
    s[Bn].compute_at(s[Cn], s[Cn].leaf[0])
    s[Bn].vectorize(s[Bn].leaf[0])  # one element per iteration: a vector of 1
    lower_kernel(s, [An, Cn], "k")
    wide = te.placeholder((3, "n"), "float32", "A")
    Bw = te.compute(wide.shape, lambda i, j: wide[i, j] * 2.0, "B")
    Cw = te.compute(wide.shape, lambda i, j: Bw[i, j] + 1.0, "C")
    s = Schedule(Cw)
    s[Bw].compute_at(s[Cw], s[Cw].leaf[0])  # a whole row of n per iteration
    s[Bw].vectorize(s[Bw].leaf[1])
    with pytest.raises(LoweringError, match="non-constant"):
        lower_kernel(s, [wide, Cw], "k")


# --- property test: random schedules compute the same as numpy and replay identically ------

_moves = st.lists(st.tuples(st.sampled_from(["split", "reorder", "fuse", "vectorize", "unroll", "parallel"]),
                            st.integers(0, 3), st.integers(1, 9)), max_size=5)


def _apply_random(s, C, moves):
    st_ = s[C]
    for prim, a, f in moves:
        leaf = st_.leaf
        iv = leaf[a % len(leaf)]
        try:
            if prim == "split":
                st_.split(iv, factor=f)
            elif prim == "reorder":
                st_.reorder(*reversed(leaf))
            elif prim == "fuse" and a % len(leaf) + 1 < len(leaf):
                st_.fuse(iv, leaf[a % len(leaf) + 1])
            elif prim == "vectorize":
                st_.vectorize(leaf[-1])
            elif prim == "unroll":
                st_.unroll(iv)
            elif prim == "parallel":
                st_.parallel(iv)
        except ScheduleError:
            pass  # a refused primitive leaves the schedule valid


@settings(max_examples=25, deadline=None)
@given(_moves)
def test_random_schedules_match_numpy_and_replay(moves):
    A, B, C = _matmul(6, 10, 5)
    s = Schedule(C)
    _apply_random(s, C, moves)
    a, b = RNG.standard_normal((6, 5), np.float32), RNG.standard_normal((5, 10), np.float32)
    np.testing.assert_allclose(_run(s, [A, B, C], a, b), a @ b, rtol=1e-4, atol=1e-4)
    A2, B2, C2 = _matmul(6, 10, 5)
    s2 = Trace.from_json(s.trace.to_json()).apply(Schedule(C2))
    assert lower_kernel(s, [A, B, C]) == lower_kernel(s2, [A2, B2, C2])


def test_vectorized_select_reading_a_0d_tensor_under_a_mask():
    # a scalar parameter read in one arm of a select, in a vectorized loop with a tail: the
    # 0-d load takes no mask (its one element is always in bounds)
    import numpy as np

    import ember
    from ember.loop import compute as te
    from ember.loop.expr import select
    from ember.loop.schedule import Schedule

    x = te.placeholder((13,), "float32", "x")
    lo = te.placeholder((), "float32", "lo")
    out = te.compute((13,), lambda i: select(x[i] < lo[()], lo[()], x[i]), "out")
    s = Schedule(out)
    _, inner = s[out].split(s[out].leaf[0], factor=8)
    s[out].vectorize(inner)
    mod = ember.build(s, [x, lo, out], "clip_lo")
    xv = np.linspace(-2, 2, 13).astype("float32")
    res = np.empty(13, "float32")
    mod["clip_lo"](xv, np.array(0.5, "float32"), res)
    np.testing.assert_array_equal(res, np.maximum(xv, 0.5))
