"""Transpose by a permutation of axes, tiled so reads and writes both stay in cache."""
from __future__ import annotations

from ..loop import compute as te
from ..loop.schedule import Schedule
from .common import host, vector_lanes


def transpose(shape, perm, dtype: str = "float32", target=None):
    """``Y = X.transpose(perm)``; returns (schedule, [X, Y])."""
    target = host(target)
    lanes = vector_lanes(target, dtype)
    shape, perm = tuple(shape), tuple(perm)
    X = te.placeholder(shape, dtype, "X")
    out_shape = tuple(shape[p] for p in perm)
    inv = [perm.index(d) for d in range(len(shape))]
    Y = te.compute(out_shape, lambda *i: X[tuple(i[inv[d]] for d in range(len(shape)))], "Y")
    s = Schedule(Y)
    st = s[Y]
    leaves = list(st.leaf)
    if len(leaves) >= 2 and perm[-1] != len(shape) - 1:
        # the input's contiguous axis is an outer output axis: tile both
        a = leaves[inv[-1]]
        b = leaves[-1]
        t = 16
        ao, bo, ai, bi = st.tile(a, b, t, t)
        bio, bii = st.split(bi, factor=lanes)
        st.vectorize(bii)
        outer = [l for l in st.leaf if l not in (ai, bio, bii, bo, ao)]
        st.reorder(*outer, ao, bo, ai, bio, bii)
        st.parallel(st.fuse(*outer, ao) if outer else ao)
    else:
        bo, bi = st.split(leaves[-1], factor=lanes)
        st.vectorize(bi)
        if len(leaves) > 1:
            st.parallel(st.fuse(*leaves[:-1]) if len(leaves) > 2 else leaves[0])
    return s, [X, Y]
