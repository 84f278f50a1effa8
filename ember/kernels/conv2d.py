"""2-D convolution, NCHW, direct: the convolution of ``conv.py`` with two spatial axes.

``out[n, f, y, x] = sum_{c, ry, rx} pad(data)[n, c, y*s + ry*d, x*s + rx*d] * w[f, c, ry, rx]``

A register block of output channels x output columns accumulates over input channels and the
kernel window (see ``conv.py``).
"""
from __future__ import annotations

from .conv import conv_nd


def conv2d_nchw(data_shape, weight_shape, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
                dtype: str = "float32", target=None, groups: int = 1):
    """NCHW conv2d with the default schedule; ``padding`` is (top, left, bottom, right).
    Returns (schedule, [data, weight, out])."""
    return conv_nd(data_shape, weight_shape, stride, padding, dilation, groups, dtype, target)
