"""Convolution over 1 to 3 spatial dimensions, layout ``N C <spatial>``, with groups: the direct
method of ``conv2d.py`` for any number of spatial axes.

``out[n, f, o...] = sum_{rc, rk...} pad(data)[n, g(f) * Cg + rc, o*s + rk*d ...] * w[f, rc, rk...]``

with ``g(f) = f // (F / groups)`` the group of output channel ``f`` and ``Cg = C / groups`` the
input channels of a group (depthwise: ``Cg = 1``). The weights are packed as
``Wp[fo, rc, rk..., fi]`` so the ``FB`` weights of a channel block are adjacent; the input is
padded once. The micro-kernel keeps ``FB`` output channels x ``XB`` output columns (the last
spatial axis) in registers while it reduces over the input channels of the group and the
kernel window, then writes the block back once; channel blocks and the outer output rows run
in parallel.

A transposed convolution is the convolution of the input dilated by the strides (zeros
between its elements) and padded by ``d * (k - 1) - pad``, with the kernel flipped and its two
channel axes swapped (:func:`conv_transpose_compute`): one stage more, the same schedule.

The anchor stage records its parts in ``attrs`` (``pad``, ``Wp``, ``fb``, ``xb``), so
:func:`schedule_conv` needs only the output tensor.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

from ..errors import UnsupportedOpError
from ..loop import compute as te
from ..loop import dtype as dt
from ..loop.expr import as_expr, const, eq, logical_and, select
from ..loop.schedule import Schedule
from .common import const_int, fold_size, host, largest_divisor, parallel_outer, plain, vector_lanes, vector_registers


def pad_spatial(data: te.Tensor, begin: Sequence[int], end: Sequence[int], value,
                name: str = "pad", dilate: Optional[Sequence[int]] = None,
                channels: Optional[int] = None, phases: int = 1, inner: int = 0,
                dtype: Optional[str] = None, pairs: bool = False) -> te.Tensor:
    """``data`` (N, C, spatial...) with ``begin[i]``/``end[i]`` elements of ``value`` before and
    after spatial axis ``i`` (negative: cropped) and, with ``dilate``, ``dilate[i] - 1`` of them
    between neighbours; with ``channels``, channels past C filled too. Returns ``data`` itself
    when there is nothing to add.

    With ``phases`` > 1 the last axis is stored de-interleaved: element ``x`` at
    ``[..., x % phases, x // phases]``, so a window sliding with stride ``phases`` reads
    consecutive elements (see :func:`window_last`).

    ``inner`` trailing axes are not spatial: they are copied as they are (the channel block of
    the blocked layout ``N C/b <spatial> b``).

    ``dtype``: the copy's, another than the data's (uint8 data widened to floats as it is
    copied, ``value`` then in the data's terms); a copy is made even with nothing to add.

    ``pairs`` (int32 words of four uint8 values along the last axis, ``w`` of them): each word
    becomes two, the last axis ``2 w`` long, its bytes 0 and 2 zero-extended to an int16 pair
    in word ``i`` and bytes 1 and 3 in word ``w + i`` (what ``pmaddwd``, ``dot_i16x2``, reads:
    done once per word here rather than once per product in a kernel); a copy is made even
    with nothing to add."""
    n = data.ndim - 2 - inner
    widen = dtype is not None and dtype != data.dtype
    dilate = tuple(dilate or (1,) * n)
    C = data.shape[1]
    more = channels is not None and channels > const_int(C)
    if (all(isinstance(v, int) and v == 0 for v in (*begin, *end)) and all(d == 1 for d in dilate) and not more
            and phases == 1 and not widen and not pairs):
        return data
    sizes = [fold_size(s) for s in data.shape[2:2 + n]]
    spans = [(s - 1) * d + 1 for s, d in zip(sizes, dilate)]
    shape = ((data.shape[0], channels if more else C)
             + tuple(fold_size(b + sp + e) for b, sp, e in zip(begin, spans, end))
             + tuple(data.shape[2 + n:]))
    fill = const(value, data.dtype)
    if widen:
        fill = fill.astype(dtype)
    if pairs:
        words = const_int(shape[-1])
        shape = shape[:-1] + (2 * words,)

    def element(nn, c, *p):
        p, rest = p[:n], p[n:]
        conds, idx = ([c < C] if more else []), []
        for q, b, sp, d in zip(p, begin, spans, dilate):
            q = q - b
            conds += [q >= 0, q < sp]
            if d > 1:
                conds.append(eq(q % d, 0))
                q = q // d
            idx.append(q)
        if pairs:  # (word j % words, its odd bytes from j = words on)
            half, rest = rest[-1] // words, rest[:-1] + (rest[-1] % words,)
        v = data[(nn, c, *idx, *rest)]
        v = v.astype(dtype) if widen else v
        v = select(logical_and(*conds), v, fill) if conds else v
        return pair_word(v, half) if pairs else v

    if phases == 1:
        return te.compute(shape, element, name)
    last = shape[-1]
    return te.compute(shape[:-1] + (phases, fold_size((last + (phases - 1)) // phases)),
                      lambda nn, c, *p: element(nn, c, *p[:-2], p[-1] * phases + p[-2]), name)


def pair_word(word, half):
    """Bytes ``half`` and ``half + 2`` of the int32 ``word`` (four uint8 values) as an int16 pair,
    zero-extended: the word of :func:`pad_spatial`'s ``pairs``."""
    return (word >> as_expr(half * 8).astype(word.dtype)) & 0x00FF00FF


def window_last(padded: te.Tensor, o, r, s: int, d: int, phases: int) -> tuple:
    """The index of tap ``r`` of window ``o`` along the last axis of a padded input, stored
    with ``phases`` (see :func:`pad_spatial`): ``(o*s + r*d,)``, or with ``phases == s`` the
    phase and position ``((r*d) % s, o + (r*d) // s)``, consecutive in ``o``."""
    if phases == 1:
        return (o * s + r * d,)
    return ((r * d) % s, o + (r * d) // s)


def pack_weight(weight: Callable, F: int, Cg: int, kernel: Sequence[int], fb: int, dtype: str,
                name: str = "Wp") -> te.Tensor:
    """``Wp[fo, rc, rk..., fi] = weight(fo*fb + fi, rc, rk...)``, zero past ``F`` channels."""
    def body(fo, rc, *rest):
        *rk, fi = rest
        f = fo * fb + fi
        v = weight(f, rc, *rk)
        return v if isinstance(F, int) and F % fb == 0 else select(f < F, v, const(0, dtype))

    # (sizes may be symbolic: the shape-generic packing kernel of constant folding)
    blocks = -(-F // fb) if isinstance(F, int) else (F + (fb - 1)) // fb
    return te.compute((blocks, Cg, *kernel, fb), body, name)


def register_block(F: int, OW, lanes: int, accumulators: int, group: Optional[int] = None) -> tuple[int, int]:
    """(FB, XB): output channels x output columns kept in registers.

    Maximizes the useful FMAs per cycle: each reduction step issues ``FB * XB/lanes`` FMAs and
    ``FB + XB/lanes`` loads (weight broadcasts and input vectors), two of each per cycle on
    the cores we target, and work on padded channels and column tails is wasted (an unknown
    width counts as wide). So 6 x 2 vectors (8 loads per 12 FMAs) beats 12 x 1 (13 loads)
    unless the row is too short for two vectors.

    ``group``: the output channels of one group of a grouped convolution. FB then divides it,
    so a block never spans two groups: its filters share each input vector (a block across a
    group boundary reads two inputs per step, and its padded channels read past the input)."""
    OW = const_int(as_expr(OW)) or 1 << 20
    best, best_score = (1, lanes), 0.0
    for xv in range(1, 5):
        xb = xv * lanes
        if (xv - 1) * lanes >= OW:
            break  # the last vector would hold only padding
        fb = max(1, min(accumulators // xv, F))
        if group:
            fb = largest_divisor(group, fb)
        waste = (-(-OW // xb) * xb / OW) * (-(-F // fb) * fb / F)
        fmas = fb * xv
        # (measured: a broadcast costs more than a vector load, and at equal cost more
        # channels and fewer vectors per row run faster)
        score = fmas / max(fmas, 1.2 * fb + xv) / waste / (1 + 0.05 * (xv - 1))
        if score > best_score + 1e-9:
            best, best_score = (fb, xb), score
    return best


def conv_blocks(F: int, Cg: int, OW, dtype: str = "float32", target=None, groups: int = 1) -> tuple[int, int]:
    """The (FB, XB) register block of a convolution with ``F`` output channels in ``groups``
    groups, ``Cg`` input channels per group and output rows ``OW`` long, for ``target`` (the
    host by default)."""
    lanes = vector_lanes(host(target), dtype)
    if Cg == 1:
        # one input channel per filter (depthwise): no input vector is shared between filters,
        # so block along the row instead, sharing each broadcast weight between its vectors
        width = const_int(as_expr(OW)) or 2 * lanes
        return 1, lanes * min(4, -(-width // lanes))
    return register_block(F, OW, lanes, vector_registers(lanes) - 4, F // groups if groups > 1 else None)


def _channels_read(F: int, fb: int, Fg: int, Cg: int) -> int:
    """The input channels a grouped convolution's padded channel blocks read."""
    return ((-(-F // fb) * fb - 1) // Fg) * Cg + Cg


def conv_window(data: te.Tensor, weight: Callable, F: int, groups: int, kernel: Sequence[int],
                strides: Sequence[int], dilation: Sequence[int], begin: Sequence[int], end: Sequence[int],
                dilate: Optional[Sequence[int]] = None, target=None, name: str = "conv",
                blocks: Optional[tuple] = None, packed: Optional[te.Tensor] = None) -> te.Tensor:
    """The convolution of ``data`` -- padded by ``begin``/``end`` and dilated by ``dilate`` (see
    :func:`pad_spatial`) -- with the kernel ``weight(f, rc, rk...)`` (``F`` output channels,
    ``groups`` groups). The stage's ``attrs`` hold its parts. ``packed``: the weights already
    packed by :func:`pack_weight` with ``blocks[0]`` channels per block (at compile time, when
    they are constants), read directly instead of packed on every call.

    The padded input also covers what the register blocks read past the output's end (the
    last block of columns, and for groups the channels of the last block of filters), so the
    micro-kernel needs no bounds checks: only the final stores are predicated."""
    target = host(target)
    n = data.ndim - 2
    C = const_int(data.shape[1])
    if C is None or C % groups or F % groups:
        raise UnsupportedOpError(f"{name}: {C} input and {F} output channels must be static and divide into "
                         f"{groups} groups")
    Cg, Fg = C // groups, F // groups
    dilate = tuple(dilate or (1,) * n)
    padded_sizes = [fold_size(b + (s - 1) * di + 1 + e) for b, s, di, e in zip(begin, data.shape[2:], dilate, end)]
    out = [conv_out_size(p, k, s, d) for p, k, s, d in zip(padded_sizes, kernel, strides, dilation)]
    fb, xb = conv_blocks(F, Cg, out[-1], data.dtype, target, groups)
    if blocks is not None:  # given (a None keeps the chosen one)
        fb, xb = blocks[0] or fb, blocks[1] or xb
    if plain() and packed is None:  # (a GPU's: weights as they are, the window in place)
        fb, xb = 1, 1
    end = list(end)
    if isinstance(out[-1], int) and isinstance(padded_sizes[-1], int):
        reads = (-(-out[-1] // xb) * xb - 1) * strides[-1] + dilation[-1] * (kernel[-1] - 1) + 1
        end[-1] += max(0, reads - padded_sizes[-1])
    channels = _channels_read(F, fb, Fg, Cg) if groups > 1 else None
    phases = 1 if plain() else strides[-1]  # a strided window reads its de-interleaved input contiguously
    padded = pad_spatial(data, begin, end, 0, f"{name}_pad", dilate, channels, phases)
    # blocks of one filter are the weights' own layout: read them as they are
    Wp = packed if packed is not None or fb == 1 else pack_weight(weight, F, Cg, kernel, fb, data.dtype, f"{name}_Wp")
    rc = te.reduce_axis(Cg, "rc")
    rk = [te.reduce_axis(k, f"rk{i}") for i, k in enumerate(kernel)]

    def body(nn, f, *o):
        c = rc.var if groups == 1 else (f // Fg) * Cg + rc.var
        idx = [oi * s + r.var * d for oi, s, r, d in zip(o[:-1], strides, rk, dilation)]
        idx += window_last(padded, o[-1], rk[-1].var, strides[-1], dilation[-1], phases)
        w = weight(f, rc.var, *[r.var for r in rk]) if Wp is None else \
            Wp[(f // fb, rc.var, *[r.var for r in rk], f % fb)]
        return te.sum(padded[(nn, c, *idx)] * w, axis=(rc, *rk))

    parts = {"kind": "conv", "pad": padded if padded is not data else None,
             "Wp": Wp if packed is None else None, "fb": fb, "xb": xb}
    return te.compute((data.shape[0], F, *out), body, name, attrs=parts)


def conv_out_size(padded_size, k: int, s: int, d: int):
    """The output length of a window ``k`` (stride ``s``, dilation ``d``) over ``padded_size``."""
    return fold_size((fold_size(padded_size) - d * (k - 1) - 1) // s + 1)


def conv_compute(data: te.Tensor, weight: te.Tensor, strides=None, padding=None, dilation=None,
                 groups: int = 1, target=None, name: str = "conv", blocks: Optional[tuple] = None) -> te.Tensor:
    """Grouped convolution of ``data`` (N, C, spatial...) with ``weight`` (F, C/groups, k...);
    ``padding`` lists every axis's leading pad, then every trailing pad."""
    n = data.ndim - 2
    strides, dilation = tuple(strides or (1,) * n), tuple(dilation or (1,) * n)
    padding = tuple(padding or (0,) * (2 * n))
    F, _, *kernel = [const_int(s) for s in weight.shape]
    return conv_window(data, lambda f, c, *k: weight[(f, c, *k)], F, groups, kernel, strides, dilation,
                       padding[:n], padding[n:], None, target, name, blocks)


def conv_transpose_compute(data: te.Tensor, weight: te.Tensor, strides=None, padding=None, dilation=None,
                           output_padding=None, groups: int = 1, target=None,
                           name: str = "conv_transpose") -> te.Tensor:
    """Transposed convolution of ``data`` (N, C, spatial...) with ``weight`` (C, F/groups, k...):
    ``out[n, f, i*s - pad + k*d] += data[n, c, i] * w[c, f, k]``, as a stride-1 convolution of
    the dilated, padded input with the flipped kernel (see the module docstring)."""
    n = data.ndim - 2
    strides, dilation = tuple(strides or (1,) * n), tuple(dilation or (1,) * n)
    padding = tuple(padding or (0,) * (2 * n))
    outpad = tuple(output_padding or (0,) * n)
    Cin, Fg, *kernel = [const_int(s) for s in weight.shape]
    F, Cg = Fg * groups, Cin // groups
    begin = [d * (k - 1) - p for d, k, p in zip(dilation, kernel, padding[:n])]
    end = [op + d * (k - 1) - p for op, d, k, p in zip(outpad, dilation, kernel, padding[n:])]

    def flipped(f, c, *k):
        cin = c if groups == 1 else (f // Fg) * Cg + c
        return weight[(cin, f % Fg if groups > 1 else f, *[kk - 1 - r for kk, r in zip(kernel, k)])]

    return conv_window(data, flipped, F, groups, kernel, (1,) * n, dilation, begin, end, strides, target, name)


def schedule_conv(s: Schedule, conv: te.Tensor, out: Optional[te.Tensor] = None, target=None) -> Schedule:
    """The register-blocked schedule of a :func:`conv_from_padded` stage ``conv``, written back
    through ``out`` (``conv`` itself, or an inlined elementwise epilogue of its shape, which then
    runs on the register block as it is stored)."""
    target = host(target)
    out = conv if out is None else out
    parts = conv.op.attrs
    fb, xb = parts["fb"], parts["xb"]
    lanes = vector_lanes(target, conv.dtype)
    acc = s.cache_write(conv, "local") if out is conv else conv
    so = s[out]
    n, f, *sp = so.leaf
    fo, fi = so.split(f, factor=fb)
    xo, xi = so.split(sp[-1], factor=xb)
    rows = _static_product([conv.shape[0], *conv.shape[2:-1]])
    chunk = _weight_chunk(conv, fb, target)
    depthwise = fb == 1 and const_int(as_expr(conv.op.reduce_axis[0].extent)) == 1
    if depthwise:
        # one input plane per filter and a few weights: each core takes whole channels, and
        # a channel's padded plane is made just before its rows run (in L1) -- rows outer
        # would sweep every channel's plane through the cache once per output row
        so.reorder(n, fo, *sp[:-1], xo, fi, xi)
        channel = parallel_outer(so, [n, fo])
        tile = xo
    elif rows is not None and (rows % target.cores == 0 or rows >= 8 * target.cores):
        # enough rows to share out evenly: each core takes whole rows and, for every block of
        # columns, runs the channel blocks of one chunk -- as many as keep their packed
        # weights in half the L2 -- so the input it reads stays in cache while the weights
        # stream from L2; the chunks are the outermost loop
        outer = [n, *sp[:-1]]
        if chunk:
            fco, fo = so.split(fo, factor=chunk)
            outer.insert(0, fco)
        so.reorder(*outer, xo, fo, fi, xi)
        parallel_outer(so, outer)
        tile = fo
    else:
        # few rows (late, small layers): the channel blocks are the parallel work
        so.reorder(n, fo, *sp[:-1], xo, fi, xi)
        parallel_outer(so, [n, fo, *sp[:-1]])
        tile = xo
    so.unroll(fi)
    _, xv = so.split(xi, factor=lanes)
    so.vectorize(xv)
    # the micro-kernel: the reduction outermost, the FB x XB block unrolled into registers
    st = s[acc]
    st.compute_at(so, tile)
    nsp = conv.ndim - 2
    cn, cf, csp, red = st.leaf[0], st.leaf[1], st.leaf[2:2 + nsp], st.leaf[2 + nsp:]
    st.reorder(*red, cn, *csp[:-1], cf, csp[-1])
    st.unroll(cf)
    cxo, cxi = st.split(csp[-1], factor=lanes)
    st.unroll(cxo)
    st.vectorize(cxi)
    _schedule_prologue(s, parts, lanes, (so, channel) if depthwise else None)
    return s


def _static_product(dims) -> Optional[int]:
    """The product of ``dims`` when all are constants, else None."""
    values = [const_int(as_expr(d)) for d in dims]
    return None if None in values else math.prod(values)


def _weight_chunk(conv: te.Tensor, fb: int, target) -> int:
    """Channel blocks whose packed weights fit in half the L2, or 0 to run them all: when all
    of them fit, or when they fit in L3 (up to 4x the L2: measured, a ragged or tiny chunk
    then costs more than the weights streaming from L3)."""
    window = _static_product([d.extent for d in conv.op.reduce_axis])
    if window is None:
        return 0
    per_block = fb * window * dt.nbytes(conv.dtype)
    blocks = -(-const_int(as_expr(conv.shape[1])) // fb)
    chunk = max(1, target.l2_bytes // 2 // per_block)
    if chunk >= blocks or blocks * per_block <= 4 * target.l2_bytes:
        return 0
    return largest_divisor(blocks, chunk)  # a ragged last chunk would guard every FMA


def _schedule_prologue(s: Schedule, parts: dict, lanes: int, at: Optional[tuple] = None) -> None:
    """The packed weights and the padded input: computed once per call, in parallel, or the
    input where it is read when ``at`` is given (a stage and its loop)."""
    if parts["Wp"] is not None:
        sw = s[parts["Wp"]]
        sw.parallel(sw.leaf[0])
    pad = parts["pad"]
    if pad is not None:
        sp = s[pad]
        if at is not None:
            sp.compute_at(*at)
        else:
            sp.parallel(sp.fuse(*sp.leaf[:-1]))
        vectorize_copy(sp, pad, lanes)


def vectorize_copy(st, padded: te.Tensor, lanes: int) -> None:
    """Vectorize a padded copy along its last axis -- unless it de-interleaves phases: its
    reads would be strided gathers, slower than scalar code."""
    if padded.ndim == padded.op.input_tensors()[0].ndim:
        _, xi = st.split(st.leaf[-1], factor=lanes)
        st.vectorize(xi)


def conv_nd(data_shape, weight_shape, strides=None, padding=None, dilation=None, groups: int = 1,
            dtype: str = "float32", target=None):
    """Convolution with the default schedule; returns (schedule, [data, weight, out])."""
    data = te.placeholder(tuple(data_shape), dtype, "data")
    weight = te.placeholder(tuple(weight_shape), dtype, "weight")
    out = conv_compute(data, weight, strides, padding, dilation, groups, target)
    s = Schedule(out)
    schedule_conv(s, out, out, target)
    return s, [data, weight, out]


__all__ = ["conv_blocks", "conv_compute", "conv_nd", "conv_window", "conv_out_size", "conv_transpose_compute",
           "pack_weight", "pad_spatial", "register_block", "schedule_conv", "vectorize_copy", "window_last"]
