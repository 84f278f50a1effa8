"""Optionals known at import: Optional, OptionalHasElement, OptionalGetElement, and a graph
input of optional type, compiled as present."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ember
from ember.errors import ArgumentError, ShapeError


def _model(nodes, inputs, outputs):
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs), opset_imports=[h.make_opsetid("", 18)])


def test_an_optional_input_is_compiled_as_present():
    opt = h.make_value_info("o", h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, [2, 3])))
    m = _model([h.make_node("OptionalHasElement", ["o"], ["has"]), h.make_node("OptionalGetElement", ["o"], ["x"]),
                h.make_node("Relu", ["x"], ["y"])], [opt],
               [h.make_tensor_value_info("has", T.BOOL, []), h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    exe = ember.compile(m)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    has, y = exe.run(x)
    assert bool(has) and (y == np.maximum(x, 0)).all()
    with pytest.raises(ArgumentError, match="missing input"):
        exe.run()


def test_optionals_made_in_the_graph():
    t = h.make_tensor_type_proto(T.FLOAT, [2])
    nodes = [h.make_node("Optional", ["x"], ["full"]), h.make_node("Optional", [], ["empty"], type=t),
             h.make_node("OptionalHasElement", ["full"], ["a"]), h.make_node("OptionalHasElement", ["empty"], ["b"]),
             h.make_node("OptionalHasElement", [], ["c"]), h.make_node("OptionalGetElement", ["full"], ["y"])]
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [2])],
               [h.make_tensor_value_info(n, T.BOOL, []) for n in "abc"] + [h.make_tensor_value_info("y", T.FLOAT, [2])])
    a, b, c, y = ember.compile(m).run(np.array([1, 2], np.float32))
    assert (bool(a), bool(b), bool(c)) == (True, False, False) and (y == [1, 2]).all()
    bad = _model([h.make_node("Optional", [], ["e"], type=t), h.make_node("OptionalGetElement", ["e"], ["y"])], [],
                 [h.make_tensor_value_info("y", T.FLOAT, [2])])
    with pytest.raises(ShapeError, match="empty optional"):
        ember.compile(bad)
