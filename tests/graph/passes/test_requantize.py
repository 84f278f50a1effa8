import numpy as np
import pytest

from ember.graph import Constant, Var, const, topo_calls
from ember.graph.passes import PassContext, VerifyAfterPass, requantize

from .conftest import T, call, module, rand


def _run(mod):
    return PassContext(opt_level=2, instruments=[VerifyAfterPass()]).run(mod, [requantize])


def _eval(e, x):
    """numpy's float32 value of the chain ``e`` over the variable bound to ``x``."""
    if isinstance(e, Var):
        return x
    if isinstance(e, Constant):
        return e.value
    a = [_eval(v, x) for v in e.args]
    if e.op == "nn.bias_add":
        return a[0] + a[1].reshape((-1, 1, 1))
    return {"multiply": np.multiply, "divide": np.divide, "add": np.add, "subtract": np.subtract,
            "round": lambda v: np.round(v)}[e.op](*a).astype(np.float32)


def _chains(x):
    sw = const((np.random.default_rng(1).random((4, 1, 1)) * 0.01 + 0.001).astype(np.float32))
    sa, so = const(np.float32(0.037)), const(np.float32(0.051))
    b = const(rand(4))
    dq = call("multiply", call("multiply", x, sa), sw)
    return [
        call("divide", call("nn.bias_add", dq, b, axis=1), so),  # a QDQ conv's requantization
        call("divide", call("add", dq, const(rand(4, 1, 1))), so),
        call("divide", call("subtract", const(np.float32(3.0)), call("multiply", sa, x)), so),  # (c - x, c * x)
    ]


@pytest.mark.parametrize("case", range(3))
def test_a_rounded_chain_of_constant_steps_is_one_multiply_add(case):
    x = Var("x", T(1, 4, 5, 6))
    y = call("round", _chains(x)[case])
    after = _run(module([x], y))
    ops = [c.op for c in topo_calls(after.main)]
    assert ops.count("multiply") == 1 and "divide" not in ops and ops[-1] == "round"
    xv = np.random.default_rng(2).integers(-3000, 3000, (1, 4, 5, 6)).astype(np.float32)
    want = _eval(y, xv)
    got = _eval(after.main.body, xv)
    # the same codes but where a value lies within a few ulps of a half
    assert np.mean(got != want) < 0.01 and np.abs(got - want).max() <= 1


def test_two_steps_without_a_division_a_division_alone_and_an_unrounded_chain_are_left_alone():
    x = Var("x", T(1, 4, 5, 6))
    for y in (call("round", call("add", call("multiply", x, const(np.float32(2.0))), const(np.float32(1.0)))),
              call("round", call("divide", x, const(np.float32(0.051)))),  # (a quantizer's: exact)
              _chains(x)[0]):
        mod = module([x], y)
        assert _run(mod) is mod or [c.op for c in topo_calls(_run(mod).main)] == [c.op for c in topo_calls(mod.main)]


# --- a quantization only a dequantization reads, computed in float ------------------------------

def _qdq_model(dtype, per_channel: bool, codes_out: bool = False, conv: bool = False):
    """x -> QuantizeLinear -> DequantizeLinear -> d * d (or a conv reading d); ``codes_out``: the
    codes are an output too."""
    from onnx import TensorProto as TP, helper as h, numpy_helper as nh

    rng = np.random.default_rng(5)
    c = 4
    zt = np.uint8 if dtype == "uint8" else np.int8
    s = (rng.random(c) * 0.02 + 0.01).astype(np.float32) if per_channel else np.float32(0.023)
    z = ((rng.integers(0, 200, c) if dtype == "uint8" else rng.integers(-20, 20, c)).astype(zt) if per_channel
         else zt(117 if dtype == "uint8" else -9))
    inits = [nh.from_array(np.asarray(s), "s"), nh.from_array(np.asarray(z), "z")]
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=1)]
    if conv:
        nodes.append(h.make_node("Conv", ["d", "w"], ["y"]))
        inits.append(nh.from_array(rng.standard_normal((8, c, 1, 1)).astype(np.float32), "w"))
    else:
        nodes.append(h.make_node("Mul", ["d", "d"], ["y"]))  # (exact: a sigmoid would differ by an ulp)
    outs = [h.make_tensor_value_info("y", TP.FLOAT, None)]
    if codes_out:
        outs.append(h.make_tensor_value_info("q", TP.UINT8 if dtype == "uint8" else TP.INT8, None))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, (1, c, 5, 6))], outs, inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


