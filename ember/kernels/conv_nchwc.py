"""2-D convolution in the blocked channel layout ``N C/b H W b`` (NCHW[b]c): the micro-kernel
is vectorized over output channels.

``out[n, fo, y, x, fi] = sum_{c, ky, kx} pad(data)[n, c, y*s + ky*d, x*s + kx*d] * Wp[fo, c, ky, kx, fi]``

with ``Wp`` the weights packed by :func:`~ember.kernels.conv.pack_weight` in blocks of ``FB``
output channels -- the output's block -- and ``data`` either plain ``N C H W`` or itself
blocked ``N C/cb H W cb`` (then ``c = co*cb + ci`` is two reduction axes).

Why a second convolution: the plain-layout kernel (``conv.py``) vectorizes along the output
row, so a row that is not a multiple of the vector width wastes lanes (ResNet's 56, 28, 14
and 7 wide rows waste an eighth) and a layer with few rows has little to share between
cores. Here a vector holds ``lanes`` output channels, which real networks have in multiples of
8; one reduction step loads ``FB / lanes`` weight vectors and broadcasts ``XB`` input
elements into ``FB/lanes x XB`` accumulators, and the block of columns ``XB`` is chosen for the
row's width, not the vector's. The result stays blocked, so the next convolution, the
bias/activation epilogue and a residual add all read contiguous vectors; the graph pass
``block_layout`` places the layout changes at the region's edges.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ..errors import ShapeError
from ..loop import compute as te
from ..loop import dtype as dt
from ..loop import intrinsics
from ..loop.expr import logical_and, min_
from ..loop.schedule import Schedule
from ..loop.knobs import knob
from .common import (const_int, fold_size, host, largest_divisor, likely_int, parallel_outer, vector_lanes,
                     vector_registers)
from .conv import conv_out_size, pad_spatial, pair_word, vectorize_copy
from .conv_center import center_only, centerable as _centerable
from .conv_nchwc_blocks import (FLAT_COLUMNS, PAIRED_COLUMNS, _flat_pads_less, _paired_blocks, _wide_output,
                                _wide_window, channel_block, width_block)


SMALL_PLANE = 64  # output positions per channel up to which a task is a channel block's plane


def conv2d_nchwc(data: te.Tensor, packed: te.Tensor, strides: Sequence[int] = (1, 1),
                 padding: Sequence[int] = (0, 0, 0, 0), dilation: Sequence[int] = (1, 1),
                 target=None, name: str = "conv_nchwc", grouped: bool = False,
                 scale: Optional[te.Tensor] = None, dot: Optional[str] = None, pad_value: int = 0,
                 pairs: bool = False) -> te.Tensor:
    """The convolution of ``data`` (``N C H W`` or ``N C/cb H W cb``) with weights ``packed``
    (``F/FB, C, kh, kw, FB``): the ``N F/FB OH OW FB`` result. ``padding`` is
    (top, left, bottom, right). The stage's ``attrs`` hold its parts for
    :func:`schedule_conv_nchwc`.

    ``grouped``: each output block reads only the same block of the input (blocked like the
    result) -- a depthwise conv, ``packed`` ``(C/FB, 1, kh, kw, FB)``: a vector holds one tap
    of ``lanes`` channels and the reduction is the window alone; or groups narrower than a
    block, ``packed`` ``(C/FB, g, kh, kw, FB)``: filter lane ``f`` reads input lanes
    ``(f // g) g + c`` of its block -- a broadcast where ``g`` is a multiple of the vector
    lanes (a vector's filters share one group), a shuffle of the pixel's vector where groups
    are narrower (the schedule unrolls ``c``); ``g = FB`` is a whole block. Grouped, the data
    may be uint8 (a quantized model's, padded with ``pad_value``, its zero point) against float
    weights: it is widened to floats as it is padded (a task's rows, once per input vector),
    and the sums of integer products by integer-valued weights are exact while below 2^24.

    ``scale`` (blocked data only): a factor per input channel, ``N|1 C/cb 1 1 cb`` (a
    squeeze-excitation's), by which the data is multiplied before the convolution. It scales
    the weights instead, ``x (s w)``: a product per weight vector and block of columns (the
    columns are unrolled: one product serves them all), not per input element.

    Two shapes of a blocked 1x1 conv (tuner knobs, defaults where measured faster): a strided
    one may read a subsampled copy of its input (``conv.subsample``, a stage the schedule
    places like the padded input); a stride-1 one over a small plane may compute it as one row
    of positions (``conv.flat``): the stage is then ``N F/FB 1 P FB``, ``P`` the positions
    rounded up to a block, and the result a view of it in rows and columns
    (``attrs["kind"] == "conv_nchwc_flat"``).

    ``dot`` (a packed dot of ``ember.loop.intrinsics.PACKED_DOTS``, blocked data, groups 1):
    the data and the weights are int32 words of ``g`` channels each (``N C/cb H W cb/g`` and
    ``(F/FB, C/g, kh, kw, FB)``) and each step of the reduction is one packed dot per lane
    (``vdpbf16ps``: two bfloat16 channels into a float32 sum). ``pad_value``: what the padding
    holds (an int32 word: a quantized conv pads its uint8 data with its zero point, a real 0);
    then every tap is computed, those over the padding too (none is dropped as adding
    nothing).

    ``pairs`` (``dot_i16x2``, ``pmaddwd``: int8 products on a CPU without VNNI): the data's
    words hold four uint8 channels and are copied as two words of int16 pairs each (see
    :func:`~ember.kernels.conv.pad_spatial`), ``N C/cb H W cb/2`` in the task's copy: the
    weights' words hold channels ``(4i, 4i+2)`` at ``i`` and ``(4i+1, 4i+3)`` at ``cb/4 + i``
    of each block. The copy widens each word once, where widening it in the kernel costs every
    product two more instructions (ResNet-50's 3x3 convs ran at 35-45% of the pmaddwd peak)."""
    target = host(target)
    blocked = data.ndim == 5
    if dot is not None and (grouped or not blocked or scale is not None):
        raise ShapeError(f"{name}: a packed dot needs blocked data, groups = 1 and no scale")
    if pairs and dot != "dot_i16x2":
        raise ShapeError(f"{name}: data read as int16 pairs needs dot='dot_i16x2', got dot={dot!r}")
    if pairs and const_int(data.shape[-1]) is None:  # (a tier-0 kernel then keeps the block)
        raise ShapeError(f"{name}: data read as int16 pairs needs a static block, got data {tuple(data.shape)}")
    if data.dtype != packed.dtype and not (grouped and dot is None and data.dtype == "uint8"):
        raise ShapeError(f"{name}: {data.dtype} data and {packed.dtype} weights (only a grouped conv reads "
                         f"uint8 data as floats)")
    if scale is not None and (grouped or not blocked):
        raise ShapeError(f"{name}: a per-channel scale needs blocked data and groups = 1, got data "
                         f"{tuple(data.shape)}{' (grouped)' if grouped else ''}")
    FO, C, kh, kw, FB = [const_int(d) for d in packed.shape]
    # (a tier-0 kernel's filter blocks and channels may be sizes passed per call: then FO and
    # C are None, their extents the packed weights' own, and no choice below depends on them)
    FO = packed.shape[0] if FO is None else FO
    C_ext = packed.shape[1] if C is None else C
    if None in (kh, kw, FB) or (C is None and grouped):
        raise ShapeError(f"{name}: the window, the filter block and a grouped conv's channels must "
                         f"be static, got packed weights {tuple(packed.shape)}")
    sh, sw = strides
    dh, dw = dilation
    pointwise = (kh, kw) == (1, 1) and not grouped
    sub = None
    if pointwise and (sh, sw) != (1, 1) and not any(padding) and blocked \
            and knob("conv.subsample", (False, True), C is not None and C >= 256):
        # a strided 1x1 conv over a copy of the input's every sh-th row and sw-th column: a
        # copy of a quarter of the input, which the micro-kernel then reads contiguously.
        # Measured per kernel, stride 2, AVX2: from 256, 512 and 1024 channels (ResNet-50's
        # projections) 1.12-1.25x, 1.21x, 1.6x; from 32-208 channels 0.92-1.04x
        data = sub = subsample(data, (sh, sw), f"{name}_sub", pairs)
        sh = sw = 1
    H, W = fold_size(data.shape[2]), fold_size(data.shape[3])
    oh = conv_out_size(H + padding[0] + padding[2], kh, sh, dh)
    ow = conv_out_size(W + padding[1] + padding[3], kw, sw, dw)
    # a "same" dilated conv over a symbolic plane (DeepLab's ASPP with a dynamic height and
    # width) has a variant for planes no larger than the dilation, where every tap but the
    # center reads padding (a static plane has those taps trimmed: trim_conv_taps): the center
    # tap alone, which reads the input unpadded (the padding of a rate-36 conv over a 16x16
    # plane is 30x the plane)
    centerable = pad_value == 0 and _centerable(oh, ow, (kh, kw), (sh, sw), (dh, dw), padding)
    center = pad_value == 0 and ((centerable and knob("conv.center_tap", (False, True), False))
                                 or center_only(oh, ow, (kh, kw), (sh, sw), (dh, dw), padding))
    ty, tx = (kh // 2, kw // 2) if center else (0, 0)
    if center:
        padding, dh, dw = (0, 0, 0, 0), 1, 1
    lanes = vector_lanes(target, packed.dtype)
    registers = vector_registers(lanes)
    vecs = max(1, FB // lanes)
    flat = wide_out = False
    if pointwise and (sh, sw) == (1, 1) and not any(padding) and blocked \
            and isinstance(oh, int) and isinstance(ow, int) and 1 < oh and oh * ow <= SMALL_PLANE \
            and C is not None and isinstance(FO, int):
        # (a larger plane is rows of tasks, which one row would take away: 0.46-0.59x in place)
        wide_out = _wide_output(oh * ow, C * FO * FB * dt.nbytes(data.dtype), registers, target)
        flat = knob("conv.flat", (False, True), wide_out or _flat_pads_less(oh, ow, FB, lanes, registers))
    wide = grouped and C == 1 and _wide_window((sh, sw), kw, registers)
    # (a wide window's columns unrolled share each input vector among up to kw taps: blocks
    # of 4 columns share too few; see _wide_window)
    least = 7 if wide or (not grouped and registers >= 32) else 4
    xb = FLAT_COLUMNS if flat and wide_out else \
        width_block(oh * ow if flat else ow, FB, lanes, registers, pointwise=pointwise, least=least)
    # two output-channel blocks per register block where they fill AVX2's 16 registers best
    filters = 2 if _paired_blocks(registers, vecs, FO, kh * kw, grouped or flat or wide or not blocked
                                  or dot is not None or scale is not None) else 1
    if filters == 2:
        xb = PAIRED_COLUMNS
    # the tuner may take any block whose accumulators fit the registers with a weight vector
    xb = knob("conv.columns", range(1, max(1, (registers - vecs - 1) // vecs) + 1), xb)
    end, last = [padding[2], padding[3]], None
    if not flat:
        # the last block of columns reads past the row (its extra columns are never stored):
        # pad for it, so no load needs a guard -- or, where nothing else needs padding (a
        # strided 1x1 conv, which reads a quarter of its input), clamp those reads to the last
        # column instead of copying the whole input to add one. With a symbolic width, the
        # extra columns' reads bound what is past the row (guarded FMAs: 10x slower)
        if isinstance(ow, int) and isinstance(W, int):
            reads = (-(-ow // xb) * xb - 1) * sw + dw * (kw - 1) + 1
            past = max(0, reads - (W + padding[1] + padding[3]))
        else:
            past = fold_size(((ow + (xb - 1)) // xb * xb - ow) * sw) if xb > 1 else 0
        if not (isinstance(past, int) and past == 0) and not any(padding):
            last = W - 1
        else:
            end[1] = end[1] + past if isinstance(past, int) else fold_size(end[1] + past)
    # (a grouped conv's uint8 data is widened to floats as it is padded: once per input vector)
    padded = pad_spatial(data, padding[:2], end, pad_value, f"{name}_pad", inner=1 if blocked else 0,
                         dtype=packed.dtype, pairs=pairs and sub is None)  # (a subsampled copy's are pairs)

    def column(x, r):
        c = x * sw + r * dw
        return c if last is None else min_(c, last)
    ry, rx = te.reduce_axis(1 if center else kh, "ry"), te.reduce_axis(1 if center else kw, "rx")

    def live_row(y):
        """A dilated conv's tap rows that fall in the padding for output row ``y`` add nothing:
        the condition that tap row ``ry`` reads the plane (None: every row does), which the
        loop passes hoist above the tap's FMAs (:mod:`ember.loop.passes.hoist_if`)."""
        if dh == 1 or flat or not (padding[0] or padding[2]) or pad_value != 0:
            return None
        r = y * sh + ry.var * dh
        return logical_and(r >= padding[0], r < padding[0] + H)
    RY, RX = ry.var + ty, rx.var + tx  # (the tap's row and column in the window)
    if grouped and C == 1:
        def body(n, fo, y, x, fi):
            v = padded[n, fo, y * sh + (RY - ty) * dh, column(x, RX - tx), fi]
            return te.sum(v * packed[fo, 0, RY, RX, fi], axis=(ry, rx))
    elif grouped:
        rci = te.reduce_axis(C, "rci")

        def lane(fi):  # the input lane of filter lane fi: its group's channel rci
            return rci.var if C == FB else (fi // C) * C + rci.var

        def body(n, fo, y, x, fi):
            v = padded[n, fo, y * sh + (RY - ty) * dh, column(x, RX - tx), lane(fi)]
            return te.sum(v * packed[fo, rci.var, RY, RX, fi], axis=(rci, ry, rx))
    elif blocked:
        cb = const_int(padded.shape[-1])  # (words: twice the data's with pairs)
        rco, rci = te.reduce_axis(C_ext // cb, "rco"), te.reduce_axis(cb, "rci")
        # the window innermost: with the weights packed (F/FB, C, kh, kw, FB) the reduction
        # then reads them as one sequential stream (measured 1.2-1.4x on 3x3 convs over the
        # block's channels innermost)
        axes = (rco, rci, ry, rx)

        def body(n, fo, y, x, fi):
            if flat:  # x: a position of the plane; the last block's extra ones read the last
                q = min_(x, oh * ow - 1)
                v = padded[n, rco.var, q // ow + RY, q % ow + RX, rci.var]
            else:
                v = padded[n, rco.var, y * sh + (RY - ty) * dh, column(x, RX - tx), rci.var]
            w = packed[fo, rco.var * cb + rci.var, RY, RX, fi]
            if scale is not None:
                w = scale[n if const_int(scale.shape[0]) != 1 else 0, rco.var, 0, 0, rci.var] * w
            return te.sum(v * w if dot is None else intrinsics.call(dot, v, w), axis=axes, where=live_row(y))
    else:
        rc = te.reduce_axis(C_ext, "rc")

        def body(n, fo, y, x, fi):
            v = padded[n, rc.var, y * sh + (RY - ty) * dh, column(x, RX - tx)]
            return te.sum(v * packed[fo, rc.var, RY, RX, fi], axis=(rc, ry, rx), where=live_row(y))

    # the padded or subsampled copy of the input: scheduled with the conv (per task or once)
    copy = padded if padded is not data else sub
    parts = {"kind": "conv_nchwc", "pad": copy, "input": padded, "xb": xb, "grouped": grouped, "strides": (sh, sw),
             "wide_window": wide, "flat": flat, "widen": data.dtype != packed.dtype, "wide_output": flat and wide_out,
             "pairs": const_int(padded.shape[-1]) // 2 if pairs else 0, "filters": filters,
             "center": (oh, ow) + tuple(dilation) if centerable else None}
    if not flat:
        return te.compute((data.shape[0], FO, oh, ow, FB), body, name, attrs=parts)
    # the plane as one row of whole blocks, and the result read back as rows and columns (a
    # view the schedule inlines into the write-back)
    acc = te.compute((data.shape[0], FO, 1, -(-oh * ow // xb) * xb, FB), body, f"{name}_flat", attrs=parts)
    return te.compute((data.shape[0], FO, oh, ow, FB), lambda n, fo, y, x, fi: acc[n, fo, 0, y * ow + x, fi],
                      name, attrs={"kind": "conv_nchwc_flat", "conv": acc})


def subsample(data: te.Tensor, strides: Sequence[int], name: str, pairs: bool = False) -> te.Tensor:
    """Every ``strides[0]``-th row and ``strides[1]``-th column of blocked ``data``; with
    ``pairs``, its words as int16 pairs (see :func:`~ember.kernels.conv.pad_spatial`)."""
    sh, sw = strides
    n, cb, H, W, b = data.shape
    oh, ow = conv_out_size(fold_size(H), 1, sh, 1), conv_out_size(fold_size(W), 1, sw, 1)
    if not pairs:
        return te.compute((n, cb, oh, ow, b), lambda i, c, y, x, k: data[i, c, y * sh, x * sw, k], name)
    b = const_int(b)
    return te.compute((n, cb, oh, ow, 2 * b),
                      lambda i, c, y, x, k: pair_word(data[i, c, y * sh, x * sw, k % b], k // b), name)


def schedule_conv_nchwc(s: Schedule, conv: te.Tensor, out: Optional[te.Tensor] = None, target=None) -> Schedule:
    """The register-blocked schedule of a :func:`conv2d_nchwc` stage, written back through
    ``out`` (``conv`` or an inlined elementwise epilogue of its shape).

    Each task reduces into ``FB/lanes x XB`` vector accumulators per block of ``XB`` columns,
    which the epilogue then stores. A task is one row of a group of output-channel blocks
    (as many as keep their weights in half the L2: the row's input is read once per group),
    or one block's whole plane; the reduction runs whole per block of columns or in
    input-channel chunks over the row or plane (:func:`reduction_chunks`).
    """
    target = host(target)
    out = conv if out is None else out
    view = None
    if conv.op.attrs.get("kind") == "conv_nchwc_flat":  # the plane computed as one row
        view, conv = conv, conv.op.attrs["conv"]
        if out is not view:
            s[view].compute_inline()
    lanes = vector_lanes(target, conv.dtype)
    xb = conv.op.attrs["xb"]
    acc = s.cache_write(conv, "local") if out is conv else conv
    if conv.op.attrs.get("grouped"):
        from .conv_grouped import schedule_grouped  # (it uses this module's helpers)

        return schedule_grouped(s, conv, out, acc, lanes, xb, target)
    so = s[out]
    n, fo, y, x, fi = so.leaf
    if view is not None:  # the write-back's rows and columns as one row of the plane's positions
        y, x = so.split(so.fuse(y, x), nparts=1)
    st = s[acc]
    mode = knob("conv.reduction", ("", "row", "plane"), reduction_chunks(conv, target))
    if mode != "plane":
        # rows outer where a group of channel blocks' weights stay in half the L2: each row of
        # input is then read once per group, not once per channel block (ResNet's 56x56
        # layers would read their input from L3 4-32 times over)
        blocks = _static_size(conv.shape[1])
        group = _weight_group(conv, target)
        want = conv.op.attrs.get("filters", 1)
        if want > 1 and blocks % want == 0 and group % want:  # (whole pairs of blocks per group)
            group = next(d for d in range(group, blocks + 1) if blocks % d == 0 and d % want == 0)
        group = knob("conv.weight_group", [d for d in range(1, min(blocks, 64) + 1) if blocks % d == 0], group)
        fco, fo = so.split(fo, factor=group)
        so.reorder(n, fco, y, fo)
    # output-channel blocks per register block (a tuner's decision): their accumulators share
    # each broadcast input, and a narrow row fills the registers with fewer, whole blocks of
    # columns (ResNet-50's 14x14 layers, one thread: 2 blocks x 2 columns 1.12-1.15x faster than
    # 1 x 5, which pads the row to 15; no faster in the model on two threads). Those whose
    # accumulators and weight vectors fit the registers, a divisor of the task's blocks.
    vecs = max(1, _static_size(conv.shape[4]) // lanes)
    registers = vector_registers(lanes)
    blocks_per = group if mode != "plane" else _static_size(conv.shape[1])
    # (a block's accumulators, and the smaller of its broadcast inputs and its weight vectors
    # held while the larger stream: _vector_block)
    fits = [f for f in (1, 2, 3, 4) if blocks_per % f == 0
            and (f == 1 or f * vecs * xb + min(xb, f * vecs) + 1 <= registers)]
    want = conv.op.attrs.get("filters", 1)
    nf = knob("conv.filters", fits, want if want in fits else 1)
    if mode:
        if mode == "plane":
            if nf > 1:
                fo, _ = so.split(fo, factor=nf)
            task = row = parallel_outer(so, [n, fo])
        else:
            row = parallel_outer(so, [n, fco, y])
            task = so.split(fo, factor=nf)[0] if nf > 1 else fo
        # whole blocks of columns: the partial sums' region then rounds up to them (the input
        # is padded for it), so no column tail puts a guard on every FMA
        so.split(x, factor=xb)
        _, fl = so.split(fi, factor=lanes)
        so.vectorize(fl)
        st.compute_at(so, task)
        cn, cfo, cy, cx, cfi, *red = st.leaf
        cxo, cxi = st.split(cx, factor=xb)
        if len(red) == 4:  # blocked input: its channel block is the chunk
            rco, *inner = red
        else:
            rc, ry, rx = red
            C = _static_size(rc.extent)
            chunks = [d for d in (32, 16, 8, 4, 2, 1) if C % d == 0]
            rco, rci = st.split(rc, factor=knob("conv.chunk", chunks, next(d for d in chunks if d <= 16)))
            inner = [ry, rx, rci]
        # (the task's blocks inside the chunk where they share a register block)
        st.reorder(rco, cn, *([cfo] if nf == 1 else []), cy, cxo, *inner, *([cfo] if nf > 1 else []), cxi, cfi)
    else:
        xo, xi = so.split(x, factor=xb)
        foi = None
        if nf > 1:
            fo, foi = so.split(fo, factor=nf)
        so.reorder(n, fco, y, fo, xo, *([foi] if foi is not None else []), xi, fi)
        row = parallel_outer(so, [n, fco, y])
        _whole_reduction(so, st, xo, foi, xi, fi, lanes)
        return _schedule_pad(s, conv, lanes, (so, row) if _pad_in_task(conv, target) else None)
    _vector_block(st, cfo if nf > 1 else None, cxi, cfi, lanes)
    return _schedule_pad(s, conv, lanes, (so, row) if mode != "plane" and _pad_in_task(conv, target) else None)


def _pad_in_task(conv: te.Tensor, target) -> bool:
    """:func:`_rows_in_task`, a decision the tuner may change."""
    if conv.op.attrs["pad"] is None:
        return False
    return knob("conv.pad_in_task", (False, True), _rows_in_task(conv, target))


def _whole_reduction(so, st, xo, foi, xi, fi, lanes: int) -> None:
    """The accumulators of one block of columns (of ``foi`` output-channel blocks) computed at
    ``xo``, the whole reduction outermost, then written back with the epilogue: blocks and
    columns unrolled, channels in vectors."""
    if foi is not None:
        so.unroll(foi)
    so.unroll(xi)
    fv, fl = so.split(fi, factor=lanes)
    so.unroll(fv)
    so.vectorize(fl)
    st.compute_at(so, xo)
    cn, cfo, cy, cx, cfi, *red = st.leaf
    if foi is None:
        st.reorder(*red, cn, cfo, cy, cx, cfi)
    else:
        st.reorder(*red, cn, cy, cfo, cx, cfi)
    _vector_block(st, cfo if foi is not None else None, cx, cfi, lanes)


def _vector_block(st, cfo, cx, cfi, lanes: int) -> None:
    """The register block: its output-channel blocks (``cfo``, where it has several), columns
    and channels' vectors unrolled, lanes vectorized."""
    if cfo is not None:
        st.unroll(cfo)
    st.unroll(cx)
    cv, cl = st.split(cfi, factor=lanes)
    sizes = [const_int(a.extent) for a in (cx, cfo, cv)] if cfo is not None else [None]
    if None not in sizes and sizes[0] < sizes[1] * sizes[2]:
        # fewer columns than weight vectors: the columns' broadcast inputs held, each weight
        # vector loaded for its products and dropped (acc + xb + 1 registers, not acc + all
        # the block's weight vectors + 1: 2 x 2 vectors x 3 columns spilled an accumulator)
        st.reorder(cv, cx)
    st.unroll(cv)
    st.vectorize(cl)


def _rows_in_task(conv: te.Tensor, target) -> bool:
    """Whether a task (one output row) pads the input rows it reads itself, in L1/L2 (a
    padded copy of the whole input is one more pass over memory and one more parallel
    region: 8-9% of ResNet's 3x3 convs), rather than reading a copy made first: where those
    rows fit in half the L2 (and 128 KiB on the stack). (The bound was 64 KiB, which left
    ResNet-50's strided 3x3 convs, 89-98 KiB, to the copy: in place on Zen 5 they ran
    1.11-1.18x faster padding their rows per task.)"""
    pad = conv.op.attrs["pad"]
    if pad is None:
        return False
    dims = [_static_size(d) for d in pad.shape]
    channels, width = math.prod(dims[1:2] + dims[4:]), dims[3]  # (N C H W or N C/cb H W cb)
    ry = conv.op.reduce_axis[-2]  # (…, ry, rx): the window's rows
    rows = _static_size(ry.extent)  # a stride-1 row reads kh rows; a strided one as many
    return channels * rows * width * dt.nbytes(conv.dtype) <= min(128 << 10, target.l2_bytes // 2)


def _schedule_pad(s: Schedule, conv: te.Tensor, lanes: int, at=None) -> Schedule:
    """The padded input: once per call, in parallel; or, with ``at`` (stage, loop), the rows
    each task reads, made inside it."""
    pad = conv.op.attrs["pad"]
    # (words made int16 pairs: a vector of one half's, which reads consecutive words)
    lanes = min(lanes, conv.op.attrs.get("pairs") or lanes)
    if pad is not None and at is not None:
        sp = s[pad]
        sp.compute_at(*at)
        _, v = sp.split(sp.leaf[-1], factor=lanes)
        sp.vectorize(v)
        return s
    if pad is not None:
        sp = s[pad]
        if pad.ndim == 5:  # rows of whole channel blocks: one vector (or two) per column
            sp.parallel(sp.fuse(*sp.leaf[:-2]))
            _, v = sp.split(sp.leaf[-1], factor=lanes)
            sp.vectorize(v)
        else:
            sp.parallel(sp.fuse(*sp.leaf[:-1]))
            vectorize_copy(sp, pad, lanes)
    return s


def reduction_chunks(conv: te.Tensor, target) -> str:
    """How a :func:`conv2d_nchwc` runs its reduction: ``""`` (each block of columns runs all of
    it in registers), or one input-channel block at a time over a whole ``"row"`` or
    ``"plane"`` of one output-channel block, partial sums in a buffer.

    Chunks pay where one output-channel block's weights (``C kh kw x FB``) would not stay in
    L1 from one block of columns to the next: a chunk's weights (``kh kw x cb x FB``) are then
    read once per row or plane and reused from L1, and the input is read a channel block at a
    time instead of one column from every channel plane (planes whose size is a multiple of
    4 KiB alias in L1). Measured in ResNet-50 (AVX2, 32 KiB L1, blocks of 16), in place: its
    1x1 convs from 512 channels at 28x28 run 1.1-1.2x faster in chunks, its 3x3 convs there
    1.15x; a 1x1 conv from 64 channels runs 0.8x. From 256 channels, a block's weights are
    half the L1 and stay there: the whole reduction in registers ran 256->128 at 56x56
    1.16-1.30x and the strided 256->512 projection 1.23-1.38x faster than chunks (one and two
    threads), 256->64 at 56x56 as fast. A whole plane is the task where it is small
    (the late layers, at most :data:`SMALL_PLANE` positions, whose weights dominate) or where
    its partial sums, a chunk of its input and a chunk's weights fit in twice the L1: the
    partial sums and the input pass through L1 a row at a time, while a row's task reads its
    block's weights (every chunk's) from L2 once per row. Measured in place in ResNet-50 (AVX2,
    32 KiB L1): its 3x3 convs of 256 channels at 14x14 (38 KiB) ran 1.09-1.17x faster as a
    plane than by rows."""
    if conv.op.attrs.get("grouped"):
        return ""  # a block's weights are a few vectors: the whole reduction in registers
    _, _, OH, OW, FB = [_static_size(d) for d in conv.shape]
    plane = OH * OW
    nbytes = dt.nbytes(conv.dtype)
    window = [_static_size(d.extent) for d in conv.op.reduce_axis]
    # blocked input: (C/cb, cb, kh, kw), the chunk its block; plain: (C, kh, kw) in chunks of 16
    taps, chunk = (math.prod(window[2:]), window[1]) if len(window) == 4 else (math.prod(window[1:]), 16)
    channels = math.prod(window) // taps
    fits = channels * taps * FB * nbytes <= target.l1d_bytes // 2
    lanes = vector_lanes(target, conv.dtype)
    avx512, flat = vector_registers(lanes) >= 32, conv.op.attrs.get("flat")
    if taps == 1 and avx512 and FB >= 2 * lanes and conv.op.attrs["xb"] >= 14 and not flat:
        # a 1x1 conv whose block of 14 columns of two vectors fills AVX-512's registers: each
        # weight vector it loads feeds 14 FMAs, so the weights stream from L2 (see width_block)
        return ""
    if conv.op.attrs.get("wide_output"):
        return ""  # (see _wide_output)
    # (a small plane whose block's weights stay in L1 on AVX-512: the whole reduction in
    # registers. In place at 7x7 on Zen 5, two runs: EfficientNet-B0's and MobileNetV2's
    # expansions from 160-320 channels 1.03-1.26x and 1.04-1.09x; the projections from
    # 576-1152 channels ran 0.71-0.88x so, in rows, and keep the plane unless their weights
    # make them wide outputs. AVX2 is not measured, nor is a plane computed as one row
    # (conv.flat) otherwise, which keeps it too.)
    if plane <= SMALL_PLANE and not (fits and avx512 and not flat):
        return "plane"
    if fits:
        return ""
    src = conv.op.attrs["input"]
    in_plane = _static_size(src.shape[2]) * _static_size(src.shape[3])
    footprint = (plane * FB + in_plane * chunk + taps * chunk * FB) * nbytes
    return "plane" if footprint <= 2 * target.l1d_bytes else "row"


def _weight_group(conv: te.Tensor, target) -> int:
    """Output-channel blocks whose weights fit in half the L2 (a divisor of the blocks: a
    ragged group would put a guard on every FMA), at least 1."""
    blocks, fb = _static_size(conv.shape[1]), _static_size(conv.shape[4])
    per_block = math.prod(_static_size(d.extent) for d in conv.op.reduce_axis) * fb * dt.nbytes(conv.dtype)
    return largest_divisor(blocks, target.l2_bytes // 2 // per_block)


def _static_size(e) -> int:
    """A size for a heuristic: its value, or a symbolic one's likely value (large if none)."""
    v = likely_int(e)
    return (1 << 20) if v is None else v


def conv2d_nchwc_nd(data_shape, packed_shape, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
                    dtype: str = "float32", target=None, grouped: bool = False):
    """The blocked convolution with its default schedule; returns (schedule, [data, packed, out])."""
    data = te.placeholder(tuple(data_shape), dtype, "data")
    packed = te.placeholder(tuple(packed_shape), dtype, "packed")
    out = conv2d_nchwc(data, packed, strides, padding, dilation, target, grouped=grouped)
    s = Schedule(out)
    schedule_conv_nchwc(s, out, out, target)
    return s, [data, packed, out]


__all__ = ["channel_block", "conv2d_nchwc", "conv2d_nchwc_nd", "reduction_chunks", "schedule_conv_nchwc", "width_block"]
