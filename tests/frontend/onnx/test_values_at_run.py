"""Operands from a model input's values that kernels read while running (Trilu's k, Pad's
value) or that are sizes bound before the run (TopK's k, Tile's repeats, Split's sizes,
Pad's pads): one executable for every value, checked where a value breaks the op."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ember
from ember.errors import ShapeError


def _compile(op, inputs, n_out=1, opset=18, **attrs):
    ins = [h.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    outs = [h.make_tensor_value_info(f"y{k}", T.FLOAT, None) for k in range(n_out)]
    g = h.make_graph([h.make_node(op, [n for n, _, _ in inputs], [f"y{k}" for k in range(n_out)], **attrs)],
                     "g", ins, outs)
    return ember.compile(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]))


X = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)


def test_trilu_k_from_an_input():
    exe = _compile("Trilu", [("x", T.FLOAT, [3, 5]), ("k", T.INT64, [])], upper=0)
    for k in (-7, -1, 0, 2, 9):
        np.testing.assert_array_equal(exe.run(X, np.array(k, np.int64))[0], np.tril(X, k))


def test_topk_k_from_an_input_is_a_size():
    exe = _compile("TopK", [("x", T.FLOAT, [3, 5]), ("k", T.INT64, [1])], n_out=2, axis=1)
    for k in (0, 2, 5):
        values, idx = exe.run(X, np.array([k], np.int64))
        want = np.argsort(-X, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(idx, want)
        np.testing.assert_array_equal(values, np.take_along_axis(X, want, 1))
    with pytest.raises(ShapeError, match="k .* must be at most the size of axis 1"):
        exe.run(X, np.array([6], np.int64))


def test_tile_split_and_pad_sizes_from_inputs():
    tile = _compile("Tile", [("x", T.FLOAT, [3, 5]), ("r", T.INT64, [2])])
    np.testing.assert_array_equal(tile.run(X, np.array([2, 3], np.int64))[0], np.tile(X, (2, 3)))
    split = _compile("Split", [("x", T.FLOAT, [3, 5]), ("s", T.INT64, [2])], n_out=2, axis=1)
    a, b = split.run(X, np.array([1, 4], np.int64))
    np.testing.assert_array_equal(a, X[:, :1])
    np.testing.assert_array_equal(b, X[:, 1:])
    with pytest.raises(ShapeError, match="split sizes .* must sum to the axis size 5"):
        split.run(X, np.array([2, 4], np.int64))
    pad = _compile("Pad", [("x", T.FLOAT, [3, 5]), ("p", T.INT64, [4]), ("v", T.FLOAT, [])])
    got = pad.run(X, np.array([1, 0, 2, 3], np.int64), np.array(7.5, np.float32))[0]
    np.testing.assert_array_equal(got, np.pad(X, ((1, 2), (0, 3)), constant_values=7.5))
    # a negative pad is no size: that run's values get an executable of their own, which crops
    got = pad.run(X, np.array([-1, 0, 0, 0], np.int64), np.array(0, np.float32))[0]
    np.testing.assert_array_equal(got, X[1:])
    assert pad.fallback.specializations == 1
    reflect = _compile("Pad", [("x", T.FLOAT, [3, 5]), ("p", T.INT64, [4])], mode="reflect")
    np.testing.assert_array_equal(reflect.run(X, np.array([2, 1, 0, 4], np.int64))[0],
                                  np.pad(X, ((2, 0), (1, 4)), mode="reflect"))


def test_one_hot_depth_and_values_from_inputs():
    ins = [("i", T.INT64, [4]), ("depth", T.FLOAT, []), ("v", T.FLOAT, [2])]
    exe = _compile("OneHot", ins, opset=11, axis=0)
    idx = np.array([0, 2, -1, 7], np.int64)
    got = exe.run(idx, np.array(4.9, np.float32), np.array([-1, 3], np.float32))[0]  # depth 4 (truncated)
    want = np.full((4, 4), -1, np.float32)
    for j, v in enumerate(idx):
        if -4 <= v < 4:
            want[v % 4, j] = 3
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ShapeError, match="came out as nan"):
        exe.run(idx, np.array(np.nan, np.float32), np.array([0, 1], np.float32))


@pytest.mark.parametrize("dtype, np_dtype", [(T.FLOAT, np.float32), (T.INT32, np.int32)])
def test_range_with_bounds_from_inputs(dtype, np_dtype):
    ins = [(n, dtype, []) for n in ("s", "l", "d")]
    exe = _compile("Range", ins, opset=11)
    for s, l, d in ((1, 10, 3), (10, 1, -2), (5, 5, 1), (0, 3, 1), (4, 0, 1)):
        a = [np.array(v, np_dtype) for v in (s, l, d)]
        got = exe.run(*a)[0]
        np.testing.assert_array_equal(got, np.arange(*a, dtype=np_dtype))
        assert got.dtype == np_dtype


@pytest.mark.parametrize("shape,axis,sorted_", [((12,), None, 1), ((12,), None, 0), ((3, 4), None, 1), ((4, 3), 0, 1),
                                                 ((4, 3), 0, 0), ((2, 3, 4), -1, 1), ((5,), None, 1)])
# (not sorted along an axis other than 0: onnx's reference takes the slices along axis 0 then)
def test_unique_values_indices_inverse_and_counts(shape, axis, sorted_):
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
    outs = ["y", "i", "inv", "c"]
    g = helper.make_graph([helper.make_node("Unique", ["x"], outs, **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT if o == "y" else TensorProto.INT64, None)
                           for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    x = np.random.default_rng(len(shape)).integers(0, 3, shape).astype(np.float32)
    exe = ember.compile(m)
    for xv in (x, np.zeros(shape, np.float32)):  # (one class, the same executable)
        want = ReferenceEvaluator(m).run(None, {"x": xv})
        for got, w in zip(exe.run(xv), want):
            np.testing.assert_array_equal(got, w)
