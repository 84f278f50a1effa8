"""MaxPool's ``Indices`` output: where in the input each window's maximum lies.

Built from ops Ember has: the input padded with -inf (a padded position never wins), each
window tap's values a strided slice of it, the taps stacked on a new first axis and ``argmax``
over it -- the first tap holding the maximum, as in ONNX's reference -- then the tap's flat
input position: a small table of each tap's offset, gathered, plus each window's origin (a sum
of small broadcast constants). A flat index counts over the whole input, ``N x C x D1 x ...``,
in row-major order of the spatial axes, or column-major with ``storage_order=1``.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import UnsupportedOpError

MAX_TAPS = 256  # a larger window stacks that many copies of the output: not built this way


def max_pool_indices(node, x, y, kernel: tuple, strides: tuple, dilations: tuple, pads: tuple,
                     storage_order: int = 0):
    """The int64 indices of MaxPool ``node`` whose input is ``x`` and pooled output ``y``
    (``pads``: all begins, then all ends)."""
    n = len(kernel)
    if not x.type.is_static or not y.type.is_static:
        raise UnsupportedOpError(f"MaxPool's Indices output needs static shapes, got {x.type}")
    if math.prod(kernel) > MAX_TAPS:
        raise UnsupportedOpError(f"MaxPool's Indices output of a window of more than {MAX_TAPS} taps "
                                 f"({kernel}) is not supported")
    sizes, outs = x.type.shape[2:], y.type.shape[2:]
    begins = pads[:n]
    # (pad the end so every tap of every window is inside: ceil_mode's last window too)
    ends = [max(0, (o - 1) * s + (k - 1) * d + 1 - size - b)
            for o, s, k, d, size, b in zip(outs, strides, kernel, dilations, sizes, begins)]
    low = -np.inf if x.type.dtype.startswith(("float", "bfloat")) else np.iinfo(np.dtype(x.type.dtype)).min
    padded = node.call("pad", x, pad_width=(0, 0, *begins, 0, 0, *ends), mode="constant", pad_value=float(low))
    order = range(n) if storage_order == 0 else range(n - 1, -1, -1)
    step, steps = 1, [0] * n  # (each spatial axis's step in the flat index)
    for i in reversed(list(order)):
        steps[i] = step
        step *= sizes[i]
    axes = tuple(range(2, 2 + n))
    taps = list(np.ndindex(*kernel))
    windows = [node.call("unsqueeze", node.call(
        "strided_slice", padded, begin=tuple(t * d for t, d in zip(tap, dilations)),
        end=tuple(t * d + (o - 1) * s + 1 for t, d, o, s in zip(tap, dilations, outs, strides)),
        axes=axes, strides=tuple(strides)), axes=(0,)) for tap in taps]
    stacked = windows[0] if len(windows) == 1 else node.call("concat", *windows, axis=0)
    best = node.call("argmax", stacked, axis=0, keepdims=False, select_last_index=False)
    offsets = np.array([sum(t * d * st for t, d, st in zip(tap, dilations, steps)) for tap in taps], np.int64)
    index = node.call("gather", node.const_like(offsets, "int64"), best, axis=0)
    batch, channels = x.type.shape[:2]
    base = (np.arange(batch * channels, dtype=np.int64) * math.prod(sizes)).reshape(batch, channels, *([1] * n))
    index = node.call("add", index, node.const_like(base, "int64"))
    for i in range(n):  # (each window's origin: small constants per axis, broadcast)
        shape = [1] * (2 + n)
        shape[2 + i] = outs[i]
        origin = (np.arange(outs[i], dtype=np.int64) * strides[i] - begins[i]) * steps[i]
        index = node.call("add", index, node.const_like(origin.reshape(shape), "int64"))
    return index


__all__ = ["MAX_TAPS", "max_pool_indices"]
