import numpy as np

import ember
from ember.graph import Call, Function, Module, Tuple as Tuple_, Var, assert_structural_equal, const, topo_calls
from ember.graph.passes import PassContext, VerifyAfterPass, fuse_ops

from .conftest import T, call, module, rand


def fuse(mod, opt_level=3):
    return PassContext(opt_level=opt_level, instruments=[VerifyAfterPass()]).run(mod, [fuse_ops])


def _conv(x, w):
    return call("nn.conv2d", x, w, strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)


def test_conv_takes_bias_activation_and_residual_as_epilogue():
    x = Var("x", T(1, 4, 8, 8))
    w, b = const(rand(4, 4, 3, 3)), const(rand(4, 1, 1))
    y = call("nn.relu", call("add", call("add", _conv(x, w), b), x))
    after = fuse(module([x], y))
    p = [Var(f"p{i}", t) for i, t in enumerate([T(1, 4, 8, 8), T(4, 4, 3, 3), T(4, 1, 1)])]
    group = Function(p, call("nn.relu", call("add", call("add", _conv(p[0], p[1]), p[2]), p[0])))
    from ember.graph.infer import infer_types

    group = infer_types(group)
    expected = Module({"main": Function([x], Call("fused_conv2d_add_relu", [x, w, b], {}, T(1, 4, 8, 8))),
                       "fused_conv2d_add_relu": group})
    assert_structural_equal(after, infer_types(expected))


def test_elementwise_chain_is_one_group_and_a_shared_value_ends_it():
    x = Var("x", T(16))
    e = call("exp", x)
    y = call("add", call("nn.relu", e), call("sigmoid", e))
    z = call("negative", e)  # e is read by another output too: materialized
    after = fuse(module([x], Tuple_([y, z])))
    calls = topo_calls(after.main)
    # (relu's and sigmoid's chains meet in the add, which only reads them: one group)
    assert sorted(c.op for c in calls) == ["fused_exp", "fused_negative", "fused_relu_sigmoid_add"]
    assert all(c.op in after for c in calls)
    assert [c.op for c in topo_calls(after["fused_exp"])] == ["exp"]


