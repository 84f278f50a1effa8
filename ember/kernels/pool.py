"""Pooling over 1 to 3 spatial dimensions, layout ``N C <spatial>``: max, average and Lp
pooling over sliding windows, and the global poolings.

A window pool pads the input once with the reduction's neutral value (-inf or the dtype's
minimum for max, 0 for sums) up to exactly the extent the last window reads (so ``ceil_mode``
windows need no bounds checks), reduces every window, then post-processes: the average
divides by the number of elements the window covers (taps inside the input, or inside the
padded input with ``count_include_pad``; a function of the output position only), Lp takes
the p-th root. The padded plane of one (n, c) is computed inside the loop over (n, c), so it
stays in cache; each output row is vectorized along its last axis with the window reduced in
registers.

Spatial sizes may be symbolic (frames of any length, an image of any size): the padding, the
window counts and the global average's divisor are then expressions of them.

A global pool reduces each (n, c) plane with one accumulator per vector lane along the last
axis (see ``norm.py``), then combines the lanes.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from ..loop import compute as te
from ..loop import dtype as dt
from ..loop import intrinsics as intr
from ..loop.expr import Expr, cast, const, max_, min_, select
from ..loop.schedule import Schedule
from .common import const_int, fold_size, host, parallel_outer, vector_lanes
from .conv import pad_spatial, vectorize_copy, window_last


def neutral(combiner: str, dtype: str):
    """The value that never wins ``combiner`` (max: -inf or the integer minimum; sum: 0)."""
    if combiner == "sum":
        return 0
    if dt.is_float(dtype):
        return -math.inf
    return int(np.iinfo(dt.numpy_dtype(dtype)).min)


def window_out(size: int, k: int, s: int, d: int, begin: int, end: int, ceil_mode: bool) -> int:
    """The number of windows (as ``graph.ops.dims.window_out``): with ``ceil_mode`` a partial
    last window counts unless it would start past the input and its leading padding."""
    span = size + begin + end - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and out > 1 and (out - 1) * s >= size + begin:
        out -= 1
    return out


def _window_count(o: Expr, k: int, s: int, d: int, begin: int, lo: int, hi: int) -> Expr:
    """How many taps ``o*s - begin + j*d`` (j < k) of window ``o`` fall in ``[lo, hi)``."""
    start = o * s - begin
    if d == 1:
        return max_(min_(start + k, hi) - max_(start, lo), 0)
    first = max_(-((start - lo) // d), 0)  # ceil((lo - start) / d), at least 0
    last = min_((hi - 1 - start) // d, k - 1)
    return max_(last - first + 1, 0)


def pool_compute(data: te.Tensor, kind: str, kernel: Sequence[int], strides=None, padding=None,
                 dilation=None, ceil_mode: bool = False, count_include_pad: bool = False, p: int = 2,
                 out_spatial: Optional[Sequence] = None, name: str = "pool", target=None,
                 blocked: bool = False) -> te.Tensor:
    """``kind`` ("max", "avg" or "lp") pooling of ``data`` (N, C, spatial...); ``padding`` lists
    every axis's leading pad, then every trailing pad. The result stage's ``attrs`` hold the
    stages the schedule needs (``pad``, ``acc``: the window reduction). ``blocked``: the data
    is in the blocked channel layout ``N C/b <spatial> b`` (so is the result)."""
    n = data.ndim - 2 - blocked
    strides, dilation = tuple(strides or (1,) * n), tuple(dilation or (1,) * n)
    padding = tuple(padding or (0,) * (2 * n))
    sizes = [fold_size(s) for s in data.shape[2:2 + n]]  # (ints, or expressions of symbolic sizes)
    if out_spatial is None:
        if not all(isinstance(v, int) for v in sizes):
            raise ValueError(f"{name}: symbolic spatial sizes {data.shape} need the output's (out_spatial)")
        out_spatial = [window_out(sizes[i], kernel[i], strides[i], dilation[i], padding[i], padding[n + i],
                                  ceil_mode) for i in range(n)]
    out_spatial = [fold_size(o) for o in out_spatial]
    combiner = "max" if kind == "max" else "sum"
    lanes = vector_lanes(host(target), data.dtype)
    # pad to what the windows read: ceil-mode windows may go past the trailing pad, and along
    # the last axis every window of the last vector of outputs
    # (blocked: the vectors run along the channel block, and every window's reads are whole)
    begin = padding[:n]
    last = [o if i < n - 1 or blocked else fold_size((o + (lanes - 1)) // lanes * lanes)
            for i, o in enumerate(out_spatial)]
    end = [fold_size((o - 1) * s + d * (k - 1) + 1 - b - size)
           for o, s, d, k, b, size in zip(last, strides, dilation, kernel, begin, sizes)]
    # a strided window reads its de-interleaved input contiguously (a stride that is a size, a
    # tier-0 kernel's, reads it strided)
    phases = 1 if blocked or not isinstance(strides[-1], int) else strides[-1]
    rk = [te.reduce_axis(k, f"{name}_k{i}") for i, k in enumerate(kernel)]
    # a blocked max pool reads its taps clamped into the input instead of a padded copy (one
    # pass over memory less): a window that reaches past an edge also holds the edge element
    # its outside taps clamp to (with taps one apart), so the maximum is the same
    clamp = blocked and kind == "max" and all(isinstance(v, int) for v in (*kernel, *begin)) \
        and all(d == 1 for d in dilation) and all(k > b for k, b in zip(kernel, begin))
    if clamp:
        padded = data

        def element(nn, c, *o):
            o, ci = o[:n], o[n:]
            idx = [min_(max_(oi * s + r.var * d - b, 0), size - 1)
                   for oi, s, r, d, b, size in zip(o, strides, rk, dilation, begin, sizes)]
            return te.max(data[(nn, c, *idx, *ci)], axis=tuple(rk))
    else:
        padded = pad_spatial(data, begin, end, neutral(combiner, data.dtype), f"{name}_pad", phases=phases,
                             inner=int(blocked))

    def padded_element(nn, c, *o):
        o, ci = o[:n], o[n:]
        idx = [oi * s + r.var * d for oi, s, r, d in zip(o[:-1], strides, rk, dilation)]
        idx += window_last(padded, o[-1], rk[-1].var, strides[-1], dilation[-1], phases)
        v = padded[(nn, c, *idx, *ci)]
        if kind == "lp":
            v = intr.abs(v) if p == 1 else v * v if p == 2 else intr.pow(intr.abs(v), const(float(p), v.dtype))
        return getattr(te, combiner)(v, axis=tuple(rk))
    if not clamp:
        element = padded_element

    shape = tuple(data.shape[:2]) + tuple(out_spatial) + tuple(data.shape[2 + n:])
    parts = {"kind": "pool", "pad": padded if padded is not data else None, "xb": lanes, "blocked": blocked}
    acc = te.compute(shape, element, name if kind == "max" else f"{name}_acc", attrs=parts)
    if kind == "max":
        return acc
    parts = {**parts, "acc": acc}
    if kind == "lp":
        def root(*i):
            v = acc[i]
            return v if p == 1 else intr.sqrt(v) if p == 2 else intr.pow(v, const(1.0 / p, v.dtype))
        return te.compute(shape, root, name, attrs=parts)

    def average(nn, c, *oc):
        o, count = oc[:n], None
        for i, oi in enumerate(o):
            lo, hi = (-begin[i], sizes[i] + padding[n + i]) if count_include_pad else (0, sizes[i])
            ci = _window_count(oi, kernel[i], strides[i], dilation[i], begin[i], lo, hi)
            count = ci if count is None else count * ci
        v = acc[(nn, c, *oc)]
        return v / cast(v.dtype, count)

    return te.compute(shape, average, name, attrs=parts)


def global_pool_compute(data: te.Tensor, kind: str, target=None, name: str = "global_pool") -> te.Tensor:
    """Global ``kind`` ("max" or "avg") pooling: (N, C, spatial...) -> (N, C, 1, ...)."""
    lanes = vector_lanes(host(target), data.dtype)
    n = data.ndim - 2
    *outer, W = data.shape[2:]
    width = fold_size(W)  # (an int, or an expression of symbolic sizes)
    combiner = "max" if kind == "max" else "sum"
    ident = const(neutral(combiner, data.dtype), data.dtype)
    red = getattr(te, combiner)
    chunks = fold_size((width + (lanes - 1)) // lanes)
    ragged = not isinstance(width, int) or width % lanes
    ro = [te.reduce_axis(s, f"{name}_r{i}") for i, s in enumerate(outer)]
    k = te.reduce_axis(chunks, f"{name}_k")

    def part(nn, c, lane):
        j = k.var * lanes + lane
        v = data[(nn, c, *[r.var for r in ro], j)]
        return red(select(j < width, v, ident) if ragged else v, axis=(*ro, k))

    P = te.compute((*data.shape[:2], lanes), part, f"{name}_part")
    ln = te.reduce_axis(lanes, f"{name}_l")
    shape = (*data.shape[:2], *(1,) * n)
    parts = {"kind": "global_pool", "part": P}
    R = te.compute(shape, lambda nn, c, *_: red(P[nn, c, ln.var], axis=ln),
                   name if kind == "max" else f"{name}_acc", attrs=parts)
    if kind == "max":
        return R
    count = 1
    for s in data.shape[2:]:
        count = fold_size(count * s)
    if isinstance(count, int):
        inv = const(1.0 / count, data.dtype)
        return te.compute(shape, lambda *i: R[i] * inv, name, attrs={**parts, "acc": R})
    return te.compute(shape, lambda *i: R[i] / cast(data.dtype, count), name, attrs={**parts, "acc": R})


def _accumulator(s: Schedule, anchor: te.Tensor, out: te.Tensor) -> tuple:
    """(the window reduction, the stage that gets its register copy): an elementwise anchor
    (the average's division, the Lp root) is inlined into ``out`` when it is not ``out``."""
    acc = anchor.op.attrs.get("acc", anchor)
    if anchor is not acc and anchor is not out:
        s[anchor].compute_inline()
    if acc is out:
        return acc, s.cache_write(acc, "local")
    return acc, acc


def schedule_pool(s: Schedule, anchor: te.Tensor, out: Optional[te.Tensor] = None, target=None) -> Schedule:
    """Schedule a :func:`pool_compute` result ``anchor`` written through ``out`` (itself or an
    inlined elementwise epilogue): one parallel loop over (n, c) with the padded plane computed
    inside it, output rows vectorized, each vector of windows reduced in registers."""
    target = host(target)
    out = anchor if out is None else out
    lanes = vector_lanes(target, anchor.dtype)
    acc, local = _accumulator(s, anchor, out)
    if acc.op.attrs.get("blocked"):
        return _schedule_blocked(s, acc, local, out, lanes)
    so = s[out]
    n, c, *sp = so.leaf
    nc = so.fuse(n, c)
    so.parallel(nc)
    xo, xi = so.split(sp[-1], factor=acc.op.attrs["xb"])
    so.vectorize(xi)
    st = s[local]
    st.compute_at(so, xo)
    nsp = anchor.ndim - 2
    red = st.leaf[2 + nsp:]
    st.reorder(*red, *st.leaf[:2 + nsp])
    if (const_int(st.leaf[-1].extent) or 0) <= 64:
        st.vectorize(st.leaf[-1])
    pad = acc.op.attrs["pad"]
    if pad is not None:
        s[pad].compute_at(so, nc)
        vectorize_copy(s[pad], pad, lanes)
    return s


def _schedule_blocked(s: Schedule, acc: te.Tensor, local: te.Tensor, out: te.Tensor, lanes: int) -> Schedule:
    """A pool in the blocked channel layout: rows of channel blocks in parallel, each window
    reduced over vectors of the block's channels (contiguous), in registers. (A vector no
    wider than the block: int8 codes in blocks of 32 on 64 byte lanes ran predicated, 1.7x
    slower.)"""
    block = const_int(acc.shape[-1])
    if block:
        lanes = min(lanes, block & -block)
    so = s[out]
    *outer, x, ci = so.leaf
    parallel_outer(so, outer)
    _, cl = so.split(ci, factor=lanes)
    so.vectorize(cl)
    st = s[local]
    st.compute_at(so, x)
    nsp = acc.ndim - 3
    spatial, red = st.leaf[:3 + nsp], st.leaf[3 + nsp:]
    st.reorder(*red, *spatial)
    _, v = st.split(spatial[-1], factor=lanes)
    st.vectorize(v)
    pad = acc.op.attrs["pad"]
    if pad is not None:
        sp = s[pad]
        sp.parallel(sp.fuse(*sp.leaf[:-2]))
        _, v = sp.split(sp.leaf[-1], factor=lanes)
        sp.vectorize(v)
    return s


def schedule_global_pool(s: Schedule, anchor: te.Tensor, out: Optional[te.Tensor] = None,
                         target=None) -> Schedule:
    """Schedule a :func:`global_pool_compute` result: (n, c) in parallel, each plane reduced
    with per-lane partials kept in registers."""
    out = anchor if out is None else out
    acc, local = _accumulator(s, anchor, out)
    so = s[out]
    n, c, *_ = so.leaf
    nc = parallel_outer(so, [n, c])
    if local is not out:
        s[local].compute_at(so, nc)
    P = acc.op.attrs["part"]
    sp = s[P]
    pn, pc, pl, *red = sp.leaf
    sp.reorder(*red, pl)
    sp.vectorize(pl)
    sp.compute_at(s[local], s[local].leaf[len(acc.shape) - 1])
    return s
