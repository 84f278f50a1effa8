"""Computes of the blocked channel layout ``N C/b <spatial> b`` (NCHW[b]c): the two layout
changes and the convolution that reads and writes it (``ember.kernels.conv_nchwc``)."""
from __future__ import annotations

from ....kernels.common import const_int
from ....kernels.conv_nchwc import conv2d_nchwc
from ....kernels.conv_window import conv2d_nchwc_window
from ....loop import compute as te
from ....loop.expr import const, select
from ...types import Dim
from .common import register_compute, stage_name, te_shape


def _block_channels(attrs, inputs, out_type):
    from ..dims import index

    (x,) = inputs
    b, C = attrs["block"], x.shape[1]
    b = b if isinstance(b, int) else index(b)  # (a size: the folding program's generic kernel)
    whole = const_int(C) is not None and isinstance(b, int) and const_int(C) % b == 0

    def body(n, cb, *rest):
        c = cb * b + rest[-1]
        if whole:
            return x[(n, c, *rest[:-1])]
        return select(c < C, x[(n, c, *rest[:-1])], const(0, x.dtype))  # the last block's padding

    return te.compute(te_shape(out_type), body, stage_name("block_channels"))


def _unblock_channels(attrs, inputs, out_type):
    (x,) = inputs
    b = x.shape[-1]
    return te.compute(te_shape(out_type), lambda n, c, *sp: x[(n, c // b, *sp, c % b)],
                      stage_name("unblock_channels"))


def _conv2d_nchwc(attrs, inputs, out_type):
    x, w, *scale = inputs
    window = [attrs[k] or d for k, d in (("strides", (1, 1)), ("padding", (0, 0, 0, 0)), ("dilation", (1, 1)))]
    if any(const_int(d) is None for d in w.shape[2:4]) or any(isinstance(v, Dim) for a in window for v in a):
        # (a tier-0 kernel for convolutions of every window)
        return conv2d_nchwc_window(x, w, *([v.expr if isinstance(v, Dim) else v for v in a] for a in window),
                                   te_shape(out_type), name=stage_name("nn.conv2d_nchwc"))
    return conv2d_nchwc(x, w, attrs["strides"] or (1, 1), attrs["padding"] or (0, 0, 0, 0),
                        attrs["dilation"] or (1, 1), name=stage_name("nn.conv2d_nchwc"),
                        grouped=attrs["groups"] != 1, scale=scale[0] if scale else None, dot=attrs.get("dot"),
                        pad_value=attrs.get("pad_value", 0), pairs=attrs.get("pairs", False))


register_compute("block_channels", _block_channels)
register_compute("unblock_channels", _unblock_channels)
register_compute("nn.conv2d_nchwc", _conv2d_nchwc)
