"""Converters of ONNX ops whose output sizes depend on the data (``NonZero``).

Each is a count computed by a kernel, a ``bind_size`` that makes the count a data size (a
symbol the program binds while running), and the op itself over that size
(:mod:`ember.graph.ops.dynamic`).
"""
from __future__ import annotations

import itertools

from ...errors import ShapeError
from ...graph.ops.dims import data_dim
from .table import converter

_fresh = itertools.count()


def bound_size(node, count):
    """``(bind_size call, data size)``: the int64 scalar ``count`` as a size the program binds
    while running (named after the node)."""
    return _size_of(node, count)


def _size_of(node, count):
    """``count`` (an int64 scalar) bound to a new data size named after the node."""
    base = node.output_names[0] or f"{node.op_type}_{next(_fresh)}"
    size = data_dim(f"{base}.n")
    return node.call("bind_size", count, symbols=(size,)), size


@converter("NonZero")
def _nonzero(node):
    return [nonzero(node, node.input(0))]


def nonzero(node, x):
    """The positions of ``x``'s nonzero elements, ``(rank, count)`` (count: a data size)."""
    axes = tuple(range(x.type.ndim))
    flags = node.call("cast", node.call("not_equal", x, node.const_like(0, x.type.dtype)), dtype="int64")
    count = node.call("sum", flags, axis=axes, keepdims=False) if axes else flags
    count, size = _size_of(node, count)
    return node.call("nonzero", x, count, size=size)


@converter("Compress", since=9)
def _compress(node):
    """The slices along ``axis`` (of the flattened input without one) where the condition holds:
    NonZero's positions of the condition, then a gather."""
    x, cond = node.input(0), node.input(1)
    if cond.type.ndim != 1:
        raise ShapeError(f"the condition must be 1-D, got {cond.type}")
    axis = node.attr("axis")
    if axis is None:
        x = node.call("reshape", x, newshape=(-1,))
        axis = 0
    idx = nonzero(node, cond)  # (1, count)
    positions = node.call("reshape", idx, newshape=(idx.type.shape[1],))
    return [node.call("gather", x, positions, axis=axis)]
