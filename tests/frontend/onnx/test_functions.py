"""Ops ONNX defines as functions of other ops, which Ember has no converter for, run as their
function's body (``ember.frontend.onnx.functions``)."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import ember
from ember.errors import UnsupportedOpError
from ember.frontend.onnx.functions import expand_functions


def _linear_attention(rule: str):
    names = ["q", "k", "v", "", "g"] if rule == "gated" else ["q", "k", "v"]
    node = h.make_node("LinearAttention", names, ["y", "state"], q_num_heads=2, kv_num_heads=2, update_rule=rule)
    ins = [h.make_tensor_value_info(n, T.FLOAT, [1, 5, 8]) for n in ("q", "k", "v")]
    if rule == "gated":
        ins.append(h.make_tensor_value_info("g", T.FLOAT, [1, 5, 8]))
    outs = [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("state", T.FLOAT, None)]
    return h.make_model(h.make_graph([node], "g", ins, outs), opset_imports=[h.make_opsetid("", 27)])


@pytest.mark.parametrize("rule", ["linear", "gated"])
def test_linear_attention_runs_as_its_function_body(rule):
    m = _linear_attention(rule)
    assert [n.op_type for n in m.graph.node] == ["LinearAttention"]
    assert "LinearAttention" not in [n.op_type for n in expand_functions(m, 27).graph.node]
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal((1, 5, 8)).astype(np.float32) * 0.5 for i in m.graph.input}
    got = ember.compile(m).run(**feeds)
    for g, w in zip(got, ReferenceEvaluator(m).run(None, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_an_op_with_a_converter_keeps_it_and_one_without_a_function_is_still_an_error():
    # (Gelu has a function body in ONNX and a converter in Ember: the converter's one kernel)
    g = h.make_graph([h.make_node("Gelu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
    assert expand_functions(m, 20) is m
    g = h.make_graph([h.make_node("Det", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [3, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [])])
    with pytest.raises(UnsupportedOpError, match="Det"):
        ember.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 22)]))


def test_the_callers_model_is_not_changed():
    m = _linear_attention("linear")
    before = m.SerializeToString()
    ember.compile(m)
    assert m.SerializeToString() == before
