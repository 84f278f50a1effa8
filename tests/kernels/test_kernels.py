"""The default kernels against numpy, on shapes that do not divide the tile sizes."""
import operator

import numpy as np
import pytest

import ember
from ember import kernels as K
from ember.driver import lower_kernel
from ember.loop import parse

RNG = np.random.default_rng(1)


def _run(sched_args, *inputs, out_dtype=np.float32):
    s, args = sched_args
    mod = ember.build(s, args, "k")
    out = np.zeros([d.value for d in args[-1].shape], out_dtype)
    mod["k"](*inputs, out)
    text = lower_kernel(s, args, "k").script()
    assert parse(text).script() == text
    return out


def _r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (37, 29, 53), (1, 100, 7), (130, 17, 1), (197, 40, 24),
                                   (128, 33, 20)])
def test_matmul(m, n, k):
    a, b = _r(m, k), _r(k, n)
    np.testing.assert_allclose(_run(K.matmul(m, n, k), a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_a_products_row_block_pads_and_splits_its_rows_least():
    """MR: the block of rows whose padding and split over the threads cost least, from 3/4 of
    the register file's block up (the products above run these blocks against numpy)."""
    from ember.kernels.matmul import block_rows, matmul_compute
    from ember.loop import compute as te
    from ember.loop.knobs import decisions

    assert block_rows(197, 14, 1, 2) == 11  # 18 blocks, 9 a core (of 14: 15 blocks, 13 rows padding)
    assert block_rows(128, 14, 1, 2) == 13  # 10 blocks, 2 rows padding (of 14: 12)
    assert block_rows(3136, 14, 1, 2) == block_rows(None, 14, 1, 2) == 14
    assert block_rows(7, 14, 1, 2) == 7
    assert block_rows(128, 6, 1, 2) == block_rows(197, 6, 1, 2) == 6  # AVX2's block of 6 rows stays
    assert all(11 <= block_rows(m, 14, 1, 2) <= 14 for m in range(14, 500))
    with decisions({}) as d:
        matmul_compute(te.placeholder((197, 64), "float32", "A"), te.placeholder((64, 96), "float32", "B"),
                       target="llvm -mcpu=skylake-avx512 -cores=2")
    assert d.seen["gemm.rows"].default == 11


def test_matmul_transposed_b():
    a, b = _r(19, 23), _r(11, 23)
    np.testing.assert_allclose(_run(K.matmul(19, 11, 23, trans_b=True), a, b), a @ b.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("b,m,n,k", [(3, 16, 16, 16), (2, 7, 19, 5)])
def test_batch_matmul(b, m, n, k):
    x, y = _r(b, m, k), _r(b, k, n)
    np.testing.assert_allclose(_run(K.batch_matmul(b, m, n, k), x, y), x @ y, rtol=1e-4, atol=1e-4)


def _conv_ref(x, w, stride, pad, dil):
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    pt, pl, pb, pr = pad
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, f, oh, ow), np.float64)
    for ry in range(kh):
        for rx in range(kw):
            patch = xp[:, :, ry * dil[0]: ry * dil[0] + stride[0] * (oh - 1) + 1: stride[0],
                       rx * dil[1]: rx * dil[1] + stride[1] * (ow - 1) + 1: stride[1]]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, ry, rx])
    return out.astype(np.float32)


