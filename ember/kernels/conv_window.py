"""A blocked convolution whose window is sizes: tier 0's one kernel for convolutions of every
window, stride and padding.

:func:`ember.kernels.conv_nchwc.conv2d_nchwc` is built for one window: its taps unrolled, its
padding a copy, its strides de-interleaved. A tier-0 kernel (``ember.compiler.tier0``) is
shared by every convolution its sizes describe, so here the window ``kh x kw``, the strides,
the dilation and the padding may be run-time sizes: each output element sums ``padded[c, y*s +
ky*d] * w[c, ky, kx]`` over the taps, ``padded`` the input with its zeros, a stage of the
kernel. The plain schedule accumulates a few output vectors of filters
(neighbouring columns) in registers over the channels and taps
(:func:`ember.compiler.tier0._accumulate`); a column past the end of a row computes the last
one's sums again (``columns_past_end``), never read out of bounds, and is not stored.
"""
from __future__ import annotations

from typing import Sequence

from ..loop import compute as te
from ..loop.expr import const, logical_and, max_, min_, select


def conv2d_nchwc_window(data: te.Tensor, packed: te.Tensor, strides: Sequence, padding: Sequence,
                        dilation: Sequence, out_shape: Sequence, name: str = "conv_window") -> te.Tensor:
    """The ``N F/FB OH OW FB`` convolution of ``data`` (``N C H W`` or ``N C/cb H W cb``) by
    weights ``packed`` (``F/FB, C, kh, kw, FB``, groups 1), every window parameter an int or an
    int64 expression of sizes; ``padding`` is (top, left, bottom, right), ``out_shape`` the
    result's (its rule's)."""
    blocked = data.ndim == 5
    _, C, kh, kw, _ = packed.shape
    (sh, sw), (dh, dw) = strides, dilation
    ry = te.reduce_axis(kh, f"{name}_ky")
    rx = te.reduce_axis(kw, f"{name}_kx")
    # (blocked data's channels as blocks and lanes, no division per tap; its channels are the
    # weights', whole blocks)
    rcs = [te.reduce_axis(data.shape[1], f"{name}_cb"), te.reduce_axis(data.shape[4], f"{name}_ci")] if blocked \
        else [te.reduce_axis(C, f"{name}_c")]
    if any(not (isinstance(p, int) and p == 0) for p in padding):
        data = _padded(data, padding, name)

    OW = out_shape[3]

    def body(n, fo, y, x, fb):
        # (a column past the last computes the last again: the plain schedule accumulates a few
        # columns side by side, the last few of a row over the end, their stores guarded)
        x = min_(x, OW - 1)
        iy = y * sh + ry.var * dh
        ix = x * sw + rx.var * dw
        if blocked:
            v, c = data[n, rcs[0].var, iy, ix, rcs[1].var], rcs[0].var * data.shape[4] + rcs[1].var
        else:
            v, c = data[n, rcs[0].var, iy, ix], rcs[0].var
        return te.sum(v * packed[fo, c, ry.var, rx.var, fb], axis=(ry, rx, *rcs))

    return te.compute(tuple(out_shape), body, name, attrs={"columns_past_end": True})


def _padded(data: te.Tensor, padding: Sequence, name: str) -> te.Tensor:
    """``data`` with its rows and columns padded by zeros (``padding`` top, left, bottom, right),
    a stage of its own (``materialize``): the convolution's taps then read it without a test,
    where a test per tap -- a select of the load, or a factor of 0 or 1 -- cost its inner loop
    an instruction per column beside each multiply-add (half the FMA rate of an unpadded one)."""
    pt, pl, pb, pr = padding
    H, W = data.shape[2], data.shape[3]
    shape = (*data.shape[:2], H + pt + pb, W + pl + pr, *data.shape[4:])

    def body(n, c, y, x, *lane):
        iy, ix = y - pt, x - pl
        inside = logical_and(iy >= 0, iy < H, ix >= 0, ix < W)
        # (the read clamped into the plane: in bounds whatever the select decides)
        v = data[(n, c, min_(max_(iy, 0), H - 1), min_(max_(ix, 0), W - 1), *lane)]
        return select(inside, v, const(0, data.dtype))

    return te.compute(shape, body, f"{name}_pad", attrs={"materialize": True})
