"""BitCast (opset 26): the bits read as another type of their width, a view of the bytes."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import ember
from ember.errors import ShapeError


def _model(nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", 26)])


def test_between_kernels_and_of_a_constant():
    # x + 1 read as int32, masked to its exponent bits; and a float initializer read as ints
    nodes = [h.make_node("Add", ["x", "one"], ["s"]), h.make_node("BitCast", ["s"], ["b"], to=T.INT32),
             h.make_node("BitwiseAnd", ["b", "mask"], ["y"]), h.make_node("BitCast", ["w"], ["z"], to=T.INT32)]
    inits = [numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(0x7F800000, np.int32), "mask"),
             numpy_helper.from_array(np.array([0.5, -2.0], np.float32), "w")]
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
               [h.make_tensor_value_info("y", T.INT32, [3, 4]), h.make_tensor_value_info("z", T.INT32, [2])], inits)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32) * 100
    y, z = ember.compile(m).run(x)
    np.testing.assert_array_equal(y, (x + 1).view(np.int32) & 0x7F800000)
    np.testing.assert_array_equal(z, np.array([0.5, -2.0], np.float32).view(np.int32))


def test_of_an_input_and_widths_must_match():
    m = _model([h.make_node("BitCast", ["x"], ["y"], to=T.UINT8)], [h.make_tensor_value_info("x", T.INT8, [4])],
               [h.make_tensor_value_info("y", T.UINT8, [4])])
    x = np.array([-1, -128, 127, 0], np.int8)
    np.testing.assert_array_equal(ember.compile(m).run(x)[0], x.view(np.uint8))
    bad = _model([h.make_node("BitCast", ["x"], ["y"], to=T.INT64)], [h.make_tensor_value_info("x", T.FLOAT, [4])],
                 [h.make_tensor_value_info("y", T.INT64, [4])])
    with pytest.raises(ShapeError, match="differ in width"):
        ember.compile(bad)
