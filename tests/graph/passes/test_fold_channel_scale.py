"""fold_channel_scale: a squeeze-excitation's ``x * s`` folded into the narrowing 1x1 conv
that reads it, the same results; left alone where the fold would cost more than the pass."""
import numpy as np
import pytest

import ember
from ember.errors import ShapeError
from ember.graph import Var, const, topo_calls
from ember.graph.passes import PassContext, block_layout, dce, fold_channel_scale, fold_constant, simplify_inference
from ember.kernels.conv_nchwc import channel_block
from ember.compiler.fold import evaluate_constants

FOLD = {"evaluate": evaluate_constants}  # (fold_constant computes with the compiler)

from .conftest import T, call, module, rand

FB = channel_block()


def _conv(x, w, **attrs):
    return call("nn.conv2d", x, const(w), **{"padding": (0, 0, 0, 0), **attrs})


def _se_block(x, c: int, e: int, out: int, hw: int, extra_reader: bool = False, pad: bool = False):
    """An inverted residual with a squeeze-excitation (EfficientNet's): expand to ``e``
    channels, depthwise 3x3, SiLU, scale per channel by sigmoid(conv(silu(conv(mean)))),
    project to ``out``."""
    silu = lambda v: call("multiply", v, call("sigmoid", v))  # noqa: E731
    y = silu(call("add", _conv(x, rand(e, c, 1, 1) * 0.2), const(rand(1, e, 1, 1))))
    d = silu(_conv(y, rand(e, 1, 3, 3) * 0.2, groups=e, padding=(1, 1, 1, 1)))
    s = call("mean", d, axis=(2, 3), keepdims=True)
    s = silu(_conv(s, rand(8, e, 1, 1) * 0.2))
    s = call("sigmoid", _conv(s, rand(e, 8, 1, 1) * 0.2))
    scaled = call("multiply", d, s)
    z = _conv(scaled, rand(out, e, 1, 1) * 0.2, padding=(1, 1, 1, 1) if pad else (0, 0, 0, 0))
    return call("add", z, call("mean", scaled, axis=(1,), keepdims=True)) if extra_reader else z


def _run(mod):
    return PassContext(opt_level=3, config=FOLD).run(mod, [simplify_inference, block_layout, fold_channel_scale, fold_constant, dce])


def _scaled_convs(mod) -> list:
    return [n for n in topo_calls(mod) if n.op == "nn.conv2d_nchwc" and len(n.args) == 3]


def _agrees(mod, shape):
    x = rand(*shape)
    folded = ember.compile(mod).run(x)[0]
    plain = ember.compile(mod, disabled_passes=["fold_channel_scale", "block_layout"]).run(x)[0]
    np.testing.assert_allclose(folded, plain, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("batch", [1, 2])
def test_a_squeeze_excitation_scale_runs_in_the_projection(batch):
    c, e, out, hw = FB // 2, 3 * FB, FB, 12
    x = Var("x", T(batch, c, hw, hw))
    mod = module([x], _se_block(x, c, e, out, hw))
    after = _run(mod)
    (conv,) = _scaled_convs(after)
    assert conv.args[2].type.shape == (batch, e // FB, 1, 1, FB)
    assert not any(n.op == "multiply" and any(a is conv.args[2] for a in n.args) for n in topo_calls(after))
    _agrees(mod, (batch, c, hw, hw))


@pytest.mark.parametrize("why", ["read elsewhere", "padded", "small plane", "as wide out as in"])
def test_left_alone_where_the_fold_does_not_pay(why):
    c, e, out, hw = FB // 2, 3 * FB, FB, 12
    if why == "small plane":
        hw = 7
    if why == "as wide out as in":
        out = e
    x = Var("x", T(1, c, hw, hw))
    mod = module([x], _se_block(x, c, e, out, hw, extra_reader=why == "read elsewhere", pad=why == "padded"))
    assert _scaled_convs(_run(mod)) == []
    _agrees(mod, (1, c, hw, hw))


def test_a_scale_of_the_wrong_shape_is_a_shape_error():
    from ember.graph.ops import infer_type

    data, w = T(1, 2, 5, 5, FB), T(1, 2 * FB, 1, 1, FB)
    attrs = {"strides": None, "padding": None, "dilation": None, "groups": 1}
    assert infer_type("nn.conv2d_nchwc", [data, w, T(1, 2, 1, 1, FB)], attrs).shape == (1, 1, 5, 5, FB)
    with pytest.raises(ShapeError, match="scale"):
        infer_type("nn.conv2d_nchwc", [data, w, T(1, 2, 5, 5, FB)], attrs)
    with pytest.raises(ShapeError, match="scale"):
        infer_type("nn.conv2d_nchwc", [data, T(2, 1, 3, 3, FB), T(1, 2, 1, 1, FB)], {**attrs, "groups": 2 * FB})


@pytest.mark.parametrize("likely,folded", [({"h": 12, "w": 12}, True), ({"h": 7, "w": 7}, False), (None, False)])
def test_a_symbolic_plane_folds_by_its_likely_size(likely, folded):
    """With a dynamic height and width the plane's size is its likely one (what the compile
    assumes of its symbols, ember.compiler.likely); with none, it is not folded."""
    from ember.graph.types import Dim
    from ember.kernels.common import likely_sizes

    c, e, out = FB // 2, 3 * FB, FB
    x = Var("x", T(1, c, Dim("h"), Dim("w")))
    mod = module([x], _se_block(x, c, e, out, 12))
    with likely_sizes(likely):
        after = _run(mod)
    assert bool(_scaled_convs(after)) == folded
