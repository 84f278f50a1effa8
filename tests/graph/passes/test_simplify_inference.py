import numpy as np

import ember
from ember.graph import Tuple, Var, const, topo_calls
from ember.graph.passes import PassContext, fold_constant, simplify_inference
from ember.compiler.fold import evaluate_constants

FOLD = {"evaluate": evaluate_constants}  # (fold_constant computes with the compiler)

from .conftest import T, call, module, rand


def _bn_args(c):
    rng = np.random.default_rng(1)
    gamma, beta, mean = (rng.standard_normal(c).astype("float32") for _ in range(3))
    var = (rng.random(c) + 0.5).astype("float32")
    return gamma, beta, mean, var


def _bn_ref(y, gamma, beta, mean, var, eps=1e-5):
    s = (gamma / np.sqrt(var + eps))[:, None, None]
    return (y - mean[:, None, None]) * s + beta[:, None, None]


def _conv_ref(x, w):  # 1x1 conv, NCHW, batch 1
    return np.einsum("chw,fc->fhw", x[0], w[:, :, 0, 0])[None]


def simplify(mod):
    return PassContext(opt_level=3, config=FOLD).run(mod, [simplify_inference, fold_constant])


def test_batch_norm_after_conv_folds_into_its_weights():
    x = Var("x", T(1, 3, 4, 4))
    w = rand(5, 3, 1, 1)
    conv = call("nn.conv2d", x, const(w), strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
    stats = _bn_args(5)
    before = module([x], call("nn.batch_norm", conv, *map(const, stats), axis=1, epsilon=1e-5))
    after = simplify(before)
    # expected graph: add(conv2d(x, W'), shift'), both constants
    body = after.main.body
    assert [c.op for c in topo_calls(after)] == ["nn.conv2d", "add"]
    w2, shift = body.args[0].args[1].value, body.args[1].value
    s = stats[0] / np.sqrt(stats[3] + 1e-5)
    np.testing.assert_allclose(w2, w * s[:, None, None, None], rtol=1e-5)
    np.testing.assert_allclose(shift.reshape(-1), stats[1] - stats[2] * s, rtol=1e-5, atol=1e-6)
    # and the same numbers end to end
    xv = rand(1, 3, 4, 4)
    got = ember.compile(after).run(xv)[0]
    np.testing.assert_allclose(got, _bn_ref(_conv_ref(xv, w)[0], *stats)[None], rtol=1e-4, atol=1e-5)


def test_conv_bias_folds_into_the_shift():
    x = Var("x", T(1, 2, 3, 3))
    w, b = rand(4, 2, 1, 1), rand(4)
    conv = call("nn.conv2d", x, const(w), strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
    stats = _bn_args(4)
    before = module([x], call("nn.batch_norm", call("nn.bias_add", conv, const(b), axis=1),
                              *map(const, stats), axis=1, epsilon=1e-5))
    after = simplify(before)
    assert [c.op for c in topo_calls(after)] == ["nn.conv2d", "add"]
    xv = rand(1, 2, 3, 3)
    want = _bn_ref((_conv_ref(xv, w) + b[None, :, None, None])[0], *stats)[None]
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], want, rtol=1e-4, atol=1e-5)


def test_batch_norm_alone_becomes_scale_and_shift():
    x = Var("x", T(1, 3, 2, 2))
    stats = _bn_args(3)
    after = simplify(module([x], call("nn.batch_norm", x, *map(const, stats), axis=1, epsilon=1e-5)))
    assert [c.op for c in topo_calls(after)] == ["multiply", "add"]
    xv = rand(1, 3, 2, 2)
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], _bn_ref(xv[0], *stats)[None], rtol=1e-4, atol=1e-5)


def test_conv_read_twice_keeps_its_weights():
    x = Var("x", T(1, 2, 3, 3))
    conv = call("nn.conv2d", x, const(rand(2, 2, 1, 1)), strides=(1, 1), padding=(0, 0, 0, 0),
                dilation=(1, 1), groups=1)
    bn = call("nn.batch_norm", conv, *map(const, _bn_args(2)), axis=1, epsilon=1e-5)
    after = simplify(module([x], call("add", bn, conv)))
    convs = [c for c in topo_calls(after) if c.op == "nn.conv2d"]
    # untouched: its output is needed as it is
    assert len(convs) == 1 and convs[0].args[1] is conv.args[1]


def test_copy_is_removed():
    x = Var("x", T(3))
    after = simplify(module([x], call("exp", call("copy", x))))
    assert after.main.body.args[0] is x


def test_ops_that_change_nothing_are_removed():
    """A pad of no widths (Swin pads its rows to a multiple of its window: by nothing at
    224x224), a slice of everything, a transpose of no axes, a reshape to its own shape: each
    would be a kernel and a copy. A slice that drops an element stays."""
    x = Var("x", T(1, 4, 6))
    for op in (call("pad", x, pad_width=(0, 0, 0, 0, 0, 0)),
               call("strided_slice", x, axes=(1, 2), begin=(0, -9), end=(4, 2 ** 63 - 1)),
               call("transpose", x, axes=(0, 1, 2)), call("reshape", x, newshape=(1, 4, 6))):
        after = simplify(module([x], call("exp", op)))
        assert after.main.body.args[0] is x, op.op
    kept = simplify(module([x], call("exp", call("strided_slice", x, axes=(2,), begin=(1,), end=(6,)))))
    assert kept.main.body.args[0].op == "strided_slice"


