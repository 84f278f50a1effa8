"""Row softmax and layer normalization over the last axis.

Row reductions are written in two steps so they vectorize: a partial reduction keeps one
accumulator per vector lane (``part[r, l]`` over ``x[r, k*lanes + l]``), then the lanes are
combined. Every stage runs its rows in parallel.
"""
from __future__ import annotations

from ..loop import compute as te
from ..loop import intrinsics as intr
from ..loop.expr import select
from ..loop.schedule import Schedule
from .common import host, vector_lanes


def _lane_reduce(x: te.Tensor, rows, n: int, lanes: int, combiner: str, fn, name: str):
    """``combiner`` over the last axis of ``fn(r, j)``, through per-lane partials."""
    chunks = -(-n // lanes)
    k = te.reduce_axis(chunks, f"{name}_k")
    red = getattr(te, combiner)
    ident = {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[combiner]

    def part(r, l):
        j = k * lanes + l
        v = fn(r, j)
        return red(v if n % lanes == 0 else select(j < n, v, ident), axis=k)
    P = te.compute((rows, lanes), part, f"{name}_part")
    l = te.reduce_axis(lanes, f"{name}_l")
    R = te.compute((rows,), lambda r: red(P[r, l], axis=l), name)
    return P, R


def _schedule_rows(s: Schedule, lanes: int, parts, elementwise):
    for P in parts:
        st = s[P]
        r, l, k = st.leaf
        st.reorder(r, k, l)
        st.vectorize(l)
        st.parallel(r)
    for R in elementwise:
        st = s[R]
        r, c = st.leaf
        co, ci = st.split(c, factor=lanes)
        st.vectorize(ci)
        st.parallel(r)


def softmax(rows: int, cols: int, dtype: str = "float32", target=None):
    """Softmax over the last axis of (rows, cols); returns (schedule, [X, Y])."""
    target = host(target)
    lanes = vector_lanes(target, dtype)
    X = te.placeholder((rows, cols), dtype, "X")
    Pm, M = _lane_reduce(X, rows, cols, lanes, "max", lambda r, j: X[r, j], "rowmax")
    E = te.compute((rows, cols), lambda r, c: intr.exp(X[r, c] - M[r]), "e")
    Ps, S = _lane_reduce(E, rows, cols, lanes, "sum", lambda r, j: E[r, j], "rowsum")
    Y = te.compute((rows, cols), lambda r, c: E[r, c] * (1.0 / S[r]), "Y")
    s = Schedule(Y)
    for R in (M, S):
        s[R].parallel(s[R].leaf[0])
    _schedule_rows(s, lanes, [Pm, Ps], [E, Y])
    return s, [X, Y]


def layer_norm(rows: int, cols: int, eps: float = 1e-5, dtype: str = "float32", target=None):
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis; returns
    (schedule, [X, gamma, beta, Y])."""
    target = host(target)
    lanes = vector_lanes(target, dtype)
    X = te.placeholder((rows, cols), dtype, "X")
    G = te.placeholder((cols,), dtype, "gamma")
    B = te.placeholder((cols,), dtype, "beta")
    Pm, Sm = _lane_reduce(X, rows, cols, lanes, "sum", lambda r, j: X[r, j], "rowsum")
    Pv, Sv = _lane_reduce(X, rows, cols, lanes, "sum",
                          lambda r, j: (X[r, j] - Sm[r] * (1.0 / cols)) * (X[r, j] - Sm[r] * (1.0 / cols)),
                          "rowsq")
    Y = te.compute((rows, cols), lambda r, c: (X[r, c] - Sm[r] * (1.0 / cols))
                   * intr.rsqrt(Sv[r] * (1.0 / cols) + eps) * G[c] + B[c], "Y")
    s = Schedule(Y)
    for R in (Sm, Sv):
        s[R].parallel(s[R].leaf[0])
    _schedule_rows(s, lanes, [Pm, Pv], [Y])
    return s, [X, G, B, Y]