def _ops_after(m) -> list:
    from ember.compiler.fold import evaluate_constants
    from ember.frontend.onnx.importer import from_onnx
    from ember.graph.infer import infer_types
    from ember.graph.passes import fold_constant

    mod = PassContext(opt_level=2, instruments=[VerifyAfterPass()], config={"evaluate": evaluate_constants}).run(
        infer_types(from_onnx(m)), [fold_constant, requantize])
    return [c.op for c in topo_calls(mod.main)]


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_a_quantization_only_elementwise_ops_read_dequantized_is_computed_in_float_exactly(dtype, per_channel):
    from onnx.reference import ReferenceEvaluator

    import ember

    m = _qdq_model(dtype, per_channel)
    ops = _ops_after(m)
    # round, the clamp with its bounds moved by the zero point, the scale: no conversions
    assert "cast" not in ops and ops.count("round") == 1 and "subtract" not in ops, ops
    x = (np.random.default_rng(6).standard_normal((1, 4, 5, 6)) * 4).astype(np.float32)
    x[0, 0, 0, :3] = [1e3, -1e3, 0.0]  # saturated both ways (within int32: the reference wraps beyond)
    np.testing.assert_array_equal(ember.compile(m, cache=False).run(x=x)[0],
                                  ReferenceEvaluator(m).run(None, {"x": x})[0])


def test_codes_another_op_or_a_conv_reads_stay_codes():
    assert _ops_after(_qdq_model("uint8", False, codes_out=True)).count("cast") >= 2
    assert _ops_after(_qdq_model("uint8", False, conv=True)).count("cast") >= 2


def test_a_requantized_sum_of_dequantized_tensors_is_one_multiply_add_a_term():
    """A residual block's output, ``round((r1 * s1 + (q2 - z2) * s2) / so)``: each term's
    scales folded into one factor, the offsets into one constant."""
    x1, x2 = Var("x1", T(1, 4, 5, 6)), Var("x2", T(1, 4, 5, 6))
    s1 = const((np.random.default_rng(1).random((1, 4, 1, 1)) * 0.01 + 0.001).astype(np.float32))
    t1 = call("multiply", x1, s1)
    t2 = call("multiply", call("subtract", x2, const(np.float32(3.0))), const(np.float32(0.02)))
    y = call("round", call("divide", call("add", t1, t2), const(np.float32(0.037))))
    after = _run(module([x1, x2], y))
    ops = [c.op for c in topo_calls(after.main)]
    assert sorted(ops) == ["add", "add", "multiply", "multiply", "round"], ops
    rng = np.random.default_rng(2)
    v1, v2 = rng.integers(-300, 300, (1, 4, 5, 6)).astype(np.float32), rng.integers(0, 255, (1, 4, 5, 6)).astype(np.float32)

    def ev(e):
        if isinstance(e, Var):
            return {"x1": v1, "x2": v2}[e.name]
        if isinstance(e, Constant):
            return e.value
        a = [ev(v) for v in e.args]
        return {"multiply": np.multiply, "divide": np.divide, "add": np.add, "subtract": np.subtract,
                "round": np.round}[e.op](*a).astype(np.float32)

    want, got = ev(y), ev(after.main.body)
    # the same codes but where a value lies within a few ulps of a half
    assert np.mean(got != want) < 0.01 and np.abs(got - want).max() <= 1


def test_a_requantization_folds_through_a_relu_where_the_factor_is_positive():
    """``round(relu(acc * s + b) / so)`` (a conv's output quantized after its ReLU, as Ember's
    quantizer leaves it) as ``round(max(acc * (s / so) + b / so, b / so))``: the clamp's bound
    moves with the steps."""
    x = Var("x", T(1, 4, 5, 6))
    s = const((np.random.default_rng(1).random((1, 4, 1, 1)) * 0.01 + 0.001).astype(np.float32))
    y = call("round", call("divide", call("nn.relu", call("add", call("multiply", x, s), const(rand(1, 4, 1, 1)))),
                           const(np.float32(0.037))))
    after = _run(module([x], y))
    ops = [c.op for c in topo_calls(after.main)]
    assert ops == ["multiply", "add", "maximum", "round"], ops
    neg = call("round", call("divide", call("multiply", call("nn.relu", call("add", x, const(np.float32(2.0)))),
                                            const(np.float32(-0.5))), const(np.float32(0.037))))
    assert "nn.relu" in [c.op for c in topo_calls(_run(module([x], neg)).main)]  # (a negative factor: kept)
    xv = np.random.default_rng(2).integers(-3000, 3000, (1, 4, 5, 6)).astype(np.float32)

    def ev(e):
        if isinstance(e, Var):
            return xv
        if isinstance(e, Constant):
            return e.value
        a = [ev(v) for v in e.args]
        return {"multiply": np.multiply, "divide": np.divide, "add": np.add, "round": np.round,
                "maximum": np.maximum, "nn.relu": lambda v: np.maximum(v, 0)}[e.op](*a).astype(np.float32)

    want, got = ev(y), ev(after.main.body)
    assert np.mean(got != want) < 0.01 and np.abs(got - want).max() <= 1
