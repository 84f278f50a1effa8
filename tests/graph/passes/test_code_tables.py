"""Functions of 8-bit codes become table lookups (``code_tables``)."""
import numpy as np
import pytest
from onnx import TensorProto as TP, helper as h, numpy_helper as nh

import ember
from ember.graph.ir import Call
from ember.graph.visit import post_order
from ember.target import Target

VBMI = "llvm -mcpu=znver4"  # (a CPU whose byte permutes the tables use; the pass checks the target)
AVX2 = "llvm -mcpu=znver3"  # (AVX2 alone: tables of int32 words, vpgatherdd)


def _model(act: str, zero: int = 131) -> bytes:
    """x -> QuantizeLinear -> DequantizeLinear -> ``act`` -> QuantizeLinear -> DequantizeLinear,
    as ORT's quantizer writes an activation between two quantized ops."""
    inits = [nh.from_array(np.float32(0.031), "s1"), nh.from_array(np.uint8(zero), "z1"),
             nh.from_array(np.float32(0.017), "s2"), nh.from_array(np.uint8(9), "z2"),
             nh.from_array(np.float32(np.sqrt(2.0)), "r2"), nh.from_array(np.float32(1.0), "one"),
             nh.from_array(np.float32(0.5), "half")]
    nodes = [h.make_node("QuantizeLinear", ["x", "s1", "z1"], ["q"]),
             h.make_node("DequantizeLinear", ["q", "s1", "z1"], ["d"])]
    if act == "gelu":  # (the exporters' erf form)
        nodes += [h.make_node("Div", ["d", "r2"], ["t"]), h.make_node("Erf", ["t"], ["e"]),
                  h.make_node("Add", ["e", "one"], ["p"]), h.make_node("Mul", ["d", "p"], ["m"]),
                  h.make_node("Mul", ["m", "half"], ["a"])]
    elif act == "silu":
        nodes += [h.make_node("Sigmoid", ["d"], ["g"]), h.make_node("Mul", ["d", "g"], ["a"])]
    else:
        nodes += [h.make_node("Relu", ["d"], ["a"])]
    nodes += [h.make_node("QuantizeLinear", ["a", "s2", "z2"], ["q2"]),
              h.make_node("DequantizeLinear", ["q2", "s2", "z2"], ["y"])]
    g = h.make_graph(nodes, "act", [h.make_tensor_value_info("x", TP.FLOAT, [2, 64, 33])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [2, 64, 33])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _tables(exe) -> int:
    """The lookups in ``exe``'s fused groups."""
    return sum(n.op == "gather" for _, fn in exe.graph.functions for n in post_order(fn) if isinstance(n, Call))


def _x():
    # every code and the halves between them, past both ends of the range
    return np.random.default_rng(0).uniform(-5.0, 5.0, (2, 64, 33)).astype(np.float32)


@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_an_activation_between_quantizers_is_a_table_of_the_codes(act):
    m = _model(act)
    exe = ember.compile(m, target=VBMI, wait=True)
    assert _tables(exe) == 1
    if not Target.host().has_feature("avx512vbmi"):  # (compiled above for a CPU that has them)
        pytest.skip("the host has no AVX512-VBMI to run the tables")
    plain = ember.compile(m, wait=True, disabled_passes={"code_tables"})
    assert _tables(plain) == 0
    x = _x()
    # the table holds what the elementwise code computes: the same codes
    np.testing.assert_array_equal(exe.run(x)[0], plain.run(x)[0])
    import onnxruntime as ort

    ref = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(exe.run(x)[0] - ref).max() <= 0.017 + 1e-6  # (at most one code: erf's last ulp)


@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_on_avx2_a_table_holds_words_that_vpgatherdd_reads(act):
    m = _model(act)
    exe = ember.compile(m, target=AVX2, wait=True)
    tables = [n.args[0].type.dtype for _, fn in exe.graph.functions for n in post_order(fn)
              if isinstance(n, Call) and n.op == "gather"]
    assert tables == ["int32"]
    host = Target.host()
    if not host.has_feature("avx2") or host.has_feature("avx512f"):
        pytest.skip("the host is not an AVX2 CPU without AVX-512 (the tables' target)")
    exe = ember.compile(m, wait=True)
    assert _tables(exe) == 1
    plain = ember.compile(m, wait=True, disabled_passes={"code_tables"})
    x = _x()
    np.testing.assert_array_equal(exe.run(x)[0], plain.run(x)[0])


def test_a_cheap_activation_and_a_host_without_byte_permutes_keep_their_code():
    assert _tables(ember.compile(_model("relu"), target=VBMI, wait=True, disabled_passes=set())) == 0
    assert _tables(ember.compile(_model("relu"), target=AVX2, wait=True)) == 0
    assert _tables(ember.compile(_model("gelu"), target="llvm -mcpu=skylake-avx512", wait=True)) == 0



def test_the_integer_intervals_follow_roundings_clamps_shifts_and_casts():
    from ember.graph import Tuple, Var, const
    from ember.graph.passes.code_tables import _regions

    from .conftest import T, call, module

    x, u8 = Var("x", T(4, 5)), Var("u8", T(4, 5, dtype="uint8"))
    code = call("minimum", call("maximum", call("round", x), const(np.float32(-3.0))), const(np.float32(40.0)))
    shifted = call("add", code, const(np.float32(7.0)))
    half = call("add", code, const(np.float32(0.5)))  # (no longer an integer)
    flag = call("cast", shifted, dtype="bool")
    wide = call("cast", u8, dtype="float32")
    body = module([x, u8], Tuple([shifted, half, flag, wide])).main.body
    source, bounds, known = _regions(body)
    shifted, half, flag, wide = body.fields  # (the typed nodes)
    code = shifted.args[0]
    assert bounds[code] == (-3, 40) and bounds[wide] == (0, 255)  # (the codes: regions start there)
    assert known[shifted] == (4.0, 47.0) and half not in known and known[flag] == (0, 1)
    assert source[shifted] is code and source[half] is code and source[flag] is code
