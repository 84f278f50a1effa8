"""Row statistics: softmax, log-softmax and the normalizations (layer, instance).

A tensor splits into independent *rows* (its leading axes) and the axes a statistic reduces.
Reductions that end at the last axis are written in two steps so they vectorize: a partial
reduction keeps one accumulator per vector lane (``part[r, l]`` over ``x[r, k*lanes + l]``),
then the lanes are combined; a reduction over a middle axis keeps the inner axes as vector
lanes. Statistics keep their reduced axes as size-1 dims so every consumer reads them at its
own index. Every intermediate of a row is computed at the output's row loop, so a row is read
from memory once, its intermediates stay in L1, and the whole kernel is one parallel loop
(:func:`schedule_rows`).
"""
from __future__ import annotations

import numpy as np

from ..loop import compute as te
from ..loop import dtype as dt
from ..loop import intrinsics as intr
from ..loop.expr import as_expr, cast, select
from ..loop.schedule import Schedule
from ..loop.expr import const
from .common import const_int, host, vector_lanes, vectorize_inner

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


def _identity(combiner: str, dtype: str):
    """The value ``combiner`` starts from (integer max/min: the dtype's limits)."""
    if dt.is_float(dtype) or combiner in ("sum", "prod"):
        return _IDENTITY[combiner]
    info = np.iinfo(dt.numpy_dtype(dtype))
    return int(info.min if combiner == "max" else info.max)


