"""Sum / max / min / prod over any one axis of a tensor.

Reducing the last axis goes through per-lane partials (see ``norm.py``); reducing any other
axis keeps the contiguous inner axes as the vector lanes and the reduction loop outside them.
"""
from __future__ import annotations

from ..loop import compute as te
from ..loop.schedule import Schedule
from .common import host, vector_lanes, vectorize_inner
from .norm import _lane_reduce


def reduce(shape, axis: int, combiner: str = "sum", dtype: str = "float32", target=None):
    """Reduce ``shape`` over ``axis``; returns (schedule, [X, Y]) with Y's shape lacking ``axis``."""
    target = host(target)
    lanes = vector_lanes(target, dtype)
    shape = tuple(shape)
    axis = axis % len(shape)
    X = te.placeholder(shape, dtype, "X")
    red = getattr(te, combiner)
    if axis == len(shape) - 1:
        rows = 1
        for d in shape[:-1]:
            rows *= d
        outer = shape[:-1]
        flat = X
        if len(shape) != 2:
            def idx(r, j):
                out, rest = [], r
                for d in reversed(outer):
                    out.append(rest % d)
                    rest = rest // d
                return tuple(reversed(out)) + (j,)
            fn = lambda r, j: X[idx(r, j)]  # noqa: E731
        else:
            fn = lambda r, j: X[r, j]  # noqa: E731
        P, R = _lane_reduce(flat, rows, shape[-1], lanes, combiner, fn, "Y")
        if len(shape) == 2:
            Y = R
            s = Schedule(Y)
        else:
            Y = te.compute(outer, lambda *i: R[_flat(i, outer)], "Yout")
            s = Schedule(Y)
            s[Y].parallel(s[Y].leaf[0])
        st = s[P]
        r, l, k = st.leaf
        st.reorder(r, k, l)
        st.vectorize(l)
        st.parallel(r)
        s[R].parallel(s[R].leaf[0])
        return s, [X, Y]
    k = te.reduce_axis(shape[axis], "k")
    out_shape = shape[:axis] + shape[axis + 1:]
    Y = te.compute(out_shape, lambda *i: red(X[i[:axis] + (k,) + i[axis:]], axis=k), "Y")
    s = Schedule(Y)
    st = s[Y]
    leaves = list(st.leaf)
    spatial, kk = leaves[:-1], leaves[-1]
    inner = spatial[-1]
    st.reorder(*spatial[:-1], kk, inner) if len(spatial) > 1 else st.reorder(kk, inner)
    outer, vec = vectorize_inner(st, inner, lanes)
    if len(spatial) > 1:
        st.parallel(spatial[0] if len(spatial) == 2 else st.fuse(*spatial[:-1]))
    return s, [X, Y]


def _flat(i, shape):
    out = 0
    for k, d in zip(i, shape):
        out = out * d + k
    return out