@pytest.mark.parametrize("shape,wshape,stride,pad,dil", [
    ((1, 3, 10, 11), (5, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((2, 4, 9, 20), (6, 4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((1, 3, 13, 13), (4, 3, 3, 3), (2, 2), (1, 0, 1, 2), (1, 1)),
    ((1, 2, 12, 12), (3, 2, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
])
def test_conv2d(shape, wshape, stride, pad, dil):
    x, w = _r(*shape), _r(*wshape)
    got = _run(K.conv2d_nchw(shape, wshape, stride, pad, dil), x, w)
    np.testing.assert_allclose(got, _conv_ref(x, w, stride, pad, dil), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("l2,shape", [(8192, (1, 8, 10, 19)), (8192, (1, 8, 7, 19)), (1 << 20, (2, 8, 10, 19))])
def test_conv2d_schedules_by_cache_and_rows(l2, shape):
    """Weights far past the L2 run in chunks of channel blocks (rows outermost within a chunk);
    an odd number of rows parallelizes over channel blocks instead."""
    import dataclasses

    from ember.kernels.conv import _weight_chunk, conv_compute
    from ember.loop import compute as te

    from ember.target import Target

    target = dataclasses.replace(Target.host(), l2_bytes=l2)
    wshape = (120, 8, 3, 3)
    probe = conv_compute(te.placeholder(shape, "float32", "x"), te.placeholder(wshape, "float32", "w"),
                         padding=(1, 1, 1, 1), target=target)
    fb = probe.op.attrs["fb"]
    chunk = _weight_chunk(probe, fb, target)
    blocks = -(-wshape[0] // fb)
    if l2 == 8192:
        # chunked: a whole number of channel blocks a chunk (how many depends on the host's
        # register block: 14 filters with AVX-512 leave room for one, 8 with AVX2 for two)
        assert 1 <= chunk < blocks and blocks % chunk == 0
    else:
        assert chunk == 0
    x, w = _r(*shape), _r(*wshape)
    got = _run(K.conv2d_nchw(shape, wshape, (1, 1), (1, 1, 1, 1), (1, 1), target=target), x, w)
    np.testing.assert_allclose(got, _conv_ref(x, w, (1, 1), (1, 1, 1, 1), (1, 1)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,wshape,groups,stride,pad", [
    ((1, 24, 9, 14), (68, 6, 1, 1), 4, (1, 1), (0, 0, 0, 0)),  # 17 filters a group: blocks divide 17
    ((1, 16, 7, 7), (24, 4, 1, 1), 4, (1, 1), (0, 0, 0, 0)),
    ((1, 20, 10, 12), (20, 1, 3, 3), 20, (1, 1), (1, 1, 1, 1)),  # depthwise
    ((1, 12, 11, 13), (24, 1, 3, 3), 12, (2, 2), (1, 1, 1, 1)),  # depthwise, 2 filters a channel, stride 2
])
def test_grouped_and_depthwise_conv2d(shape, wshape, groups, stride, pad):
    """A register block never spans two groups (its filters share every input vector), and a
    depthwise conv pads each channel's plane where its rows run: one parallel loop."""
    from ember.kernels.conv import conv_nd

    sched = conv_nd(shape, wshape, stride, pad, groups=groups)
    fb = sched[1][-1].op.attrs["fb"]
    assert (wshape[0] // groups) % fb == 0
    if wshape[1] == 1:
        assert lower_kernel(*sched, "k").script().count("parallel(") == 1
    x, w = _r(*shape), _r(*wshape)
    cg, fg = shape[1] // groups, wshape[0] // groups
    want = np.concatenate([_conv_ref(x[:, g * cg:(g + 1) * cg], w[g * fg:(g + 1) * fg], stride, pad, (1, 1))
                           for g in range(groups)], axis=1)
    np.testing.assert_allclose(_run(sched, x, w), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows,cols", [(4, 16), (7, 33)])
def test_softmax(rows, cols):
    x = _r(rows, cols) * 5
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(_run(K.softmax(rows, cols), x), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows,cols", [(4, 16), (5, 37)])
def test_layer_norm(rows, cols):
    x, g, b = _r(rows, cols), _r(cols), _r(cols)
    m = x.mean(-1, keepdims=True)
    v = x.var(-1, keepdims=True)
    want = (x - m) / np.sqrt(v + 1e-5) * g + b
    np.testing.assert_allclose(_run(K.layer_norm(rows, cols), x, g, b), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sa,sb", [((100,), (100,)), ((5, 7), (7,)), ((5, 1), (1, 9)), ((3, 1, 4), (2, 1))])
@pytest.mark.parametrize("op", [operator.add, operator.mul, operator.sub])
def test_broadcast_binary(sa, sb, op):
    a, b = _r(*sa), _r(*sb)
    np.testing.assert_allclose(_run(K.broadcast_binary(op, sa, sb), a, b), op(a, b), rtol=1e-6)


@pytest.mark.parametrize("shape,perm", [((33, 47), (1, 0)), ((4, 5, 6), (2, 0, 1)), ((4, 5, 6), (0, 2, 1))])
def test_transpose(shape, perm):
    x = _r(*shape)
    np.testing.assert_array_equal(_run(K.transpose(shape, perm), x), x.transpose(perm))


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("combiner", ["sum", "max", "min", "prod"])
def test_reduce(axis, combiner):
    x = _r(6, 5, 19) if combiner != "prod" else (1 + 0.01 * _r(6, 5, 19))
    want = getattr(np, combiner)(x, axis=axis)
    np.testing.assert_allclose(_run(K.reduce(x.shape, axis, combiner), x), want, rtol=1e-5, atol=1e-5)



def _symbolic_rows_product():
    """An executable of ``x @ w`` with x's row count symbolic, its product kernel's PrimFunc
    (before the loop passes) and ``w``."""
    from ember.graph import Call, Function, Module, Var, const
    from ember.graph.infer import infer_types
    from ember.graph.types import Dim, TensorType

    w = _r(96, 80)
    x = Var("x", TensorType((Dim("rows"), 96), "float32"))
    mod = infer_types(Module({"main": Function([x], Call("nn.matmul", [x, const(w)], {}))}))
    exe = ember.compile(mod)
    (func, _, _), = [k for k in exe.kernel_sources if "matmul" in k[2]]
    return exe, func, w


def _past_twin(body):
    """A kernel's body past the branch to its static twin (``ember.compiler.twin``: the group
    compiled for the likely row count, a batch's 1)."""
    from ember.loop.expr import EQ, IntImm, Var
    from ember.loop.stmt import IfThenElse

    assert isinstance(body, IfThenElse) and body.condition == EQ(Var("rows"), IntImm(1)), body
    return body.else_case


def _allocated(stmt) -> set:
    from ember.loop.stmt import Allocate
    from ember.loop.visit import walk

    return {n.buffer.name for n in walk(stmt) if isinstance(n, Allocate)}


def test_a_product_over_a_symbolic_row_count_reads_its_rows_in_place():
    """Rows read in place with a symbolic count M: the last block's rows past M read row
    M - 1 (clamped, never stored), which the lowering proves in bounds, so no FMA is guarded
    (packing A instead was a scalar pass of masked loads per call). Exact at row counts that
    do and do not fill the last block."""
    from ember.loop.expr import Min
    from ember.loop.stmt import IfThenElse, Store
    from ember.loop.visit import walk

    exe, func, w = _symbolic_rows_product()
    body = _past_twin(func.body)
    assert isinstance(body, IfThenElse)  # (the few-rows variant first: the next test)
    generic = body.else_case
    assert not any(name.endswith("_Ap") for name in _allocated(generic))
    assert any(isinstance(n, Min) for n in walk(generic))  # the clamp
    for n in walk(generic):  # only the write-back is guarded, not the accumulators' FMAs
        if isinstance(n, IfThenElse):
            assert all(s.buffer.scope != "local" for s in walk(n) if isinstance(s, Store)), n
    for rows in (1, 14, 37, 300):
        a = _r(rows, 96)
        np.testing.assert_allclose(exe.run(a)[0], a @ w, rtol=1e-4, atol=1e-4)


def test_a_product_over_a_symbolic_row_count_runs_few_rows_one_at_a_time():
    """A decoding step's product has one row: the generic kernel's MR-row block would compute
    MR rows for it. The kernel branches on its row count: below FEW_ROWS (and MR) one row at a
    time, read in place (no packed A); exact on both sides of the branch."""
    from ember.kernels.matmul import FEW_ROWS, micro_tile
    from ember.loop.expr import LT, IntImm, Var
    from ember.loop.stmt import IfThenElse

    exe, func, w = _symbolic_rows_product()
    body = _past_twin(func.body)
    assert isinstance(body, IfThenElse)
    few = min(FEW_ROWS, micro_tile(None)[0])
    assert body.condition == LT(Var("rows"), IntImm(few))
    assert not any(name.endswith("_Ap") for name in _allocated(body.then_case))
    # its block spans as many of the 80 columns' panels (of 2 vectors) as divide their count and
    # fit ROW_ACCUMULATORS (AVX-512: all three, 6 FMA chains in flight, one broadcast of the
    # row's element serving them, where a panel alone was 2 latency-bound chains)
    from ember.kernels.matmul import ROW_ACCUMULATORS
    from ember.loop.stmt import Allocate
    from ember.loop.visit import walk

    nr = micro_tile(None)[1]
    panels = -(-80 // nr)
    span = max(p for p in range(1, panels + 1) if panels % p == 0 and 2 * p <= ROW_ACCUMULATORS)
    acc, = [n.buffer for n in walk(body.then_case) if isinstance(n, Allocate) and n.buffer.scope == "local"]
    assert [int(d.value) for d in acc.shape] == [1, span * nr]
    for rows in (1, 2, few - 1, few, few + 1):
        a = _r(rows, 96)
        np.testing.assert_allclose(exe.run(a)[0], a @ w, rtol=1e-4, atol=1e-4)


def test_a_tuned_product_over_a_symbolic_row_count_keeps_its_few_rows_variant():
    """A tuning record replaces the generic kernel's schedule, not the few-rows branch."""
    from ember.compiler.group import lower_group
    from ember.loop.stmt import IfThenElse

    exe, _, _ = _symbolic_rows_product()
    (name, fn), = [(g, fn) for g, fn in exe.groups if "matmul" in g]
    k = lower_group(fn, name, exe.target)
    tuned = lower_group(fn, name, exe.target, tuned=("{}", k.schedule.trace.to_json()))
    assert len(tuned.variants) == 1
    assert isinstance(tuned.lowered().body, IfThenElse)
