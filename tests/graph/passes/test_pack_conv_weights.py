import numpy as np

import ember
from ember.graph import Var, const, topo_calls
from ember.graph.passes import PassContext, fold_constant, pack_conv_weights, simplify_inference
from ember.kernels.conv import conv_blocks
from ember.compiler.fold import evaluate_constants

FOLD = {"evaluate": evaluate_constants}  # (fold_constant computes with the compiler)

from .conftest import T, call, module, rand


def _conv(x, w, **attrs):
    return call("nn.conv2d", x, w, **{"padding": (1, 1, 1, 1), "groups": 1, **attrs})


def _ref(x, w, groups=1):
    """3x3 conv, padding 1, NCHW, with numpy (float64)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    n, c, h, wd = x.shape
    f = w.shape[0]
    cg, fg = c // groups, f // groups
    out = np.zeros((n, f, h, wd))
    for g in range(groups):
        for i in range(3):
            for j in range(3):
                out[:, g * fg:(g + 1) * fg] += np.einsum(
                    "nchw,fc->nfhw", xp[:, g * cg:(g + 1) * cg, i:i + h, j:j + wd], w[g * fg:(g + 1) * fg, :, i, j])
    return out


def run(mod):
    return PassContext(opt_level=3, config=FOLD).run(mod, [simplify_inference, pack_conv_weights, fold_constant])


def test_constant_weights_are_packed_once_for_the_micro_kernel():
    x = Var("x", T(1, 8, 9, 9))
    w = rand(20, 8, 3, 3)
    after = run(module([x], _conv(x, const(w))))
    (conv,) = topo_calls(after)  # the packing folded into a constant: no call left for it
    fb, _ = conv_blocks(20, 8, 9)
    assert conv.attr("weight_block") == fb > 1 and conv.attr("channels") == 20
    packed = conv.args[1].value
    assert packed.shape == (-(-20 // fb), 8, 3, 3, fb)
    # block b holds channels b*fb .. b*fb+fb-1 in its last axis, zeros past the 20th (the
    # block size follows the host's vector registers: one block of 20 on AVX-512, more on AVX2)
    for b in range(packed.shape[0]):
        n = min(fb, 20 - b * fb)
        np.testing.assert_array_equal(np.moveaxis(packed[b, ..., :n], -1, 0), w[b * fb: b * fb + n])
        assert not packed[b, ..., n:].any()
    xv = rand(1, 8, 9, 9)
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], _ref(xv, w), rtol=1e-4, atol=1e-4)


def test_a_weight_computed_from_constants_is_packed_too():
    """Batch-norm folding leaves ``W * scale``: constant-valued, so packed (and folded) as well."""
    x = Var("x", T(1, 6, 7, 7))
    w, s = rand(12, 6, 3, 3), rand(12, 1, 1, 1)
    after = run(module([x], _conv(x, call("multiply", const(w), const(s)))))
    (conv,) = topo_calls(after)
    assert conv.attr("weight_block") > 1
    xv = rand(1, 6, 7, 7)
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], _ref(xv, w * s), rtol=1e-4, atol=1e-4)


def test_a_1x1_conv_of_a_1x1_image_is_a_matrix_product():
    """A squeeze-excitation's reduction (a 1x1 conv of a 1x1 image, 10 channels) becomes
    reshape, dense, reshape: the products' kernels serve it. A 3x3 image's stays a conv."""
    x = Var("x", T(2, 24, 1, 1))
    w = rand(10, 24, 1, 1)
    after = run(module([x], _conv(x, const(w), padding=(0, 0, 0, 0))))
    assert [c.op for c in topo_calls(after)] == ["reshape", "nn.dense", "reshape"]
    xv = rand(2, 24, 1, 1)
    want = np.einsum("nc,fc->nf", xv[:, :, 0, 0], w[:, :, 0, 0])[:, :, None, None]
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], want, rtol=1e-5, atol=1e-5)
    y = Var("y", T(2, 24, 3, 3))
    kept = run(module([y], _conv(y, const(w), padding=(0, 0, 0, 0))))
    assert [c.op for c in topo_calls(kept)] == ["nn.conv2d"]


def test_runtime_weights_and_depthwise_convs_are_left_alone():
    x, w = Var("x", T(1, 8, 9, 9)), Var("w", T(12, 8, 3, 3))
    mod = module([x, w], _conv(x, w))
    assert run(mod).main.body.attr("weight_block", 0) == 0
    dw = rand(8, 1, 3, 3)
    after = run(module([x], _conv(x, const(dw), groups=8)))
    (conv,) = topo_calls(after)
    assert conv.attr("weight_block", 0) == 0 and conv.args[1].value.shape == (8, 1, 3, 3)


def test_packed_and_unpacked_graphs_agree_with_groups():
    x = Var("x", T(2, 6, 8, 8))
    w = rand(9, 2, 3, 3)
    mod = module([x], _conv(x, const(w), groups=3))
    packed, plain = ember.compile(mod), ember.compile(mod, disabled_passes=["pack_conv_weights"])
    xv = rand(2, 6, 8, 8)
    np.testing.assert_allclose(packed.run(xv)[0], plain.run(xv)[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(packed.run(xv)[0], _ref(xv, w, groups=3), rtol=1e-4, atol=1e-4)
