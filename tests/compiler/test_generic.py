"""Shape-generic kernels: groups that differ only in sizes share one kernel, each call passing
its sizes; what the shape rules assume of the sizes holds for every call that shares it."""
import numpy as np
import pytest

import ember
from ember.compiler.generic import generalize, generic_kernels
from ember.graph import Call, Function, Module, Tuple, Var, const
from ember.graph.infer import infer_types
from ember.graph.types import Dim, TensorType


def T(*shape):
    return TensorType(shape, "float32")


def mod_of(params, body):
    return infer_types(Module({"main": Function(params, body)}))


def _softmax(v, axis=-1):
    e = np.exp(v - v.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_elementwise_groups_of_different_sizes_share_one_kernel():
    """Two chains of the same elementwise ops on tensors of different sizes (each after its own
    Lp normalization, an opaque op: the chain is a group of its own) are one kernel called
    twice with its sizes -- all but the short last axis, along which its vectors run; results
    are numpy's. Small ones keep static kernels."""
    x, y = Var("x", T(48, 32, 40)), Var("y", T(64, 16, 40))

    def chain(v):
        s = Call("nn.lp_normalize", [v], {"axis": -1, "p": 2})
        return Call("nn.relu", [Call("subtract", [Call("multiply", [s, s]), s])])
    exe = ember.compile(mod_of([x, y], Tuple([chain(x), chain(y)])))
    calls = [k for k, _ in exe.kernel_calls if "multiply" in k]
    assert len(calls) == 2 and len(set(calls)) == 1
    sized = [c for c in exe.program["calls"] if "scalars" in c]
    assert sorted(tuple(sorted(c["scalars"].values())) for c in sized) == [(16, 64), (32, 48)]
    rng = np.random.default_rng(0)
    xv, yv = rng.standard_normal((48, 32, 40)).astype("float32"), rng.standard_normal((64, 16, 40)).astype("float32")
    for got, v in zip(exe.run(xv, yv), (xv, yv)):
        s = v / np.sqrt((v * v).sum(-1, keepdims=True))
        np.testing.assert_allclose(got, np.maximum(s * s - s, 0), rtol=1e-5, atol=1e-7)
    small_x, small_y = Var("x", T(3, 6, 40)), Var("y", T(5, 2, 40))
    exe = ember.compile(mod_of([small_x, small_y], Tuple([chain(small_x), chain(small_y)])))
    assert len({k for k, _ in exe.kernel_calls if "multiply" in k}) == 2


def _slice_last_7(n: int) -> Function:
    x = Var("p0", T(1, n, 96))
    return infer_types(Function([x], Call("strided_slice", [x], {"begin": (-7,), "end": (2 ** 63 - 1,),
                                                                "axes": (1,), "strides": (1,)})))


def test_sizes_become_symbols_and_slices_clamp_to_them():
    """Static dims other than 1 become size symbols; a slice of the last 7 generalizes at any
    size (its length min(7, s0), clamped as ONNX does, 7 at 56 rows and 5 at 5); a group with
    a tensor constant keeps its sizes. The folding program's kernels take a slice's bounds as
    sizes too (made absolute first: rows 49 to 56 of 56, 2 to 9 of 9), so both slices share one;
    a start is a size less one (sizes are at least 1; a start may be 0): the last 7 of 5 rows,
    0 to 5, shares it too."""
    from ember.graph.ops.dims import eval_dim
    from ember.graph.printer import astext

    with generic_kernels("all"):
        g, sizes = generalize(_slice_last_7(56), bounds=False)
        small, small_sizes = generalize(_slice_last_7(5), bounds=False)
        c = Var("p0", T(4, 4))
        assert generalize(infer_types(Function([c], Call("add", [c, const(np.ones((4, 4), np.float32))])))) is None
        b56, b56_sizes = generalize(_slice_last_7(56))
        b5, b5_sizes = generalize(_slice_last_7(9))
        b0, b0_sizes = generalize(_slice_last_7(5))
    assert sizes == {"s0": 56, "s1": 96} and small_sizes == {"s0": 5, "s1": 96}
    assert g.params[0].type.shape == (1, Dim("s0"), Dim("s1")) and g.body.type.shape[2] == Dim("s1")
    assert eval_dim(g.body.type.shape[1], sizes) == 7 and eval_dim(small.body.type.shape[1], small_sizes) == 5
    assert astext(b56) == astext(b5)
    assert b56_sizes == {"s0": 56, "s1": 96, "s2": 50, "s3": 56} and b5_sizes == {"s0": 9, "s1": 96, "s2": 3, "s3": 9}
    assert eval_dim(b56.body.type.shape[1], b56_sizes) == 7 and eval_dim(b5.body.type.shape[1], b5_sizes) == 7
    assert astext(b0) == astext(b5) and b0_sizes == {"s0": 5, "s1": 96, "s2": 1, "s3": 5}
    assert eval_dim(b0.body.type.shape[1], b0_sizes) == 5


def test_the_default_leaves_index_remapping_static():
    """A model's reshapes keep their static kernels by default (a runtime division per
    element), transposes and slices go generic; everything goes generic in ``"all"``."""
    x = Var("p0", T(600, 80))
    reshape = infer_types(Function([x], Call("exp", [Call("reshape", [x], {"newshape": (80, 600)})])))
    transpose = infer_types(Function([x], Call("exp", [Call("transpose", [x], {"axes": (1, 0)})])))
    assert generalize(reshape) is None and generalize(transpose) is not None
    with generic_kernels("all"):
        assert generalize(reshape) is not None
    with generic_kernels("none"):
        assert generalize(transpose) is None


def _convs(rng, widths):
    x = Var("x", T(1, widths[0][0], 12, 12))
    y = x
    for cin, cout in widths:
        w = const(rng.standard_normal((cout, cin, 3, 3)).astype("float32") * 0.1)
        y = Call("nn.relu", [Call("nn.conv2d", [y, w], {"padding": (1, 1, 1, 1)})])
    return mod_of([x], y)


def _fold_kernels(mod):
    """``ember.compile(mod)`` and the kernel names of its folding program."""
    from ember.compiler import compile as C

    seen = set()
    orig = C.compile_model

    def spy(m, *a, **k):
        exe = orig(m, *a, **k)
        if k.get("name") == "constants":
            seen.update(n for n, _ in exe.kernel_calls)
        return exe
    C.compile_model = spy
    try:
        return ember.compile(mod), seen
    finally:
        C.compile_model = orig


def test_constant_folding_packs_every_weight_with_one_kernel():
    """The folding program's kernels are shape-generic: three convs of different shapes pack
    their weights with one kernel; the model's results do not change. They are named by what
    they compute, so another model's fold finds them in the cache (a square weight's too: each
    dim is a size of its own)."""
    rng = np.random.default_rng(1)
    mod = _convs(rng, ((8, 32), (32, 64), (64, 32)))
    exe, seen = _fold_kernels(mod)
    packs = {n for n in seen if "pack_conv_weight" in n}
    assert len(packs) == 1
    _, other = _fold_kernels(_convs(rng, ((16, 64), (64, 64))))
    assert {n for n in other if "pack_conv_weight" in n} == packs
    plain = ember.compile(mod, disabled_passes=["block_layout", "pack_conv_weights"])
    xv = rng.standard_normal((1, 8, 12, 12)).astype("float32")
    np.testing.assert_allclose(exe.run(xv)[0], plain.run(xv)[0], rtol=1e-4, atol=1e-5)


def test_a_resize_keeps_its_static_kernel():
    """resize's compute needs the sizes it resizes static (its taps are per position): a
    constant resized in the constant-folding program (YOLOS's position embeddings) keeps its
    sizes, and the model compiles and matches numpy."""
    x = Var("p0", T(1, 192, 14, 14))
    attrs = {"sizes": (1, 192, 14, 14), "scales": None, "roi": None, "method": "cubic",
             "coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75, "exclude_outside": False,
             "extrapolation_value": 0.0, "nearest_mode": "floor"}
    with generic_kernels("all"):
        assert generalize(infer_types(Function([x], Call("resize", [x], attrs)))) is None
    emb = np.random.default_rng(0).standard_normal((1, 192, 14, 14)).astype("float32")
    v = Var("v", T(1, 192, 14, 14))
    exe = ember.compile(mod_of([v], Call("add", [v, Call("resize", [const(emb)], attrs)])))
    vv = np.random.default_rng(1).standard_normal((1, 192, 14, 14)).astype("float32")
    np.testing.assert_allclose(exe.run(vv)[0], vv + emb, rtol=1e-5, atol=1e-5)


def _conv_bias_relu(blocks_in, rows, filters):
    x, w = Var("x", T(1, blocks_in, rows, rows, 32)), Var("w", T(filters, blocks_in * 32, 3, 3, 32))
    b = Var("b", T(1, filters, 1, 1, 32))
    conv = Call("nn.conv2d_nchwc", (x, w), {"padding": (1, 1, 1, 1), "strides": (1, 1), "dilation": (1, 1)})
    return infer_types(Function([x, w, b], Call("nn.relu", (Call("add", (conv, b)),))))


def test_dims_apart_share_a_kernel_whatever_sizes_coincide():
    """With ``apart``, each dim of each parameter is its own symbol: a conv whose filter blocks
    happen to equal its rows (4 and 4) generalizes to the same function as one where they
    differ (4 and 7), each call's sizes checked against what the shape rules assume."""
    from ember.graph.printer import astext

    with generic_kernels("any"):
        same = generalize(_conv_bias_relu(2, 4, 4), frozenset({1}), 2, apart=True)
        other = generalize(_conv_bias_relu(2, 7, 4), frozenset({1}), 2, apart=True)
        by_value = [generalize(_conv_bias_relu(2, r, 4), frozenset({1}), 2) for r in (4, 7)]
    assert astext(same[0]) == astext(other[0])
    assert sorted(same[1].values()) == [2, 4, 4, 4, 4, 64] and sorted(other[1].values()) == [2, 4, 4, 7, 7, 64]
    assert astext(by_value[0][0]) != astext(by_value[1][0])  # (by value, 4 = 4 made another kernel)


def test_unblocking_to_a_channel_count_takes_it_as_a_size():
    """``unblock_channels(channels=1000)`` (a classifier's 1000 classes out of 63 blocks of 16)
    goes generic at tier 0 with the count a size of its own: another count shares the
    kernel, and a count outside the last block is refused by the call's check."""
    from ember.graph.printer import astext

    def unblock(blocks, channels):
        x = Var("x", TensorType((1, blocks, 13, 13, 16), "float32"))
        return infer_types(Function([x], Call("unblock_channels", (x,), {"channels": channels})))

    with generic_kernels("any"):
        a = generalize(unblock(63, 1000), apart=True)
        b = generalize(unblock(7, 100), apart=True)
    assert a is not None and astext(a[0]) == astext(b[0])
    assert sorted(a[1].values()) == [13, 13, 63, 1000]
    with generic_kernels("elementwise"):  # (a model's own kernels keep the count static)
        assert generalize(unblock(63, 1000)) is None
    with pytest.raises(ember.errors.ShapeError):
        infer_types(Function([Var("x", TensorType((1, 63, 13, 13, 16), "float32"))],
                             Call("unblock_channels", (Var("x", TensorType((1, 63, 13, 13, 16), "float32")),),
                                  {"channels": 900})))


def test_pads_of_every_width_share_a_kernel_where_bounds_are_sizes():
    """In the folding program and at tier 0 a pad's widths are sizes, each one more than the
    width (a weight's channels padded by 4 or by 12 to a block, and by 0 on the other axes);
    a model's own kernels keep them static."""
    from ember.graph.printer import astext

    def pad(n):
        x = Var("p0", T(64, 24, 1, 1))
        return infer_types(Function([x], Call("pad", (x,), {"pad_width": (0, 0, 0, 0, 0, n, 0, 0)})))

    with generic_kernels("all"):
        a, b = generalize(pad(4)), generalize(pad(12))
    assert astext(a[0]) == astext(b[0]) and 13 in b[1].values()
    with generic_kernels("elementwise"):
        assert generalize(pad(4)) is None or astext(generalize(pad(4))[0]) != astext(generalize(pad(12))[0])


def test_packing_in_blocks_of_any_width_shares_a_kernel_in_the_fold():
    """The folding program packs conv weights (and blocks channels) of every block with one
    kernel: the block is a size of its own (ShuffleNet's 2, 14, 16, 17)."""
    from ember.graph.printer import astext

    def pack(op, shape, block):
        x = Var("p0", T(*shape))
        return infer_types(Function([x], Call(op, (x,), {"block": block})))

    with generic_kernels("all"):
        a, b = generalize(pack("nn.pack_conv_weight", (28, 8, 3, 3), 14)), generalize(pack("nn.pack_conv_weight", (34, 8, 3, 3), 17))
        c, d = generalize(pack("block_channels", (1, 24, 7, 7), 16)), generalize(pack("block_channels", (1, 40, 7, 7), 32))
    assert astext(a[0]) == astext(b[0]) and 17 in b[1].values()
    assert astext(c[0]) == astext(d[0])
    rng = np.random.default_rng(0)
    w = rng.standard_normal((34, 8, 3, 3)).astype(np.float32)
    x = Var("w", T(34, 8, 3, 3))
    mod = Module({"main": Function([x], Call("nn.pack_conv_weight", (x,), {"block": 17}))})
    with generic_kernels("all"):
        got = ember.compile(mod, wait=True).run(w)[0]
    np.testing.assert_array_equal(got, w.reshape(2, 17, 8, 3, 3).transpose(0, 2, 3, 4, 1))
