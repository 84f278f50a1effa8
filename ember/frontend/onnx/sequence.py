"""Converters of ONNX's sequence ops, for sequences whose length and items are known at import
(a model that builds a list of tensors and concatenates or indexes it): a sequence is an
import-time tuple of graph expressions, never a runtime value. A Loop appending to one unrolls
where its trip count is known (:mod:`.unroll`); sequences as graph inputs and outputs are
lists of arrays, the model compiled per their structure (:mod:`.boundary`). A sequence whose
length depends on the data is unsupported.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from .table import converter


@dataclasses.dataclass(frozen=True)
class SequenceValue:
    """An ONNX sequence known at import: its tensors (graph expressions), in order."""

    items: tuple
    dtype: str = "float32"

    type = None  # (not a typed graph value: no folding, no graph output)


def _seq(node, i: int) -> SequenceValue:
    s = node.input(i)
    if not isinstance(s, SequenceValue):
        raise UnsupportedOpError(f"input {i} ({node.input_names[i]!r}) must be a sequence known at import")
    return s


def _position(node, i: int, n: int, default: int, insert: bool = False) -> int:
    p = node.int_scalar(i, "position") if node.has(i) else default
    if not (-n <= p <= (n if insert else n - 1)):
        raise ShapeError(f"position {p} is outside a sequence of {n}")
    return p + n if p < 0 else p


@converter("SequenceEmpty", since=11)
def _empty(node):
    from .dtypes import to_ember

    return [SequenceValue((), to_ember(node.attr("dtype", 1), "SequenceEmpty's dtype"))]


@converter("SequenceConstruct", since=11)
def _construct(node):
    items = tuple(node.input(i) for i in range(len(node.inputs)))
    return [SequenceValue(items, items[0].type.dtype if items else "float32")]


@converter("SequenceAt", since=11, const_inputs=(1,))
def _at(node):
    s = _seq(node, 0)
    return [s.items[_position(node, 1, len(s.items), 0)]]


@converter("SequenceInsert", since=11, const_inputs=(2,))
def _insert(node):
    s = _seq(node, 0)
    p = _position(node, 2, len(s.items), len(s.items), insert=True)
    return [SequenceValue(s.items[:p] + (node.input(1),) + s.items[p:], s.dtype)]


@converter("SequenceErase", since=11, const_inputs=(1,))
def _erase(node):
    s = _seq(node, 0)
    p = _position(node, 1, len(s.items), len(s.items) - 1)
    return [SequenceValue(s.items[:p] + s.items[p + 1:], s.dtype)]


@converter("SequenceLength", since=11)
def _length(node):
    return [node.const_like(np.int64(len(_seq(node, 0).items)), "int64")]


@converter("ConcatFromSequence", since=11)
def _concat(node):
    s = _seq(node, 0)
    if not s.items:
        raise ShapeError("ConcatFromSequence of an empty sequence")
    axis = node.attr("axis")
    items = s.items
    if node.attr("new_axis", 0):  # stack: a new axis at ``axis`` (counted in the result's rank)
        axis %= items[0].type.ndim + 1
        items = tuple(node.call("unsqueeze", t, axes=(axis,)) for t in items)
    return [node.call("concat", *items, axis=axis)]


@converter("SplitToSequence", since=11, const_inputs=(1,))
def _split(node):
    x = node.input(0)
    axis = node.attr("axis", 0) % x.type.ndim
    dim = x.type.shape[axis]
    if not isinstance(dim, int):
        raise UnsupportedOpError(f"SplitToSequence along a symbolic axis ({x.type}): the sequence's length "
                                 "would depend on the data")
    if node.has(1):
        split = node.ints(1, "split")
        if np.asarray(node.const(1, "split")).ndim == 0:  # a chunk size: the last chunk may be shorter
            step = split[0]
            split = tuple(min(step, dim - k) for k in range(0, dim, step))
        keep = True
    else:  # one item per element, without the axis unless keepdims
        split, keep = (1,) * dim, bool(node.attr("keepdims", 1))
    if sum(split) != dim:
        raise ShapeError(f"split {split} does not add up to axis {axis} of {x.type}")
    items, start = [], 0
    for n in split:
        part = node.call("strided_slice", x, begin=(start,), end=(start + n,), axes=(axis,))
        items.append(part if keep else node.call("squeeze", part, axis=(axis,)))
        start += n
    return [SequenceValue(tuple(items), x.type.dtype)]
