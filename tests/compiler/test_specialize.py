"""Models whose inputs' values decide their structure: ``ember.compile`` compiles per value."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import ember
from ember.compiler.specialize import SpecializingExecutable
from ember.errors import EmberError, UnsupportedOpError


def _slice_model(extra_node=None):
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="slice0")]
    if extra_node is not None:
        nodes.append(extra_node)
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [4, 6]), vi("starts", TensorProto.INT64, [1]),
                                       vi("ends", TensorProto.INT64, [1]), vi("axes", TensorProto.INT64, [1])],
                          [vi("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_an_axis_from_an_input_compiles_per_value():
    exe = ember.compile(_slice_model())
    assert isinstance(exe, SpecializingExecutable) and exe.value_inputs
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for axis, (s, e) in [(0, (1, 3)), (1, (-4, 100)), (0, (1, 3))]:
        y, = exe.run(x, np.array([s], np.int64), np.array([e], np.int64), np.array([axis], np.int64))
        want = x[s:e] if axis == 0 else x[:, s:e]
        np.testing.assert_array_equal(y, want)
    assert exe.specializations == 2  # (the first values again reuse their executable)
    with pytest.raises(EmberError, match="static_inputs"):
        exe.export("never.so")


def test_resize_scales_from_an_input():
    vi = helper.make_tensor_value_info
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest", name="resize0")
    g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, [1, 1, 2, 2]), vi("scales", TensorProto.FLOAT, [4])],
                          [vi("y", TensorProto.FLOAT, None)])
    exe = ember.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]))
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    y, = exe.run(x, np.array([1, 1, 2, 3], np.float32))
    np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(3, axis=3))


def test_an_unsupported_op_is_still_an_error_at_compile():
    bad = helper.make_node("TfIdfVectorizer", ["y"], ["z"], name="tfidf0", mode="TF", min_gram_length=1,
                           max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1])
    with pytest.raises(UnsupportedOpError, match="TfIdfVectorizer"):
        ember.compile(_slice_model(bad))


def test_an_error_not_about_the_values_is_raised_at_compile():
    # (a value input is there, but the Add's shapes are wrong whatever it holds)
    bad = helper.make_node("Add", ["y", "z"], ["w"], name="add0")
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="slice0"), bad]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [4, 6]), vi("starts", TensorProto.INT64, [1]),
                                       vi("ends", TensorProto.INT64, [1]), vi("axes", TensorProto.INT64, [1]),
                                       vi("z", TensorProto.FLOAT, [5, 7])], [vi("w", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    exe = ember.compile(m)  # (the slice's axes decide the Add's shapes: only a run can tell)
    x = np.zeros((4, 6), np.float32)
    args = (x, np.array([0], np.int64), np.array([2], np.int64), np.array([0], np.int64), np.zeros((5, 7), np.float32))
    for _ in range(2):  # (the second time from the kept failure)
        with pytest.raises(EmberError, match="broadcast"):
            exe.run(*args)
    assert exe.specializations == 0
    # a model with a value input (a Reshape's shape) whose compile fails for another reason: the
    # error is raised by ember.compile, not deferred to every run
    plain = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["r"]),
                               helper.make_node("Add", ["a", "b"], ["c"])], "g",
                              [vi("x", TensorProto.FLOAT, [4, 6]), vi("shape", TensorProto.INT64, [2]),
                               vi("a", TensorProto.FLOAT, [2]), vi("b", TensorProto.FLOAT, [3])],
                              [vi("r", TensorProto.FLOAT, None), vi("c", TensorProto.FLOAT, None)])
    with pytest.raises(EmberError, match="broadcast"):
        ember.compile(helper.make_model(plain, opset_imports=[helper.make_opsetid("", 13)]))
