"""CausalConvWithState (opset 27) against onnx's reference: a prefill from no state, then
decode steps that carry the state, in one executable over a dynamic batch and length."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import ember


def _model(k: int, with_past: bool, activation: str):
    ins = ["x", "w", "b"] + (["past"] if with_past else [])
    node = h.make_node("CausalConvWithState", ins, ["y", "state"], activation=activation)
    rng = np.random.default_rng(k)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 1, k)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")]
    inputs = [h.make_tensor_value_info("x", T.FLOAT, ["batch", 6, "len"])]
    if with_past:
        inputs.append(h.make_tensor_value_info("past", T.FLOAT, ["batch", 6, k - 1]))
    outs = [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("state", T.FLOAT, None)]
    g = h.make_graph([node], "g", inputs, outs, inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 27)])


@pytest.mark.parametrize("k, activation", [(4, "silu"), (1, "none"), (3, "swish")])
def test_prefill_then_decode_steps_match_the_reference(k, activation):
    rng = np.random.default_rng(0)
    first, step = _model(k, False, activation), _model(k, True, activation)
    x = rng.standard_normal((2, 6, 5)).astype(np.float32)
    y, state = ember.compile(first).run(x)
    want_y, want_state = ReferenceEvaluator(first).run(None, {"x": x})
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, want_state, rtol=1e-6)
    exe = ember.compile(step)
    for _ in range(3):
        t = rng.standard_normal((2, 6, 1)).astype(np.float32)
        want_y, want_state = ReferenceEvaluator(step).run(None, {"x": t, "past": state})
        y, state = exe.run(t, state)
        np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(state, want_state, rtol=1e-6)
