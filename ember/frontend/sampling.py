"""Grid sampling (ONNX's GridSample, torch's grid_sample): a tensor sampled at the points of a
grid, as gathers and elementwise ops, for both frontends.

Each output point's coordinates (normalized to [-1, 1], last spatial axis first) are mapped
into the input; for each spatial axis the interpolation taps (1 for nearest, 2 for linear,
4 for cubic) get an index and a weight; every combination of taps is one gather from the
flattened spatial axes, weighted and summed. Out-of-range coordinates and taps follow the
padding mode (zeros, border, reflection) exactly as the ONNX reference does: a coordinate
outside the borders is clamped or reflected first, then each tap's index is.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..errors import ShapeError, UnsupportedOpError
from ..graph import Constant

__all__ = ["grid_sample"]

CUBIC_A = -0.75


def _c(v, dtype="float32"):
    return Constant(np.array(v, dtype=dtype))


class _Ops:
    """Shorthands for the elementwise calls."""

    def __init__(self, call):
        self.call = call

    def __getattr__(self, op):
        return lambda *a, **k: self.call(op, *a, **k)

    def trunc(self, x):
        """Toward zero (the reference's int())."""
        return self.where(self.less(x, _c(0.0)), self.ceil(x), self.floor(x))


def _reflect(o, x, lo: float, hi: float):
    """The reference's reflection of ``x`` into [lo, hi] (by the nearer border, repeatedly)."""
    rng = _c(hi - lo)
    below, above = o.less(x, _c(lo)), o.greater(x, _c(hi))
    dx = o.where(below, o.subtract(_c(lo), x), o.subtract(x, _c(hi)))
    n = o.trunc(o.divide(dx, rng))
    r = o.subtract(dx, o.multiply(n, rng))
    even = o.equal(o.subtract(n, o.multiply(o.floor(o.divide(n, _c(2))), _c(2))), _c(0))
    low_side = o.where(even, o.add(_c(lo), r), o.subtract(_c(hi), r))
    high_side = o.where(even, o.subtract(_c(hi), r), o.add(_c(lo), r))
    return o.where(below, low_side, o.where(above, high_side, x))


def _cubic_weights(o, t):
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for the fraction ``t``."""
    a = CUBIC_A

    def far(d):  # |d| in [1, 2]
        return o.subtract(o.multiply(o.add(o.multiply(o.subtract(o.multiply(d, _c(a)), _c(5 * a)), d), _c(8 * a)), d),
                          _c(4 * a))

    def near(d):  # |d| in [0, 1]
        return o.add(o.multiply(o.multiply(o.subtract(o.multiply(d, _c(a + 2)), _c(a + 3)), d), d), _c(1.0))
    one_minus = o.subtract(_c(1.0), t)
    return [far(o.add(t, _c(1.0))), near(t), near(one_minus), far(o.add(one_minus, _c(1.0)))]


def grid_sample(call, x, grid, mode: str, padding: str = "zeros", align: bool = False):
    """``x`` (N, C, *spatial) sampled at ``grid`` (N, *out, nd): ``mode`` "nearest", "linear" or
    "cubic", ``padding`` "zeros", "border" or "reflection"; ``call`` makes a typed call."""
    o = _Ops(call)
    nd = x.type.ndim - 2
    n, ch = x.type.shape[:2]
    sizes = x.type.shape[2:]
    out_sp = grid.type.shape[1:-1]
    if not all(isinstance(s, int) for s in sizes + out_sp) or grid.type.shape[-1] != nd:
        raise ShapeError(f"GridSample needs static spatial sizes and a grid of {nd} coordinates, got "
                         f"{x.type} and {grid.type}")
    if mode not in ("nearest", "linear", "cubic") or padding not in ("zeros", "border", "reflection"):
        raise UnsupportedOpError(f"GridSample mode {mode!r} with padding {padding!r} is not supported")
    points = int(np.prod(out_sp))
    g = o.reshape(o.cast(grid, dtype="float32"), newshape=(n, points, nd))
    dtype = x.type.dtype
    taps_per_axis = []
    for i, size in enumerate(sizes):  # the grid lists the last axis's coordinate first
        v = o.reshape(o.strided_slice(g, begin=(nd - 1 - i,), end=(nd - i,), axes=(2,)), newshape=(n, 1, points))
        if align:
            pos = o.multiply(o.divide(o.add(v, _c(1.0)), _c(2.0)), _c(float(size - 1)))
            lo, hi = 0.0, float(size - 1)
        else:
            pos = o.divide(o.subtract(o.multiply(o.add(v, _c(1.0)), _c(float(size))), _c(1.0)), _c(2.0))
            lo, hi = -0.5, size - 0.5
        if mode == "nearest":
            pos = o.round(pos)
        outside = o.logical_or(o.less(pos, _c(lo)), o.greater(pos, _c(hi)))
        if padding == "border":
            pos = o.where(outside, o.minimum(o.maximum(pos, _c(0.0)), _c(float(size - 1))), pos)
        elif padding == "reflection":
            pos = _reflect(o, pos, lo, hi)
        if mode == "nearest":
            taps = [(o.trunc(pos), None)]
        else:
            base = o.floor(pos)
            t = o.subtract(pos, base)
            if mode == "linear":
                taps = [(base, o.subtract(_c(1.0), t)), (o.add(base, _c(1.0)), t)]
            else:
                taps = [(o.add(base, _c(float(k))), w) for k, w in zip(range(-1, 3), _cubic_weights(o, t))]
        axis_taps = []
        for at, w in taps:  # each tap's index, and whether it reads inside (zeros padding)
            valid = None
            if padding == "zeros":
                valid = o.logical_and(o.greater_equal(at, _c(0.0)), o.less(at, _c(float(size))))
            elif padding == "reflection":
                at = _reflect(o, at, lo, hi)
            idx = o.cast(o.trunc(o.minimum(o.maximum(at, _c(0.0)), _c(float(size - 1)))), dtype="int64")
            axis_taps.append((idx, w, valid))
        taps_per_axis.append(axis_taps)
    flat = o.reshape(x, newshape=(n, ch, int(np.prod(sizes))))
    strides = [int(np.prod(sizes[i + 1:])) for i in range(nd)]
    total = None
    for combo in itertools.product(*taps_per_axis):
        index, weight, valid = None, None, None
        for (idx, w, ok), stride in zip(combo, strides):
            term = idx if stride == 1 else o.multiply(idx, _c(stride, "int64"))
            index = term if index is None else o.add(index, term)
            if w is not None:
                weight = w if weight is None else o.multiply(weight, w)
            if ok is not None:
                valid = ok if valid is None else o.logical_and(valid, ok)
        value = o.gather_elements(flat, o.expand(index, shape=(n, ch, points)), axis=2)
        if valid is not None:
            value = o.where(valid, value, _c(0, dtype))
        if weight is not None:
            value = o.multiply(value, o.cast(weight, dtype=dtype) if dtype != "float32" else weight)
        total = value if total is None else o.add(total, value)
    return o.reshape(total, newshape=(n, ch) + tuple(out_sp))
