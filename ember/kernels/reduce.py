"""Sum / max / min / prod over any one axis of a tensor.

Reducing the last axis goes through per-lane partials kept in registers (see ``norm.py``);
reducing any other axis keeps the contiguous inner axis as the vector lanes and the
reduction loop outside it. The outer axes run in parallel.
"""
from __future__ import annotations

from ..loop import compute as te
from ..loop.schedule import Schedule
from .common import host, vector_lanes, vectorize_inner
from .norm import lane_reduce, schedule_lane_reduce


def reduce(shape, axis: int, combiner: str = "sum", dtype: str = "float32", target=None):
    """Reduce ``shape`` over ``axis``; returns (schedule, [X, Y]) with Y's shape lacking ``axis``."""
    target = host(target)
    lanes = vector_lanes(target, dtype)
    shape = tuple(shape)
    axis = axis % len(shape)
    X = te.placeholder(shape, dtype, "X")
    if axis == len(shape) - 1:
        P, Y = lane_reduce(shape[:-1], shape[-1], lanes, combiner, lambda *i: X[i], "Y")
        s = Schedule(Y)
        outer = s[Y].leaf[:len(shape) - 1]
        if outer:
            s[Y].parallel(s[Y].fuse(*outer) if len(outer) > 1 else outer[0])
        schedule_lane_reduce(s, P, Y)
        return s, [X, Y]
    k = te.reduce_axis(shape[axis], "k")
    red = getattr(te, combiner)
    out_shape = shape[:axis] + shape[axis + 1:]
    Y = te.compute(out_shape, lambda *i: red(X[i[:axis] + (k,) + i[axis:]], axis=k), "Y")
    s = Schedule(Y)
    st = s[Y]
    *spatial, kk = st.leaf
    st.reorder(*spatial[:-1], kk, spatial[-1])
    vectorize_inner(st, spatial[-1], lanes)
    if len(spatial) > 1:
        st.parallel(spatial[0] if len(spatial) == 2 else st.fuse(*spatial[:-1]))
    return s, [X, Y]
