"""Converters of ONNX ops whose output sizes depend on the data (``NonZero``, ``Unique``).

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


@converter("Unique", since=11)
def _unique(node):
    """The distinct values (or slices along ``axis``), sorted or by first occurrence, with the
    first index of each, every element's class and each class's count: ``unique_classes`` over
    the slices as rows, their count bound while running, ``unique_tally``, and a gather."""
    x = node.input(0)
    axis = node.attr("axis")
    if axis is None:
        rows = node.call("reshape", x, newshape=(-1, 1))
        others: tuple = ()
    else:
        axis %= x.type.ndim
        perm = (axis,) + tuple(a for a in range(x.type.ndim) if a != axis)
        others = tuple(x.type.shape[a] for a in perm[1:])
        rows = node.call("reshape", node.call("transpose", x, axes=perm), newshape=(x.type.shape[axis], -1))
    n = rows.type.shape[0]
    cls = node.call("unique_classes", rows, sorted=bool(node.attr("sorted", 1)))

    def row(k):
        return node.call("reshape", node.call("strided_slice", cls, begin=(k,), end=(k + 1,), axes=(0,)), newshape=(n,))
    first, inverse = row(0), row(1)
    positions = node.call("range", start=0, stop=n, step=1, dtype="int64")
    count = node.call("sum", node.call("cast", node.call("equal", first, positions), dtype="int64"), axis=(0,),
                      keepdims=False)
    count, size = _size_of(node, count)
    tally = node.call("unique_tally", cls, count, size=size)

    def tally_row(k):
        return node.call("reshape", node.call("strided_slice", tally, begin=(k,), end=(k + 1,), axes=(0,)),
                         newshape=(size,))
    indices, counts = tally_row(0), tally_row(1)
    y = node.call("gather", rows, indices, axis=0)  # (size, columns)
    if axis is None:
        y = node.call("reshape", y, newshape=(size,))
    else:
        y = node.call("reshape", y, newshape=(size,) + others)
        back = [0] * x.type.ndim
        for k, a in enumerate(perm):
            back[a] = k
        y = node.call("transpose", y, axes=tuple(back))
    return [y, indices, inverse, counts][:max(1, node.num_outputs)]
