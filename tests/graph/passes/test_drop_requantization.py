"""Codes quantized again as they were stay the codes, moved as bytes: against onnx's reference
evaluator, exactly."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import ember
from ember.frontend.onnx.importer import from_onnx
from ember.graph import topo_calls
from ember.graph.passes import PassContext, VerifyAfterPass, dce, drop_requantization
from ember.graph.infer import infer_types

RNG = np.random.default_rng(11)


def _model(nodes, shapes, inits):
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(k, TP.FLOAT, s) for k, s in shapes.items()],
                     [h.make_tensor_value_info("y", TP.UNDEFINED, None)],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


def _qdq(x, out, s="s", z="z"):
    return [h.make_node("QuantizeLinear", [x, s, z], [out + "_q"]),
            h.make_node("DequantizeLinear", [out + "_q", s, z], [out])]


def _ops(m) -> list:
    mod = PassContext(opt_level=3, instruments=[VerifyAfterPass()]).run(
        infer_types(from_onnx(m)), [drop_requantization, dce])
    return [c.op for c in topo_calls(mod.main)]


def _check(m, shapes):
    feeds = {k: (RNG.standard_normal(s) * 4).astype(np.float32) for k, s in shapes.items()}
    ref = ReferenceEvaluator(m).run(None, feeds)[0]
    np.testing.assert_array_equal(ember.compile(m, cache=False).run(**feeds)[0], ref)


@pytest.mark.parametrize("zdtype", [np.uint8, np.int8])
def test_a_key_reshaped_and_transposed_between_pairs_moves_as_codes(zdtype):
    """A transformer's key as ORT's quantizer leaves it: a pair after each data movement."""
    inits = {"s": np.array(0.037, np.float32), "z": np.array(7, zdtype),
             "shape": np.array([1, 6, 4, 8], np.int64), "c": np.array(0.35, np.float32)}
    nodes = [*_qdq("x", "a"), h.make_node("Reshape", ["a", "shape"], ["r"]), *_qdq("r", "rd"),
             h.make_node("Transpose", ["rd"], ["t"], perm=[0, 2, 1, 3]), *_qdq("t", "td"),
             h.make_node("Transpose", ["td"], ["t2"], perm=[0, 1, 3, 2]), *_qdq("t2", "t2d"),
             h.make_node("Mul", ["t2d", "c"], ["y"])]
    shapes = {"x": [1, 6, 32]}
    m = _model(nodes, shapes, inits)
    ops = _ops(m)
    # one quantizer of x, the moves on its codes, then one dequantization
    assert ops.count("divide") == 1 and ops.count("round") == 1, ops
    assert ops.index("transpose") < ops.index("multiply")
    _check(m, shapes)


def test_a_concatenation_of_codes_quantized_alike_and_a_slice_of_it():
    inits = {"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8),
             "st": np.array([2], np.int64), "en": np.array([9], np.int64), "ax": np.array([1], np.int64)}
    nodes = [*_qdq("x1", "a"), *_qdq("x2", "b"), h.make_node("Concat", ["a", "b"], ["c"], axis=1),
             h.make_node("Slice", ["c", "st", "en", "ax"], ["sl"]), *_qdq("sl", "y")]
    shapes = {"x1": [2, 5, 3], "x2": [2, 4, 3]}
    m = _model(nodes, shapes, inits)
    assert _ops(m).count("divide") == 2
    _check(m, shapes)


def test_another_scale_a_per_channel_pair_around_a_move_and_a_computation_are_kept():
    sc = np.array([0.02, 0.03, 0.04], np.float32)
    zc = np.zeros(3, np.uint8)
    inits = {"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8), "s2": np.array(0.06, np.float32),
             "sc": sc, "zc": zc}
    cases = [  # (nodes, quantizers left)
        ([*_qdq("x", "a"), h.make_node("Transpose", ["a"], ["t"], perm=[0, 2, 1]), *_qdq("t", "y", "s2")], 2),
        ([h.make_node("QuantizeLinear", ["x", "sc", "zc"], ["q"], axis=1),
          h.make_node("DequantizeLinear", ["q", "sc", "zc"], ["d"], axis=1),
          h.make_node("Transpose", ["d"], ["t"], perm=[0, 2, 1]),
          h.make_node("QuantizeLinear", ["t", "sc", "zc"], ["q2"], axis=1),
          h.make_node("DequantizeLinear", ["q2", "sc", "zc"], ["y"], axis=1)], 2),
        ([*_qdq("x", "a"), h.make_node("Relu", ["a"], ["r"]), *_qdq("r", "y")], 2),
    ]
    shapes = {"x": [2, 3, 3]}
    for nodes, left in cases:
        m = _model(nodes, shapes, inits)
        assert _ops(m).count("divide") == left
        _check(m, shapes)


def test_a_pair_with_the_same_parameters_is_the_codes_per_channel_too():
    sc = np.array([0.02, 0.03, 0.04], np.float32)
    inits = {"sc": sc, "zc": np.array([1, 2, 3], np.int8)}
    nodes = [h.make_node("QuantizeLinear", ["x", "sc", "zc"], ["q"], axis=1),
             h.make_node("DequantizeLinear", ["q", "sc", "zc"], ["d"], axis=1),
             h.make_node("QuantizeLinear", ["d", "sc", "zc"], ["q2"], axis=1),
             h.make_node("DequantizeLinear", ["q2", "sc", "zc"], ["y"], axis=1)]
    shapes = {"x": [2, 3, 5]}
    m = _model(nodes, shapes, inits)
    assert _ops(m).count("divide") == 1
    _check(m, shapes)
