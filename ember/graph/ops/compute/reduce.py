"""Computes of the reductions: sum, mean, prod, max, min, the norms, log_sum(_exp), argmax/argmin.

A reduction over ``axis`` (a tuple, or None for all axes) is one ``te`` stage with one reduce
axis per reduced dimension; ``keepdims`` keeps them as size-1 output dims (indexed 0).
Reductions that post-process (mean, l2_norm, log_sum, log_sum_exp) add an elementwise stage
after it, since a reduction must be a stage's whole body. log_sum_exp shifts by the slice's max
(a max stage first); argmax/argmin reduce the extreme value, then the min (first) or max (last,
``select_last_index``) index holding it. Empty slices give the combiner's identity (0, 1,
-inf/+inf or the dtype's limits), as ONNX defines them.
"""
from __future__ import annotations

import math

from ....kernels.common import const_int, plain, vector_lanes
from ....loop import compute as te
from ....loop import dtype as dt
from ....loop import intrinsics as intr
from ....loop.expr import as_expr, cast, const, eq, max_, select, truncdiv, unflatten
from ..reduce import reduced_axes
from ..registry import norm_axis
from .common import register_compute, stage_name, te_shape


LANE_ACCUMULATORS = 4  # vectors of partials a lane reduction keeps in flight (FMA/max latency x throughput)


def _static(d):
    """``d`` (an int or a size expression) as an int, or None where it is symbolic."""
    return d if isinstance(d, int) else const_int(d)


