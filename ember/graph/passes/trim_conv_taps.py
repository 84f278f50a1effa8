"""Drop the kernel taps of a convolution that read only padding.

A dilated convolution on a small plane can have taps that fall in the padding for every
output position: DeepLabV3's atrous pyramid runs 3x3 kernels with dilations 12, 24 and 36
and as much padding on a 14x14 plane, so at dilation 24 and 36 only the centre tap ever reads
the input -- the convolution is a 1x1 one, computed at 9x its cost over a padded copy of
its input 7x larger. Along each spatial axis the taps that read some input form one
contiguous range (the positions a tap reads move monotonically with it); this pass slices the
weights to that range and moves the padding with it, so the result is the same, exactly.

Where the live taps change along an axis (dilation 12 on that plane: the first and last four
rows read two rows of taps, the middle eight only the centre one), the output is cut into
bands of rows -- then of columns -- that share their live taps, each a convolution of the
input rows it reads with its own taps, concatenated: a quarter of the work there. Bands are
made only where they save at least a third of it.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Call, Module
from ..types import TensorType
from .context import PassContext, graph_pass, rewrite_main

_CONVS = ("nn.conv1d", "nn.conv2d", "nn.conv3d")


def live_taps(size: int, out: int, k: int, s: int, d: int, before: int) -> tuple[int, int]:
    """The taps ``[lo, hi)`` of a window ``k`` (stride ``s``, dilation ``d``, ``before``
    elements of leading padding) whose reads ``o*s + t*d - before`` (``o < out``) span some of
    the ``size`` input elements: every tap that reads the input, and at stride 1 only those."""
    live = [t for t in range(k) if t * d - before < size and (out - 1) * s + t * d - before >= 0]
    return (live[0], live[-1] + 1) if live else (0, k)


def _trimmed(n: Call) -> Optional[Call]:
    from ..ops import infer_type

    x, w = n.args
    if n.attr("weight_block", 0) or not isinstance(n.type, TensorType):
        return None
    nsp = x.type.ndim - 2
    sizes, outs = x.type.shape[2:], n.type.shape[2:]
    if not (isinstance(w.type, TensorType) and w.type.is_static) \
            or not all(isinstance(v, int) for v in (*sizes, *outs)):
        return None
    kernel = w.type.shape[2:]
    strides = n.attr("strides", None) or (1,) * nsp
    dilation = n.attr("dilation", None) or (1,) * nsp
    padding = n.attr("padding", None) or (0,) * (2 * nsp)
    begin, end = list(padding[:nsp]), list(padding[nsp:])
    lows, highs = [], []
    for i in range(nsp):
        lo, hi = live_taps(sizes[i], outs[i], kernel[i], strides[i], dilation[i], begin[i])
        first = begin[i] - lo * dilation[i]
        # the least trailing padding that keeps the output size (up to stride - 1 more work too)
        last = (outs[i] - 1) * strides[i] + dilation[i] * (hi - lo - 1) + 1 - sizes[i] - first
        if first < 0 or last + strides[i] - 1 < 0:
            return None  # it would crop the input: keep the convolution as it is
        lows.append(lo)
        highs.append(hi)
        begin[i], end[i] = first, max(0, last)
    if all(lo == 0 and hi == k for lo, hi, k in zip(lows, highs, kernel)):
        return None
    axes = list(range(2, 2 + nsp))
    sattrs = {"begin": tuple(lows), "end": tuple(highs), "axes": tuple(axes)}
    w2 = Call("strided_slice", [w], sattrs, infer_type("strided_slice", [w.type], sattrs), span=n.span)
    attrs = {**n.attrs, "padding": tuple(begin + end)}
    out = Call(n.op, [x, w2], attrs, infer_type(n.op, [x.type, w2.type], attrs), span=n.span)
    return out if tuple(out.type.shape) == tuple(n.type.shape) else None


def _per_position(size: int, out: int, k: int, s: int, d: int, before: int) -> list:
    """For each output position, the taps ``[lo, hi)`` that read the input there."""
    spans = []
    for o in range(out):
        live = [t for t in range(k) if 0 <= o * s + t * d - before < size]
        spans.append((live[0], live[-1] + 1) if live else (k // 2, k // 2 + 1))
    return spans


def _banded(n: Call, axis: int) -> Optional[Call]:
    """``n`` cut into bands along spatial ``axis`` (2 or 3) whose output positions read the
    same taps, concatenated; None where that saves less than a third of the work."""
    from ..ops import infer_type

    x, w = n.args
    i = axis - 2
    nsp = x.type.ndim - 2
    size, out, k = x.type.shape[axis], n.type.shape[axis], w.type.shape[axis]
    strides = n.attr("strides", None) or (1,) * nsp
    dilation = n.attr("dilation", None) or (1,) * nsp
    padding = list(n.attr("padding", None) or (0,) * (2 * nsp))
    s, d = strides[i], dilation[i]
    spans = _per_position(size, out, k, s, d, padding[i])
    bands = []
    for o, span in enumerate(spans):
        if bands and bands[-1][2] == span:
            bands[-1][1] = o + 1
        else:
            bands.append([o, o + 1, span])
    work = sum((b - a) * (hi - lo) for a, b, (lo, hi) in bands)
    if len(bands) < 2 or 3 * work > 2 * out * k:
        return None
    parts = []
    for a, b, (lo, hi) in bands:
        start = a * s + lo * d - padding[i]
        last = (b - 1) * s + (hi - 1) * d - padding[i]
        first_in, end_in = max(start, 0), min(last, size - 1) + 1
        sattrs = {"begin": (first_in,), "end": (end_in,), "axes": (axis,)}
        xs = Call("strided_slice", [x], sattrs, infer_type("strided_slice", [x.type], sattrs), span=n.span)
        wattrs = {"begin": (lo,), "end": (hi,), "axes": (axis,)}
        ws = Call("strided_slice", [w], wattrs, infer_type("strided_slice", [w.type], wattrs), span=n.span)
        pad = list(padding)
        pad[i], pad[nsp + i] = first_in - start, last - (end_in - 1)
        attrs = {**n.attrs, "padding": tuple(pad)}
        part = Call(n.op, [xs, ws], attrs, infer_type(n.op, [xs.type, ws.type], attrs), span=n.span)
        if part.type.shape[axis] != b - a:
            return None
        if axis == 2 and nsp == 2:
            part = _banded(part, 3) or part
        parts.append(part)
    cat = Call("concat", parts, {"axis": axis}, infer_type("concat", [p.type for p in parts], {"axis": axis}),
               span=n.span)
    return cat if cat.type == n.type else None


def _rewrite(n: Call) -> Optional[Call]:
    trimmed = _trimmed(n) or n
    x = trimmed.args[0]
    if trimmed.attr("weight_block", 0) or x.type.ndim != 4 or not isinstance(trimmed.args[1].type, TensorType) \
            or not all(isinstance(v, int) for v in (*x.type.shape[2:], *trimmed.type.shape[2:])):
        return trimmed if trimmed is not n else None
    banded = _banded(trimmed, 2) or _banded(trimmed, 3)
    return banded or (trimmed if trimmed is not n else None)


@graph_pass("trim_conv_taps", opt_level=2)
def trim_conv_taps(mod: Module, ctx: PassContext) -> Module:
    """Slice away the convolution taps that read only padding, in bands where they change
    (see the module docstring)."""
    return rewrite_main(mod, lambda n: _rewrite(n) if isinstance(n, Call) and n.op in _CONVS else None)


__all__ = ["live_taps", "trim_conv_taps"]
