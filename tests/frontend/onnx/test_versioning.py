"""Axes that come from a model input: the node is compiled per possible choice and the run
picks the version the value names; a value no version fits is an ArgumentError."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ember
from ember.errors import ArgumentError


def _model(op, x_shape, axes_len, out_shape, opset=18, **attrs):
    x = h.make_tensor_value_info("x", T.FLOAT, x_shape)
    a = h.make_tensor_value_info("axes", T.INT64, [axes_len])
    y = h.make_tensor_value_info("y", T.FLOAT, out_shape)
    g = h.make_graph([h.make_node(op, ["x", "axes"], ["y"], **attrs)], "g", [x, a], [y])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


@pytest.fixture(scope="module")
def reduce_sum():
    return ember.compile(_model("ReduceSum", [2, 3, 4], 2, None, keepdims=0))


@pytest.mark.parametrize("axes", [(0, 1), (1, 0), (0, 2), (-1, 1), (-3, -1)])
def test_one_executable_reduces_over_whichever_axes_the_input_names(reduce_sum, axes):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    got = reduce_sum.run(x, np.array(axes, np.int64))[0]
    np.testing.assert_allclose(got, x.sum(axis=axes), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axes, why", [((0, 0), "distinct"), ((0, 3), "in [-3, 3)"), ((-4, 1), "in [-3, 3)")])
def test_axes_no_version_fits_are_an_error_naming_the_input(reduce_sum, axes, why):
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ArgumentError, match=r"ReduceSum.*input 'axes' must name 2 distinct axis\(es\) of a rank-3"):
        reduce_sum.run(x, np.array(axes, np.int64))


def test_keepdims_and_unsqueeze_and_cumsum_axis_from_inputs():
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    keep = ember.compile(_model("ReduceMax", [2, 3, 4], 1, None, keepdims=1))
    for a in (0, 1, 2, -2):
        np.testing.assert_array_equal(keep.run(x, np.array([a], np.int64))[0], x.max(axis=a, keepdims=True))
    unsq = ember.compile(_model("Unsqueeze", [2, 3, 4], 2, None, opset=13))
    for axes in ((0, 4), (1, 2), (-1, 0)):
        want = np.expand_dims(x, [a % 5 for a in axes])
        np.testing.assert_array_equal(unsq.run(x, np.array(axes, np.int64))[0], want)
    xi = h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])
    ai = h.make_tensor_value_info("axis", T.INT32, [])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    g = h.make_graph([h.make_node("CumSum", ["x", "axis"], ["y"], reverse=1)], "g", [xi, ai], [y])
    cum = ember.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]))
    for a in (0, 2, -2):
        want = np.flip(np.cumsum(np.flip(x, a), axis=a), a)
        np.testing.assert_allclose(cum.run(x, np.array(a, np.int32))[0], want, rtol=1e-5, atol=1e-6)


def test_a_versioned_model_exports_and_loads(reduce_sum, tmp_path):
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    exe = ember.load(reduce_sum.export(str(tmp_path / "v.so")))
    np.testing.assert_allclose(exe.run(x, np.array([2, 0], np.int64))[0], x.sum(axis=(0, 2)), rtol=1e-5)


def test_too_many_choices_compile_per_value_instead():
    # 10 axes choose 5: 252 versions, more than it is worth compiling ahead: the executable
    # compiles the axes each run gives (ember.compiler.specialize), and says why
    exe = ember.compile(_model("ReduceSum", [2] * 10, 5, None, keepdims=0))
    assert exe.value_inputs == ["axes"] and "depends on a symbolic dimension" in exe.reason
    x = np.random.default_rng(2).standard_normal([2] * 10).astype(np.float32)
    got = exe.run(x, np.array([0, 2, 4, 6, 8], np.int64))[0]
    np.testing.assert_allclose(got, x.sum(axis=(0, 2, 4, 6, 8)), rtol=1e-5, atol=1e-5)