def _lane_stage(combiner: str, x: te.Tensor, axes: tuple, keepdims: bool, out_shape: tuple, name: str, fn):
    """A float sum, max or min over the trailing axes of ``x`` (a dynamic quantizer's min and max
    over a whole tensor, a sum over a row) through per-lane partials: ``part[rows, 0, l]``
    combines the elements ``l, l + L, l + 2L, ...`` of each row's reduced run (contiguous in
    memory), ``L`` a few vectors of lanes, so the loop is vector loads into independent
    accumulators rather than one scalar chain; the result combines the ``L`` partials. None
    where this does not apply (another combiner or type, sizes not static or not a multiple of
    ``L``, a GPU's plain computes)."""
    nd = x.ndim
    if plain() or combiner not in ("sum", "max", "min") or not dt.is_float(x.dtype):
        return None
    first = nd - len(axes)
    if not axes or tuple(sorted(axes)) != tuple(range(first, nd)):
        return None
    sizes = [_static(x.shape[a]) for a in range(first, nd)]
    lanes = vector_lanes(None, x.dtype) * LANE_ACCUMULATORS
    if None in sizes or sizes[-1] % lanes or math.prod(sizes) < 4 * lanes:
        return None
    q = sizes[-1] // lanes  # (chunks of L in a last-axis row: index (k % q) L + l, no division of l)
    k = te.reduce_axis(math.prod(sizes) // lanes, f"{name}_k")
    red = getattr(te, combiner)

    def part(*idx):
        *rows, _, l = idx
        lead = unflatten(k.var // q, sizes[:-1])
        return red(fn(x[tuple(rows) + lead + ((k.var % q) * lanes + l,)]), axis=k)
    P = te.compute(tuple(x.shape[:first]) + (1, lanes), part, f"{name}_part")
    l = te.reduce_axis(lanes, f"{name}_l")

    def body(*i):
        return red(P[tuple(i[:first]) + (0, l.var)], axis=l)
    return te.compute(out_shape, body, name, attrs={"kind": "reduce_lanes", "part": P, "axes": tuple(axes),
                                                    "ndim": nd, "keepdims": keepdims})


def reduce_stage(combiner: str, x: te.Tensor, axes: tuple, keepdims: bool, out_shape: tuple,
                 name: str, fn=None, init=None) -> te.Tensor:
    """``combiner`` of ``fn(x[...])`` (default: the element) over ``axes`` of ``x``."""
    fn = fn or (lambda v: v)
    if not axes:
        return te.compute(out_shape, lambda *i: fn(x[i]), name)
    if init is None:
        lane = _lane_stage(combiner, x, axes, keepdims, out_shape, name, fn)
        if lane is not None:
            return lane
    raxes = {a: te.reduce_axis(x.shape[a], f"{name}_r{a}") for a in axes}

    def body(*i):
        idx, it = [], iter(i)
        for k in range(x.ndim):
            if k in raxes:
                if keepdims:
                    next(it)
                idx.append(raxes[k].var)
            else:
                idx.append(next(it))
        return getattr(te, combiner)(fn(x[tuple(idx)]), axis=tuple(raxes.values()), init=init)

    return te.compute(out_shape, body, name, attrs={"kind": "reduce", "axes": tuple(axes), "ndim": x.ndim,
                                                    "keepdims": keepdims})


def _count(x: te.Tensor, axes: tuple):
    n = 1
    for a in axes:
        n = n * x.shape[a]
    return n


def _reduction(op: str, combiner: str, fn=None, post=None):
    """Register ``op``: ``combiner`` of ``fn(element)``, then ``post(value, x, axes)`` if given."""
    def compute_fn(attrs, inputs, out_type):
        x = inputs[0]
        axes = reduced_axes(attrs["axis"], x.ndim)
        shape = te_shape(out_type)
        name = stage_name(op)
        r = reduce_stage(combiner, x, axes, attrs["keepdims"], shape,
                         name if post is None else f"{name}_acc", fn)
        if post is None:
            return r
        return te.compute(shape, lambda *i: post(r[i], x, axes), name, attrs={"acc": r})

    register_compute(op, compute_fn)


def _mean(v, x, axes):
    n = _count(x, axes)
    if dt.is_float(v.dtype):
        return v / cast(v.dtype, n)
    # an empty slice has sum 0: divide by 1 there rather than trap on an integer 0 / 0
    return truncdiv(v, cast(v.dtype, max_(as_expr(n), 1)))


def _l2(v, x, axes):
    if dt.is_float(v.dtype):
        return intr.sqrt(v)
    return cast(v.dtype, intr.sqrt(cast("float64", v)))


_reduction("sum", "sum")
_reduction("prod", "prod")
_reduction("max", "max")
_reduction("min", "min")
_reduction("mean", "sum", post=_mean)
_reduction("l1_norm", "sum", fn=lambda v: intr.abs(v))
_reduction("sum_square", "sum", fn=lambda v: v * v)
_reduction("l2_norm", "sum", fn=lambda v: v * v, post=_l2)
_reduction("log_sum", "sum", post=lambda v, x, axes: intr.log(v))


def _log_sum_exp(attrs, inputs, out_type):
    # max + log(sum(exp(x - max))): the max is kept (keepdims) to broadcast back over x
    x = inputs[0]
    axes = reduced_axes(attrs["axis"], x.ndim)
    keep = tuple(1 if k in axes else d for k, d in enumerate(x.shape))
    m = reduce_stage("max", x, axes, True, keep, "log_sum_exp_max")

    def shifted(*i):
        mi = tuple(const(0, dt.INDEX) if k in axes else v for k, v in enumerate(i))
        return intr.exp(x[i] - _finite(m[mi]))

    e = te.compute(x.shape, shifted, "log_sum_exp_exp")
    s = reduce_stage("sum", e, axes, True, keep, "log_sum_exp_sum")
    shape = te_shape(out_type)

    def out(*i):
        if attrs["keepdims"]:
            ki = i
        else:
            it = iter(i)
            ki = tuple(const(0, dt.INDEX) if k in axes else next(it) for k in range(x.ndim))
        return intr.log(s[ki]) + _finite(m[ki])

    return te.compute(shape, out, "log_sum_exp")


def _finite(v):
    """``v``, or 0 where it is infinite (an all -inf or empty slice: shift by nothing)."""
    return select(intr.isinf(v), const(0.0, v.dtype), v)


register_compute("log_sum_exp", _log_sum_exp)


def _arg(op: str):
    """argmax/argmin: the extreme value (kept dims), then the first (or last) index holding it."""
    combiner = op[3:]

    def compute_fn(attrs, inputs, out_type):
        x = inputs[0]
        axis = norm_axis(attrs["axis"], x.ndim)
        keep = tuple(1 if k == axis else d for k, d in enumerate(x.shape))
        m = reduce_stage(combiner, x, (axis,), True, keep, f"{op}_value")
        n = x.shape[axis]
        k = te.reduce_axis(n, f"{op}_k")
        last = attrs["select_last_index"]

        def body(*i):
            it = iter(i)
            xi, mi = [], []
            for d in range(x.ndim):
                if d == axis:
                    if attrs["keepdims"]:
                        next(it)
                    xi.append(k.var)
                    mi.append(const(0, dt.INDEX))
                else:
                    v = next(it)
                    xi.append(v)
                    mi.append(v)
            v, best = x[tuple(xi)], m[tuple(mi)]
            hit = eq(v, best)
            if dt.is_float(x.dtype):  # the max/min of a slice holding NaN is NaN: find that NaN
                hit = hit | (intr.isnan(v) & intr.isnan(best))
            idx = cast("int64", k.var)
            miss = const(-1, "int64") if last else cast("int64", n)
            red = te.max if last else te.min
            return red(select(hit, idx, miss), axis=k)

        return te.compute(te_shape(out_type), body, op)

    register_compute(op, compute_fn)


_arg("argmax")
_arg("argmin")
