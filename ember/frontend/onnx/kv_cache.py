"""TensorScatter (opset 24): a KV cache of fixed length updated at each sample's write index,
computed as a select, not a scatter: position ``j`` of the present cache is the update's
element ``j - w[b]`` (modulo the cache's length in circular mode) where that lies in the update,
else the past's. One injective kernel that fuses with its neighbours, every position written
once, in parallel."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...graph import Constant
from .table import converter


@converter("TensorScatter", since=24)
def _tensor_scatter(node):
    past, update = node.input(0), node.input(1)
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise UnsupportedOpError(f"mode {mode!r} is not 'linear' or 'circular'")
    nd = past.type.ndim
    if update.type.ndim != nd:
        raise ShapeError(f"past_cache {past.type} and update {update.type} differ in rank")
    axis = node.attr("axis", -2) % nd
    if axis == 0:
        raise ShapeError("the sequence axis cannot be the batch axis (0)")
    m = past.type.shape[axis]
    for k, (a, b) in enumerate(zip(past.type.shape, update.type.shape)):
        if k != axis and a != b:  # (the update is read where the past is: every other size must agree)
            raise ShapeError(f"past_cache {past.type} and update {update.type} differ on axis {k}")
    if node.has(2):
        wt = node.type(2)
        if wt.ndim != 1 or (isinstance(wt.shape[0], int) and isinstance(past.type.shape[0], int)
                            and wt.shape[0] != past.type.shape[0]):
            raise ShapeError(f"write_indices must hold one index per batch item ({past.type.shape[0]}), got {wt}")
    at_axis = tuple(-1 if k == axis else 1 for k in range(nd))
    j = node.call("reshape", node.call("range", start=0, stop=m, dtype="int64"), newshape=at_axis)
    if node.has(2):
        w = node.call("cast", node.input(2), dtype="int64") if node.type(2).dtype != "int64" else node.input(2)
        w = node.call("reshape", w, newshape=(-1,) + (1,) * (nd - 1))
        pos = node.call("subtract", j, w)  # (B, 1.., M, 1..): the update's element at each place
    else:
        pos = j
    if mode == "circular":
        pos = node.call("mod", pos, _dim(node, past, axis), fmod=False)
    zero = Constant(np.array(0, np.int64))
    length = _dim(node, update, axis)
    inside = node.call("logical_and", node.call("greater_equal", pos, zero), node.call("less", pos, length))
    last = node.call("subtract", length, Constant(np.array(1, np.int64)))
    index = node.call("maximum", node.call("minimum", pos, last), zero)
    index = node.call("expand", index, shape=past.type.shape)
    taken = node.call("gather_elements", update, index, axis=axis)
    return [node.call("where", node.call("expand", inside, shape=past.type.shape), taken, past)]


def _dim(node, x, axis: int):
    """Size ``axis`` of ``x`` as an int64 scalar (a constant where it is static)."""
    d = x.type.shape[axis]
    if isinstance(d, int):
        return Constant(np.array(d, np.int64))
    return node.call("gather", node.call("shape_of", x), Constant(np.array(axis, np.int64)), axis=0)
