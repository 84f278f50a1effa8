"""Converters of ONNX's signal ops: DFT as matmuls by cosine and sine tables (a transform of
static length is a dense product, which the packed matmul kernels run well at the sizes models
use; over a symbolic length the tables are computed while the model runs), and the Hann,
Hamming and Blackman windows.
"""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...graph import Constant, Dim
from .dtypes import to_ember
from .table import converter


def _to_last(node, x, axis: int):
    """``x`` with ``axis`` moved last, and the permutation that moves it back."""
    nd = x.type.ndim
    perm = [k for k in range(nd) if k != axis] + [axis]
    back = [perm.index(k) for k in range(nd)]
    return node.call("transpose", x, axes=tuple(perm)), tuple(back)


def _dft(node, axis: int):
    x = node.input(0)
    nd = x.type.ndim
    axis %= nd
    if axis == nd - 1:
        raise ShapeError(f"the DFT axis must not be the last (complex) axis of {x.type}")
    n_in, parts = x.type.shape[axis], x.type.shape[-1]
    if parts not in (1, 2):
        raise ShapeError(f"the DFT needs a last axis of 1 or 2 (real, imaginary), got {x.type}")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if not isinstance(n_in, int):
        if node.has(1) or (inverse and onesided):
            raise ShapeError(f"a DFT over the symbolic length {n_in} takes no dft_length and is no one-sided "
                             f"inverse, got {x.type}")
        return _symbolic_dft(node, x, axis, inverse, onesided)
    if node.has(1):
        length = node.int_scalar(1, "dft_length")
    else:
        length = 2 * (n_in - 1) if inverse and onesided else n_in
    if length < 1:
        raise ShapeError(f"the DFT length must be at least 1, got {length}")
    dtype = x.type.dtype

    def part(k):
        p = node.call("strided_slice", x, begin=(k,), end=(k + 1,), axes=(nd - 1,))
        return node.call("reshape", p, newshape=tuple(x.type.shape[:-1]))
    re = part(0)
    im = part(1) if parts == 2 else None
    used = min(n_in, length)  # the input is cut to the length, or padded with zeros (no terms)
    if used < n_in:
        re = node.call("strided_slice", re, begin=(0,), end=(used,), axes=(axis,))
        im = node.call("strided_slice", im, begin=(0,), end=(used,), axes=(axis,)) if im is not None else None
    if inverse and onesided:  # a real signal of ``length`` from its one-sided spectrum
        bins = min(used, length // 2 + 1)
        out = length
    else:
        bins = used
        out = length // 2 + 1 if onesided else length
    j = np.arange(bins if inverse else used)[:, None]
    k = np.arange(out)[None, :]
    ang = 2 * np.pi * ((j * k) % length) / length
    cos, sin = np.cos(ang), np.sin(ang)
    if inverse and onesided:  # the conjugate half counts twice (not the 0th or the Nyquist bin)
        w = np.full((bins, 1), 2.0)
        w[0] = 1.0
        if length % 2 == 0 and bins > length // 2:
            w[length // 2] = 1.0
        cos, sin = cos * w, sin * w
    if inverse and onesided and bins < used:
        re = node.call("strided_slice", re, begin=(0,), end=(bins,), axes=(axis,))
        im = node.call("strided_slice", im, begin=(0,), end=(bins,), axes=(axis,)) if im is not None else None

    def mm(v, table):  # in float64: the sums of a transform cancel, and users compare to numpy's FFT
        t, back = _to_last(node, v, axis)
        t = t if dtype == "float64" else node.call("cast", t, dtype="float64")
        return t, back, node.call("nn.matmul", t, Constant(table.astype(np.float64)))
    sign = 1.0 if inverse else -1.0  # e^{-i} forward, e^{+i} inverse
    _, back, y_re = mm(re, cos)
    _, _, y_im = mm(re, sign * sin)
    if im is not None:
        _, _, a = mm(im, -sign * sin)
        _, _, b = mm(im, cos)
        y_re, y_im = node.call("add", y_re, a), node.call("add", y_im, b)
    def done(v):
        if inverse:  # (scaled after the sums, as numpy's inverse FFT does)
            v = node.call("divide", v, Constant(np.float64(length)))
        v = node.call("transpose", v, axes=back)
        return v if dtype == "float64" else node.call("cast", v, dtype=dtype)
    y_re = done(y_re)
    if inverse and onesided:  # a real output
        return node.call("unsqueeze", y_re, axes=(nd - 1,))
    y_im = done(y_im)
    return node.call("concat", node.call("unsqueeze", y_re, axes=(nd - 1,)),
                     node.call("unsqueeze", y_im, axes=(nd - 1,)), axis=nd - 1)


def _symbolic_dft(node, x, axis: int, inverse: bool, onesided: bool):
    """A DFT over a symbolic length n (FNet's mixing over the sequence): the same products, by
    cosine and sine tables computed while the model runs -- angle 2 pi (j k mod n) / n, in
    float64 -- instead of constants."""
    from ...graph.ops import dims as D

    nd, dtype = x.type.ndim, x.type.dtype
    n = x.type.shape[axis]
    out = D.dim_add(D.dim_floordiv(n, 2), 1) if onesided else n
    count = node.call("size", node.call("constant_of_shape", shape=(n,), value=False, dtype="bool"))
    j = node.call("unsqueeze", node.call("range", start=0, stop=n, dtype="int64"), axes=(1,))
    k = node.call("unsqueeze", node.call("range", start=0, stop=out, dtype="int64"), axes=(0,))
    turns = node.call("cast", node.call("mod", node.call("multiply", j, k), count), dtype="float64")
    ang = node.call("multiply", turns, node.call("divide", Constant(np.float64(2 * np.pi)),
                                                  node.call("cast", count, dtype="float64")))
    cos, sin = node.call("cos", ang), node.call("sin", ang)
    if not inverse:
        sin = node.call("negative", sin)  # e^{-i} forward, e^{+i} inverse

    def part(k):
        p = node.call("strided_slice", x, begin=(k,), end=(k + 1,), axes=(nd - 1,))
        t, back = _to_last(node, node.call("reshape", p, newshape=tuple(x.type.shape[:-1])), axis)
        return (t if dtype == "float64" else node.call("cast", t, dtype="float64")), back
    re, back = part(0)
    y_re, y_im = node.call("nn.matmul", re, cos), node.call("nn.matmul", re, sin)
    if x.type.shape[-1] == 2:
        im, _ = part(1)
        y_re = node.call("subtract", y_re, node.call("nn.matmul", im, sin))
        y_im = node.call("add", y_im, node.call("nn.matmul", im, cos))

    def done(v):
        if inverse:
            v = node.call("divide", v, node.call("cast", count, dtype="float64"))
        v = node.call("transpose", v, axes=back)
        return node.call("unsqueeze", v if dtype == "float64" else node.call("cast", v, dtype=dtype), axes=(nd - 1,))
    return node.call("concat", done(y_re), done(y_im), axis=nd - 1)


@converter("DFT", since=17)
def _dft_17(node):
    return [_dft(node, node.attr("axis", 1))]


@converter("DFT", since=20)
def _dft_20(node):
    return [_dft(node, node.int_scalar(2, "axis") if node.has(2) else -2)]


def _window(cosines):
    """A generalized cosine window ``sum_m a_m cos(2 pi m n / N)``; N is the size (periodic) or
    the size - 1 (symmetric). The size may come from a model input (a data size)."""
    def convert(node):
        size = node.scalar(0, "size")
        dtype = to_ember(node.attr("output_datatype", 1), "the window's dtype")
        n = node.call("range", start=0, stop=size, step=1, dtype="float64")
        periodic = bool(node.attr("periodic", 1))
        if isinstance(size, Dim):
            span = node.call("cast", node.call("reshape", node.input(0), newshape=()), dtype="float64")
            if not periodic:
                span = node.call("subtract", span, Constant(np.float64(1)))
        else:
            span = Constant(np.float64(int(size) - (0 if periodic else 1)))
        phase = node.call("divide", node.call("multiply", n, Constant(np.float64(2 * np.pi))), span)
        w = None
        for m, a in enumerate(cosines):
            term = Constant(np.float64(a)) if m == 0 else node.call(
                "multiply", node.call("cos", node.call("multiply", phase, Constant(np.float64(m)))),
                Constant(np.float64(a)))
            w = term if w is None else node.call("add", w, term)
        w = node.call("add", w, node.call("multiply", n, Constant(np.float64(0))))  # (the window's shape)
        return [w if dtype == "float64" else node.call("cast", w, dtype=dtype)]
    return convert


converter("HannWindow", since=17)(_window((0.5, -0.5)))
converter("HammingWindow", since=17)(_window((25 / 46, -21 / 46)))
converter("BlackmanWindow", since=17)(_window((0.42, -0.5, 0.08)))
