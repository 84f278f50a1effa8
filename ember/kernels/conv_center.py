"""The center-tap variant of a "same" dilated conv over a plane of symbolic size.

DeepLab's ASPP runs 3x3 convs of rate 12-36, padded "same", over the backbone's last plane. A
static compile trims the taps that read only padding (``ember.graph.passes.trim_conv_taps``):
over a 16x16 plane, all but the center of the rate-24 and rate-36 convs. With a dynamic height
and width it cannot: at other sizes those taps read the plane. So the conv's kernel branches
on its plane at run time (``GroupKernel.variants``) to a variant that computes the center tap
alone, from the input unpadded, where the plane is no larger than the rate.
"""
from __future__ import annotations

from ..loop import compute as te
from ..loop.expr import as_expr


def _same_dilated(window, strides, dilation, padding) -> bool:
    """Stride 1, dilated, padded "same" (``d*(k//2)`` each side)."""
    (kh, kw), (dh, dw) = window, dilation
    return (tuple(strides) == (1, 1) and (dh > 1 or dw > 1) and kh % 2 == 1 and kw % 2 == 1
            and tuple(padding) == (dh * (kh // 2), dw * (kw // 2)) * 2)


def centerable(oh, ow, window, strides, dilation, padding) -> bool:
    """Whether a conv has a center-tap variant: "same" and dilated, over a plane of symbolic
    size."""
    return _same_dilated(window, strides, dilation, padding) and not (isinstance(oh, int) and isinstance(ow, int))


def center_only(oh, ow, window, strides, dilation, padding) -> bool:
    """Whether a "same" dilated conv over a static plane reads the plane with its center tap
    alone (the plane no larger than the dilation): then it computes that tap alone. A static
    model's graph has such taps trimmed already (trim_conv_taps); a dynamic model's kernel's
    static twin (``ember.compiler.twin``) is where this is met, and where its symbolic kernel
    would have taken the center-tap variant."""
    return (isinstance(oh, int) and isinstance(ow, int) and _same_dilated(window, strides, dilation, padding)
            and oh <= dilation[0] and ow <= dilation[1])


def center_tap_variant(C: te.Tensor) -> tuple | None:
    """``(condition, decisions)`` of a second kernel for a "same" dilated conv over a symbolic
    plane (:func:`centerable`), for the calls whose plane is no larger than the dilation:
    there each tap but the center reads only padding, and the kernel computes the center tap
    alone (DeepLabV3's ASPP at rates 24 and 36 over a 16x16 plane: 9x fewer FMAs). None for other
    stages."""
    from ..loop.expr import LE, logical_and

    parts = getattr(C.op, "attrs", None) or {}
    if parts.get("kind") != "conv_nchwc" or not parts.get("center"):
        return None
    oh, ow, dh, dw = parts["center"]
    return logical_and(LE(as_expr(oh), as_expr(dh)), LE(as_expr(ow), as_expr(dw))), {"conv.center_tap": True}


__all__ = ["center_only", "center_tap_variant", "centerable"]
