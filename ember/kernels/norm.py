"""Row softmax and layer normalization over the last axis.

Row reductions are written in two steps so they vectorize: a partial reduction keeps one
accumulator per vector lane (``part[r, l]`` over ``x[r, k*lanes + l]``), then the lanes are
combined. Every intermediate of a row is computed at the output's row loop, so a row is read
from memory once, its intermediates stay in L1, and the whole kernel is one parallel loop.
"""
from __future__ import annotations

from ..loop import compute as te
from ..loop import intrinsics as intr
from ..loop.expr import select
from ..loop.schedule import Schedule
from .common import host, vector_lanes

_IDENTITY = {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}


def lane_reduce(rows: tuple, n: int, lanes: int, combiner: str, fn, name: str):
    """``combiner`` over the last axis (length ``n``) of ``fn(*row, j)`` for every ``row`` index
    in ``rows``, through per-lane partials; returns (partials, result)."""
    chunks = -(-n // lanes)
    k = te.reduce_axis(chunks, f"{name}_k")
    red = getattr(te, combiner)
    ident = _IDENTITY[combiner]

    def part(*idx):
        *r, l = idx
        j = k * lanes + l
        v = fn(*r, j)
        return red(v if n % lanes == 0 else select(j < n, v, ident), axis=k)
    P = te.compute(tuple(rows) + (lanes,), part, f"{name}_part")
    l = te.reduce_axis(lanes, f"{name}_l")
    R = te.compute(tuple(rows), lambda *r: red(P[tuple(r) + (l,)], axis=l), name)
    return P, R


def schedule_lane_reduce(s: Schedule, P, R):
    """Partials in registers at the row loop: k outer, the lanes vectorized."""
    st = s[P]
    *_, l, k = st.leaf
    st.reorder(k, l)
    st.vectorize(l)
    spatial = [iv for iv in s[R].leaf if iv.kind == "spatial"]
    st.compute_at(s[R], spatial[-1])


def _row_outputs(s: Schedule, Y, lanes: int, at_row: list):
    """Compute ``at_row`` (producers first) at Y's row loop; Y's row in parallel, vectorized."""
    st = s[Y]
    r, c = st.leaf
    co, ci = st.split(c, factor=lanes)
    st.vectorize(ci)
    st.parallel(r)
    for T in reversed(at_row):  # consumers first: compute_at needs every reader placed
        s[T].compute_at(st, r)
        if len(T.shape) == 2 and not any(iv.kind == "reduce" for iv in s[T].leaf):
            o, i = s[T].split(s[T].leaf[-1], factor=lanes)
            s[T].vectorize(i)


def softmax(rows: int, cols: int, dtype: str = "float32", target=None):
    """Softmax over the last axis of (rows, cols); returns (schedule, [X, Y])."""
    target = host(target)
    lanes = vector_lanes(target, dtype)
    X = te.placeholder((rows, cols), dtype, "X")
    Pm, M = lane_reduce((rows,), cols, lanes, "max", lambda r, j: X[r, j], "rowmax")
    E = te.compute((rows, cols), lambda r, c: intr.exp(X[r, c] - M[r]), "e")
    Ps, S = lane_reduce((rows,), cols, lanes, "sum", lambda r, j: E[r, j], "rowsum")
    Y = te.compute((rows, cols), lambda r, c: E[r, c] * (1.0 / S[r]), "Y")
    s = Schedule(Y)
    schedule_lane_reduce(s, Pm, M)
    schedule_lane_reduce(s, Ps, S)
    _row_outputs(s, Y, lanes, [M, E, S])
    return s, [X, Y]


def layer_norm(rows: int, cols: int, eps: float = 1e-5, dtype: str = "float32", target=None):
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis; returns
    (schedule, [X, gamma, beta, Y])."""
    target = host(target)
    lanes = vector_lanes(target, dtype)
    X = te.placeholder((rows, cols), dtype, "X")
    G = te.placeholder((cols,), dtype, "gamma")
    B = te.placeholder((cols,), dtype, "beta")
    inv = 1.0 / cols
    Pm, Sm = lane_reduce((rows,), cols, lanes, "sum", lambda r, j: X[r, j], "rowsum")
    Pv, Sv = lane_reduce((rows,), cols, lanes, "sum",
                         lambda r, j: (X[r, j] - Sm[r] * inv) * (X[r, j] - Sm[r] * inv), "rowsq")
    Y = te.compute((rows, cols), lambda r, c: (X[r, c] - Sm[r] * inv)
                   * intr.rsqrt(Sv[r] * inv + eps) * G[c] + B[c], "Y")
    s = Schedule(Y)
    schedule_lane_reduce(s, Pm, Sm)
    schedule_lane_reduce(s, Pv, Sv)
    _row_outputs(s, Y, lanes, [Sm, Sv])
    return s, [X, G, B, Y]
