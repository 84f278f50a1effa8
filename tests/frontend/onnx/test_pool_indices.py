"""MaxPool's Indices output: the flat input position (over N x C x D1 x ...) of each window's
first maximum, checked against a direct numpy loop (strides, pads, dilations, ceil mode,
column-major storage, 1-3D)."""
import itertools

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ember
from ember.errors import UnsupportedOpError


def _model(shape, **attrs):
    n = h.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    g = h.make_graph([n], "g", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("i", T.INT64, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 12)])


def _reference(x, y_shape, kernel, strides, dilations, begins, storage_order):
    """Each window's maximum and the flat index of its first occurrence, window by window.
    (onnx's ReferenceEvaluator leaves the batch and channel offsets out on its stride-1 path.)"""
    sizes = x.shape[2:]
    y, idx = np.empty(y_shape, x.dtype), np.empty(y_shape, np.int64)
    order = list(range(len(sizes)))[::-1] if storage_order == 0 else list(range(len(sizes)))
    steps, step = [0] * len(sizes), 1
    for a in order:
        steps[a], step = step, step * sizes[a]
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for out in np.ndindex(*y_shape[2:]):
            best = None
            for tap in np.ndindex(*kernel):
                pos = [o * s + t * d - b for o, s, t, d, b in zip(out, strides, tap, dilations, begins)]
                if all(0 <= p < size for p, size in zip(pos, sizes)) and (best is None or x[(n, c, *pos)] > best[0]):
                    best = (x[(n, c, *pos)], pos)
            y[(n, c, *out)] = best[0]
            idx[(n, c, *out)] = (n * x.shape[1] + c) * np.prod(sizes) + sum(p * t for p, t in zip(best[1], steps))
    return y, idx


@pytest.mark.parametrize("shape, attrs", [
    ((1, 2, 5, 5), dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),
    ((2, 3, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])),
    ((1, 2, 7, 7), dict(kernel_shape=[2, 2], dilations=[2, 2], ceil_mode=1, strides=[2, 2])),
    ((1, 2, 4, 6), dict(kernel_shape=[2, 3], storage_order=1)),
    ((2, 2, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((1, 1, 4, 5, 6), dict(kernel_shape=[2, 2, 3], strides=[1, 2, 2])),
])
def test_indices_match_the_reference(shape, attrs):
    m = _model(shape, **attrs)
    x = np.random.default_rng(1).normal(size=shape).astype(np.float32)
    y, i = ember.compile(m).run(x)
    k = len(attrs["kernel_shape"])
    want_y, want_i = _reference(x, y.shape, attrs["kernel_shape"], attrs.get("strides", [1] * k),
                                attrs.get("dilations", [1] * k), attrs.get("pads", [0] * 2 * k)[:k],
                                attrs.get("storage_order", 0))
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(i, want_i)


def test_a_huge_window_is_refused_with_a_reason():
    with pytest.raises(UnsupportedOpError, match="Indices output of a window of more than"):
        ember.compile(_model((1, 1, 20, 20), kernel_shape=[20, 20]))
