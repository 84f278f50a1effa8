import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.graph import Var, const, topo_calls
from ember.graph.passes import PassContext, trim_conv_taps
from ember.graph.passes.trim_conv_taps import live_taps

from .conftest import T, call, module, rand


def _ref(x, w, strides, padding, dilation):
    """2-D convolution with numpy (float64): every tap a strided slice of the padded input."""
    (sh, sw), (dh, dw) = strides, dilation
    t, l, b, r = padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b), (l, r)))
    kh, kw = w.shape[2:]
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
            out += np.einsum("nchw,fc->nfhw", win, w[:, :, i, j])
    return out


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 20), k=st.integers(1, 5), s=st.integers(1, 3), d=st.integers(1, 30),
       before=st.integers(0, 40), after=st.integers(0, 40))
def test_live_taps_hold_every_tap_that_reads_the_input(size, k, s, d, before, after):
    """Every tap that reads is kept; at stride 1 exactly those (a strided window may step over
    the input between a tap's first and last position: such a tap is kept, which is safe)."""
    out = (size + before + after - d * (k - 1) - 1) // s + 1
    if out < 1:
        return
    lo, hi = live_taps(size, out, k, s, d, before)
    reads = [any(0 <= o * s + t * d - before < size for o in range(out)) for t in range(k)]
    kept = [lo <= t < hi for t in range(k)]
    assert all(k_ for k_, r in zip(kept, reads) if r)
    if s == 1 and any(reads):
        assert kept == reads


@pytest.mark.parametrize("dilation,padding,stride", [
    (24, 24, 1),   # DeepLabV3's atrous pyramid on a 14x14 plane: only the centre tap reads
    (36, 36, 1),
    (6, 13, 2),    # strided, uneven padding
])
def test_dead_taps_are_sliced_away_with_the_same_result(dilation, padding, stride):
    x = Var("x", T(1, 8, 14, 14))
    w = rand(16, 8, 3, 3)
    attrs = {"padding": (padding,) * 4, "dilation": (dilation, dilation), "strides": (stride, stride), "groups": 1}
    mod = module([x], call("nn.conv2d", x, const(w), **attrs))
    after = PassContext(opt_level=3).run(mod, [trim_conv_taps])
    (conv,) = [c for c in topo_calls(after) if c.op == "nn.conv2d"]
    live = [t for t in range(3) if t * dilation - padding < 14 and 13 * stride + t * dilation - padding >= 0]
    kernel = conv.args[1].type.shape[2:]
    assert tuple(kernel) == (len(live), len(live))
    if len(live) == 1:
        assert conv.attr("padding") == (0, 0, 0, 0)
    xv = rand(1, 8, 14, 14)
    want = _ref(xv, w, (stride, stride), (padding,) * 4, (dilation, dilation))
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ember.compile(mod).run(xv)[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dilation,stride,size", [(12, 1, 16), (9, 2, 15), (7, 1, 11)])
def test_taps_live_in_some_rows_only_run_in_bands(dilation, stride, size):
    """DeepLabV3's dilation 12 on a 16x16 plane: the first and last 4 rows (and columns) read
    two rows of taps, the middle 8 only the centre: bands of rows, then of columns, each with
    its own taps, concatenated -- the same result for a quarter of the work."""
    x = Var("x", T(1, 8, size, size))
    w = rand(16, 8, 3, 3)
    attrs = {"padding": (dilation,) * 4, "dilation": (dilation, dilation), "strides": (stride, stride), "groups": 1}
    mod = module([x], call("add", call("nn.conv2d", x, const(w), **attrs), const(rand(16, 1, 1))))
    after = PassContext(opt_level=3).run(mod, [trim_conv_taps])
    convs = [c for c in topo_calls(after) if c.op == "nn.conv2d"]
    assert len(convs) > 1 and "concat" in [c.op for c in topo_calls(after)]
    out = after.main.body.type.shape[2]
    full = out * out * 9
    assert sum(int(np.prod(c.type.shape[2:])) * int(np.prod(c.args[1].type.shape[2:])) for c in convs) < full * 2 / 3
    xv = rand(1, 8, size, size)
    want = ember.compile(mod, disabled_passes=["trim_conv_taps"]).run(xv)[0]
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ember.compile(mod).run(xv)[0], want, rtol=1e-4, atol=1e-4)


def test_a_convolution_whose_taps_all_read_is_left_alone():
    x = Var("x", T(1, 4, 9, 9))
    mod = module([x], call("nn.conv2d", x, const(rand(8, 4, 3, 3)), padding=(1, 1, 1, 1), groups=1))
    assert PassContext(opt_level=3).run(mod, [trim_conv_taps]) is mod