def test_a_transpose_of_axes_of_one_is_a_reshape():
    x = Var("x", T(5, 1, 6))
    after = simplify(module([x], call("exp", call("transpose", x, axes=(1, 0, 2)))))
    r = after.main.body.args[0]
    assert r.op == "reshape" and r.attr("newshape") == (1, 5, 6)
    kept = simplify(module([x], call("exp", call("transpose", x, axes=(2, 1, 0)))))
    assert kept.main.body.args[0].op == "transpose"


def test_folded_conv_carries_the_spans_of_conv_bias_and_batch_norm():
    x = Var("x", T(1, 4, 5, 5))
    with ember.graph.source_span("Conv_1"):
        y = call("nn.conv2d", x, const(rand(6, 4, 1, 1)), strides=(1, 1), padding=(0, 0, 0, 0),
                 dilation=(1, 1), groups=1)
        y = call("nn.bias_add", y, const(rand(6)), axis=1)
    with ember.graph.source_span("BatchNormalization_2"):
        y = call("nn.batch_norm", y, *map(const, _bn_args(6)), axis=1, epsilon=1e-5)
    out = simplify(module([x], y))
    conv = next(c for c in topo_calls(out.main.body) if c.op == "nn.conv2d")
    assert conv.span == ("Conv_1", "BatchNormalization_2")
    assert out.main.body.span == ("Conv_1", "BatchNormalization_2")


def test_small_constant_powers_are_products():
    """GPT-2's tanh GELU cubes its input: products, not a pow call per element."""
    x = Var("x", T(4, 9))
    for e, ops in [(2.0, ["multiply"]), (3.0, ["multiply", "multiply"]), (4.0, ["multiply", "multiply"]),
                   (0.5, ["sqrt"]), (1.0, []), (2.5, ["power"])]:
        mod = module([x], call("power", x, const(np.float32(e))))
        after = PassContext(opt_level=3, config=FOLD).run(mod, [simplify_inference])
        assert [c.op for c in topo_calls(after)] == ops, e
        xv = np.abs(rand(4, 9)) + 0.1
        np.testing.assert_allclose(ember.compile(after).run(xv)[0], xv ** e, rtol=1e-5)


def _scale_layer(y, c, d):
    """Caffe's scale layer after a batch norm, as ONNX files converted from Caffe have it:
    ``y * c + d`` by per-channel constants of shape (C, 1, 1)."""
    return call("add", call("multiply", y, const(c.reshape(-1, 1, 1))), const(d.reshape(-1, 1, 1)))


def test_a_batch_norm_and_a_scale_layer_are_one_product_and_one_sum():
    x = Var("x", T(1, 4, 3, 3))
    stats, c, d = _bn_args(4), rand(4) + 2.0, rand(4)
    bn = call("nn.batch_norm", x, *map(const, stats), axis=1, epsilon=1e-5)
    before = module([x], call("nn.relu", _scale_layer(bn, c, d)))
    after = simplify(before)
    assert [n.op for n in topo_calls(after)] == ["multiply", "add", "nn.relu"]
    xv = rand(1, 4, 3, 3)
    want = np.maximum(_bn_ref(xv[0], *stats) * c[:, None, None] + d[:, None, None], 0)[None]
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], want, rtol=1e-5, atol=1e-5)


def test_a_scale_layer_after_a_conv_and_its_batch_norm_folds_into_the_weights():
    x = Var("x", T(1, 3, 4, 4))
    w, stats, c, d = rand(5, 3, 1, 1), _bn_args(5), rand(5), rand(5)
    conv = call("nn.conv2d", x, const(w), strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
    bn = call("nn.batch_norm", conv, *map(const, stats), axis=1, epsilon=1e-5)
    after = simplify(module([x], _scale_layer(bn, c, d)))
    assert [n.op for n in topo_calls(after)] == ["nn.conv2d", "add"]
    s = stats[0] / np.sqrt(stats[3] + 1e-5)
    np.testing.assert_allclose(after.main.body.args[0].args[1].value, w * (s * c)[:, None, None, None], rtol=1e-5)
    xv = rand(1, 3, 4, 4)
    want = _bn_ref(_conv_ref(xv, w)[0], *stats) * c[:, None, None] + d[:, None, None]
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], want[None], rtol=1e-4, atol=1e-5)


def test_a_chain_read_twice_is_kept():
    x = Var("x", T(1, 2, 3, 3))
    c = rand(2).reshape(2, 1, 1)
    inner = call("add", x, const(c))  # read by the product and by the output: composing it would compute both
    after = simplify(module([x], Tuple([call("multiply", inner, const(c)), inner])))
    assert sorted(n.op for n in topo_calls(after)) == ["add", "multiply"]