def test_chains_that_only_an_elementwise_op_reads_join_its_group():
    """An LSTM's gates: sigmoid and tanh of slices of one projection, multiplied and added --
    one kernel, where a chain read elsewhere too stays apart."""
    x, c = Var("x", T(2, 16)), Var("c", T(2, 4))

    def gate(k, fn):
        return call(fn, call("strided_slice", x, begin=(4 * k,), end=(4 * k + 4,), axes=(1,)))
    kept = gate(3, "tanh")  # also an output: its own group
    c_new = call("add", call("multiply", gate(0, "sigmoid"), c), call("multiply", gate(1, "sigmoid"), gate(2, "tanh")))
    y = call("multiply", c_new, kept)
    mod = module([x, c], Tuple_([y, kept]))
    after = fuse(mod)
    assert sorted(c_.op for c_ in topo_calls(after.main)) == ["fused_strided_slice_sigmoid_multiply_tanh_add",
                                                               "fused_strided_slice_tanh"]
    xv, cv = rand(2, 16), rand(2, 4)
    for got, want in zip(ember.compile(mod).run(xv, cv), ember.compile(mod, opt_level=0).run(xv, cv)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_readers_that_meet_again_stay_in_the_group():
    """A diamond (SiLU: x * sigmoid(x)) after a conv is the conv's epilogue: one kernel."""
    x = Var("x", T(1, 4, 8, 8))
    a = call("add", _conv(x, const(rand(4, 4, 3, 3))), const(rand(4, 1, 1)))
    y = call("nn.relu", call("multiply", a, call("sigmoid", a)))
    after = fuse(module([x], y))
    (only,) = topo_calls(after.main)
    assert [c.op for c in topo_calls(after[only.op])] == ["nn.conv2d", "add", "sigmoid", "multiply", "nn.relu"]
    xv = rand(1, 4, 8, 8)
    np.testing.assert_allclose(ember.compile(module([x], y)).run(xv)[0],
                               ember.compile(module([x], y), opt_level=0).run(xv)[0], rtol=1e-5, atol=1e-5)


def test_two_diamonds_over_the_same_ops_do_not_split_them_between_groups():
    """a's readers meet in `out`, and so do s's, through the same products (trilinear grid
    sampling's weights times its taps): the second diamond must not take ops the first
    counts on, or a value leaves its group without being its output (a LoweringError)."""
    x, y = Var("x", T(16)), Var("y", T(16))
    a, s = call("exp", x), call("exp", y)
    m1 = call("multiply", call("negative", a), call("tanh", s))
    m2 = call("multiply", call("abs", a), call("sigmoid", s))
    mod = module([x, y], call("add", m1, m2))
    fuse(mod)  # (the verifier checks every group)
    xv, yv = rand(16), rand(16)
    want = -np.exp(xv) * np.tanh(np.exp(yv)) + np.exp(xv) / (1 + np.exp(-np.exp(yv)))
    np.testing.assert_allclose(ember.compile(mod).run(xv, yv)[0], want, rtol=1e-5, atol=1e-6)


def test_a_diamond_does_not_take_a_reader_that_already_joined_an_anchor():
    """a is read by r1, which joined the conv's epilogue first (dataflow order), and by r2;
    r1 and r2 meet in `out`. The diamond from a cannot take r1 back (FastViT through from_torch
    failed this way), so a leaves its group as its output."""
    x, y = Var("x", T(1, 4, 8, 8)), Var("y", T(1, 4, 8, 8))
    c = call("add", _conv(x, const(rand(4, 4, 3, 3))), const(rand(4, 1, 1)))
    a = call("add", call("multiply", y, const(np.float32(2))), const(np.float32(1)))
    out = call("add", call("add", c, a), call("exp", a))
    mod = module([x, y], out)
    fuse(mod)
    xv, yv = rand(1, 4, 8, 8), rand(1, 4, 8, 8)
    np.testing.assert_allclose(ember.compile(mod).run(xv, yv)[0], ember.compile(mod, opt_level=0).run(xv, yv)[0],
                               rtol=1e-5, atol=1e-5)


def test_injective_ops_join_an_elementwise_chain_but_not_an_anchor():
    x = Var("x", T(1, 4, 8, 8))
    conv = _conv(x, const(rand(4, 4, 3, 3)))
    y = call("transpose", call("nn.relu", conv), axes=(0, 2, 3, 1))
    after = fuse(module([x], y))
    assert [c.op for c in topo_calls(after.main)] == ["fused_conv2d_relu", "fused_transpose"]


def test_identical_groups_share_one_function():
    x = Var("x", T(8))
    y = call("add", call("nn.relu", call("exp", x)), call("nn.relu", call("exp", call("negative", x))))
    after = fuse(module([x], call("sum", y, axis=(0,), keepdims=False)))
    names = [c.op for c in topo_calls(after.main)]
    assert len(names) == len(set(names)) or len(set(after)) < len(names) + 1


def test_opt_level_0_makes_one_group_per_op():
    x = Var("x", T(8))
    after = fuse(module([x], call("nn.relu", call("exp", x))), opt_level=0)
    assert [c.op for c in topo_calls(after.main)] == ["fused_exp", "fused_relu"]


def test_a_model_output_read_by_another_op_is_materialized():
    x = Var("x", T(4))
    e = call("exp", x)
    from ember.graph import Tuple

    after = fuse(module([x], Tuple([e, call("nn.relu", e)])))
    assert [c.op for c in topo_calls(after.main)] == ["fused_exp", "fused_relu"]


def test_constants_become_group_parameters():
    x = Var("x", T(3))
    c = const(np.ones(3, "float32"))
    after = fuse(module([x], call("add", x, c)))
    assert after.main.body.args == (x, c)
    assert [p.name for p in after["fused_add"].params] == ["p0", "p1"]


def _dequantized_codes():
    """A conv whose epilogue quantizes to uint8; the codes' dequantization read by a mean and a
    product (a squeeze-excitation)."""
    x = Var("x", T(1, 4, 8, 8))
    c = call("add", _conv(x, const(rand(4, 4, 3, 3))), const(rand(4, 1, 1)))
    q = call("cast", call("minimum", call("maximum", call("cast", call("round", c), dtype="int32"),
                                          const(np.int32(0))), const(np.int32(255))), dtype="uint8")
    d = call("multiply", call("subtract", call("cast", q, dtype="float32"), const(np.float32(3.0))),
             const(np.float32(0.02)))
    m = call("mean", d, axis=(2, 3), keepdims=True)
    return x, call("multiply", d, call("sigmoid", m))


def test_a_dequantization_several_kernels_read_is_computed_in_each_from_the_codes():
    x, y = _dequantized_codes()
    after = fuse(module([x], y))
    main = topo_calls(after.main)
    # the conv's kernel stores the codes; the mean's and the product's each widen them: no
    # kernel writes the dequantized floats
    assert len(main) == 3 and main[0].type.dtype == "uint8", [(c.op, c.type) for c in main]
    for c in main[1:]:
        assert c.args[0] is main[0] and "cast" in [k.op for k in topo_calls(after[c.op])]
    xv = rand(1, 4, 8, 8) * 40
    want = ember.compile(module([x], y), opt_level=0, cache=False).run(xv)[0]
    np.testing.assert_allclose(ember.compile(module([x], y), cache=False).run(xv)[0], want, rtol=1e-5, atol=1e-6)


def test_softmax_and_layer_norm_take_an_elementwise_epilogue():
    """A quantizer after a softmax or a layer norm (QDQ transformers) is computed in the row
    kernel's write-back, not by a kernel of its own reading the floats back."""
    x = Var("x", T(6, 40))
    g, b = const(rand(40)), const(rand(40) * 0.1)
    s = call("nn.softmax", x, axis=-1)
    quantized = call("round", call("divide", s, const(np.float32(1 / 255))))
    normed = call("nn.relu", call("multiply", call("nn.layer_norm", x, g, b, axis=-1, epsilon=1e-5), const(np.float32(3))))
    after = fuse(module([x], Tuple_([quantized, normed])))
    groups = sorted(name for name, _ in after.functions if name != "main")
    assert groups == ["fused_layer_norm_multiply_relu", "fused_softmax_divide_round"]
    xv = rand(6, 40)
    e = np.exp(xv - xv.max(-1, keepdims=True))
    mean, var = xv.mean(-1, keepdims=True), xv.var(-1, keepdims=True)
    got_q, got_n = ember.compile(module([x], Tuple_([quantized, normed]))).run(xv)
    np.testing.assert_allclose(got_q, np.round(e / e.sum(-1, keepdims=True) * 255), atol=1)
    np.testing.assert_allclose(got_n, np.maximum((xv - mean) / np.sqrt(var + 1e-5) * g.value + b.value, 0) * 3,
                               rtol=1e-4, atol=1e-4)