def axis_stat(x_fn, shape: tuple, axis: int, trailing: bool, combiner: str, lanes: int, name: str,
              dtype: str) -> tuple:
    """``combiner`` of ``x_fn(*index)`` over axis ``axis`` of ``shape`` -- or, with
    ``trailing``, over all axes from ``axis`` on -- kept as size-1 dims (so a consumer reads it
    at its own index with those axes at 0). A reduction ending at the last axis goes through
    per-lane partials (returned second; None otherwise)."""
    nd = len(shape)
    red_axes = tuple(range(axis, nd)) if trailing else (axis,)
    keep = tuple(1 if k in red_axes else d for k, d in enumerate(shape))
    red = getattr(te, combiner)
    if red_axes[-1] != nd - 1:  # a middle axis: a plain reduction, the inner axes stay spatial
        r = te.reduce_axis(shape[axis], f"{name}_r")

        def body(*i):
            return red(x_fn(*i[:axis], r.var, *i[axis + 1:]), axis=r)
        return te.compute(keep, body, name), None
    width = const_int(shape[-1])  # None for a symbolic size: every chunk is guarded
    chunks = -(-width // lanes) if width is not None else (as_expr(shape[-1]) + (lanes - 1)) // lanes
    ro = [te.reduce_axis(shape[a], f"{name}_r{a}") for a in red_axes[:-1]]
    k = te.reduce_axis(chunks, f"{name}_k")
    ident = _identity(combiner, dtype)
    exact = width is not None and width % lanes == 0

    def part(*idx):
        *rows, lane = idx
        j = k.var * lanes + lane
        v = x_fn(*rows, *[r.var for r in ro], j)
        return red(v if exact else select(j < as_expr(shape[-1]), v, ident), axis=(*ro, k))
    P = te.compute((*shape[:axis], lanes), part, f"{name}_part")
    ln = te.reduce_axis(lanes, f"{name}_l")
    R = te.compute(keep, lambda *i: red(P[(*i[:axis], ln.var)], axis=ln), name)
    return R, P


def stat_index(i: tuple, stat: te.Tensor) -> tuple:
    """Index a keep-dims statistic with a full index (its size-1 axes at 0)."""
    return tuple(0 if getattr(d, "value", None) == 1 else v for v, d in zip(i, stat.shape))


def schedule_rows(s: Schedule, Y: te.Tensor, out: te.Tensor = None, target=None) -> Schedule:
    """Schedule a row-statistics op (softmax, normalizations). Its ``attrs`` name ``nrows``
    (the leading axes that are independent rows), ``inner`` (for a statistic over one middle
    axis: the axes after it, also independent), ``at_row`` (the statistics and intermediates,
    producers first) and ``partials`` (per-lane partial sums).

    The rows run in parallel -- with inner axes, blocks of one vector along the last of them
    too -- and everything a row needs is computed inside its iteration, so a row is read from
    memory once and its intermediates stay in L1; reductions keep their inner axes as vector
    lanes. ``Y`` is inlined into ``out`` when it is an elementwise stage before an epilogue."""
    target = host(target)
    out = Y if out is None else out
    a = Y.op.attrs
    nrows, ninner = a["nrows"], a.get("inner", 0)
    lanes = vector_lanes(target, Y.dtype)
    if Y is not out and not Y.op.reduce_axis:
        s[Y].compute_inline()
    so = s[out]
    rows, cols = so.leaf[:nrows], so.leaf[nrows:]
    if ninner:  # (rows, inner..., vector block) in parallel, the reduced axis inside
        wo, wi = so.split(cols[-1], factor=lanes)
        so.reorder(*rows, *cols[1:-1], wo, cols[0], wi)
        so.vectorize(wi)
        rows = rows + cols[1:-1] + [wo]
    elif cols:
        vectorize_inner(so, cols[-1], lanes)
    row = None
    sizes = [const_int(r.extent) for r in rows]
    even = [k for k, n in enumerate(sizes) if n is not None and n % 2 == 0]
    if even and not ninner and None not in sizes and int(np.prod(sizes)) >= 16:
        # two rows a task, each stage over both: a row's statistics are chains of dependent
        # steps (its max, its lane sums), and the other row's fill their latency. (Split along
        # the innermost even row axis: ViT's 197 tokens pair by head.)
        k = even[-1]
        pair, two = so.split(rows[k], factor=2)
        rows = rows[:k] + [pair] + rows[k + 1:]
        so.reorder(*rows, two)
    if rows:
        row = so.fuse(*rows) if len(rows) > 1 else rows[0]
        so.parallel(row)
    for T in reversed(a["at_row"]):  # consumers first: compute_at needs every reader placed
        st = s[T]
        if row is not None:
            st.compute_at(so, row)
        inner = st.leaf[nrows:T.ndim]
        red = st.leaf[T.ndim:]
        # reductions outside, inner axes in vectors (a symbolic extent counts as long)
        if any(const_int(iv.extent) is None or const_int(iv.extent) > 1 for iv in inner):
            if red:
                st.reorder(*red, *inner)
            vectorize_inner(st, inner[-1], lanes)
        for P in a["partials"]:
            if P in T.op.input_tensors():  # its lane partials: k outer, the lanes vectorized
                sp = s[P]
                sp.reorder(*sp.leaf[P.ndim:], sp.leaf[P.ndim - 1])
                sp.vectorize(sp.leaf[-1])
                if T.ndim:
                    sp.compute_at(st, st.leaf[T.ndim - 1])
    return s


def _row_stages(*pairs) -> tuple:
    """(at_row stages, partials) of (stat, partial) pairs and plain stages, producers first."""
    at_row, partials = [], []
    for p in pairs:
        stat, part = p if isinstance(p, tuple) else (p, None)
        at_row.append(stat)
        if part is not None:
            partials.append(part)
    return at_row, partials


def softmax_compute(X: te.Tensor, axis: int = -1, log: bool = False, target=None,
                    name: str = "softmax") -> te.Tensor:
    """(Log-)softmax of ``X`` over ``axis``, shifted by the slice's max (no overflow)."""
    lanes = vector_lanes(host(target), X.dtype)
    axis %= X.ndim
    shape = tuple(X.shape)
    M = axis_stat(lambda *i: X[i], shape, axis, False, "max", lanes, f"{name}_max", X.dtype)
    m = M[0]

    def shifted(*i):
        return X[i] - m[stat_index(i, m)]
    if log:
        S = axis_stat(lambda *i: intr.exp(shifted(*i)), shape, axis, False, "sum", lanes, f"{name}_sum", X.dtype)
        sm = S[0]
        at_row, partials = _row_stages(M, S)
        return te.compute(shape, lambda *i: shifted(*i) - intr.log(sm[stat_index(i, sm)]), name,
                          attrs={"kind": "rows", "nrows": axis, "inner": X.ndim - 1 - axis, "at_row": at_row,
                                 "partials": partials})
    E = te.compute(shape, lambda *i: intr.exp(shifted(*i)), f"{name}_exp")
    S = axis_stat(lambda *i: E[i] if axis == X.ndim - 1 else intr.exp(shifted(*i)), shape, axis, False, "sum", lanes, f"{name}_sum", X.dtype)
    sm = S[0]
    # exp once per element: a row's exponentials are kept for the division when the row is
    # contiguous (the last axis); otherwise recomputed rather than stored in a strided slab
    last = axis == X.ndim - 1
    at_row, partials = _row_stages(M, E, S) if last else _row_stages(M, S)

    def body(*i):
        e = E[i] if last else intr.exp(shifted(*i))
        return e * (const(1.0, X.dtype) / sm[stat_index(i, sm)])
    return te.compute(shape, body, name, attrs={"kind": "rows", "nrows": axis, "inner": X.ndim - 1 - axis,
                                                "at_row": at_row, "partials": partials})


def _moments(X: te.Tensor, axis: int, lanes: int, name: str):
    """Mean and variance (two passes: the squares of the centered values) over axes
    ``axis..``, as keep-dims statistics with their partials."""
    shape = tuple(X.shape)
    n = as_expr(1)
    for d in shape[axis:]:
        n = n * d
    # (a symbolic count -- an instance norm over a sequence of any length -- divides at run time)
    count = const_int(n)
    inv = const(1.0 / count, X.dtype) if count is not None else const(1.0, X.dtype) / cast(X.dtype, n)
    S1 = axis_stat(lambda *i: X[i], shape, axis, True, "sum", lanes, f"{name}_sum", X.dtype)
    s1 = S1[0]

    def centered(*i):
        return X[i] - s1[stat_index(i, s1)] * inv
    S2 = axis_stat(lambda *i: centered(*i) * centered(*i), shape, axis, True, "sum", lanes, f"{name}_sq", X.dtype)
    return S1, S2, inv, centered


def normalize_compute(X: te.Tensor, axis: int, eps: float, scale, shift=None, target=None,
                      name: str = "norm") -> te.Tensor:
    """``(x - mean) / sqrt(var + eps) * scale(i) + shift(i)`` with the moments over axes
    ``axis..`` (layer norm: the trailing axes; instance norm: the spatial ones); ``scale`` and
    ``shift`` map an output index to the affine parameters (shift may be None)."""
    lanes = vector_lanes(host(target), X.dtype)
    S1, S2, inv, centered = _moments(X, axis, lanes, name)
    s2 = S2[0]
    e = const(float(eps), X.dtype)

    def body(*i):
        v = centered(*i) * intr.rsqrt(s2[stat_index(i, s2)] * inv + e) * scale(*i)
        return v if shift is None else v + shift(*i)
    at_row, partials = _row_stages(S1, S2)
    return te.compute(tuple(X.shape), body, name,
                      attrs={"kind": "rows", "nrows": axis, "at_row": at_row, "partials": partials})


def softmax(rows: int, cols: int, dtype: str = "float32", target=None):
    """Softmax over the last axis of (rows, cols); returns (schedule, [X, Y])."""
    X = te.placeholder((rows, cols), dtype, "X")
    Y = softmax_compute(X, -1, target=target, name="Y")
    s = Schedule(Y)
    schedule_rows(s, Y, Y, target)
    return s, [X, Y]


def layer_norm(rows: int, cols: int, eps: float = 1e-5, dtype: str = "float32", target=None):
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis; returns
    (schedule, [X, gamma, beta, Y])."""
    X = te.placeholder((rows, cols), dtype, "X")
    G = te.placeholder((cols,), dtype, "gamma")
    B = te.placeholder((cols,), dtype, "beta")
    Y = normalize_compute(X, 1, eps, lambda r, c: G[c], lambda r, c: B[c], target, "Y")
    s = Schedule(Y)
    schedule_rows(s, Y, Y, target)
    return s, [X, G, B, Y]
