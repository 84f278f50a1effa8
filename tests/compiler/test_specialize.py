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
