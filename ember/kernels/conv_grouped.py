"""The default schedule of a depthwise or grouped conv in the blocked layout (``conv2d_nchwc``
with a window over one channel block's own channels): rows per task, the padding per task, in
place or once, and which of the window's taps are unrolled. The conv's compute and the other
schedules are in :mod:`.conv_nchwc`, whose helpers this uses."""
from __future__ import annotations

from ..loop import compute as te
from ..loop.schedule import Schedule
from ..loop.knobs import knob
from .common import const_int, parallel_outer, vector_registers
from .conv_nchwc import SMALL_PLANE, _schedule_pad, _static_size, _whole_reduction


def schedule_grouped(s: Schedule, conv: te.Tensor, out: te.Tensor, acc: te.Tensor, lanes: int,
                     xb: int, target) -> Schedule:
    """A depthwise or grouped conv: one task per few output rows of one channel block,
    which first pads the input rows they read (a few KiB, in L1) -- a padded copy of
    the whole input would go through memory once more, the most this memory-bound kernel
    pays -- then runs blocks of ``XB`` columns, the whole reduction in registers."""
    so = s[out]
    n, fo, y, x, fi = so.leaf
    xo, xi = so.split(x, factor=xb)
    # (tuner's decisions: rows per task, channel blocks outer or rows outer, the padded rows
    # made per task, the whole padded input once, or none: each tap's load guarded where it
    # falls in the padding)
    height = _static_size(conv.shape[2])
    # A strided conv reads its padding in place, its window unrolled, where its plane is larger
    # than a task's: its task copied rows of which it reads every other column. In place, two
    # threads, against a padded copy per task (two runs): EfficientNet-B0's three such
    # 1.06-1.35x, MobileNetV2's three 1.00-1.48x; at 7x7 0.82x and 0.97x, at stride 1
    # 0.82-1.20x. (The tuner found the same for EfficientNet-B0's 96 channels at 112x112: its
    # 12 best all so.)
    # Not so groups narrower than a vector (a shuffle of the pixel's vector per channel, all
    # unrolled): RegNetY-400MF's and ResNeXt-50's strided convs of 8-channel groups ran 3.4-4.4x
    # faster from rows padded per task, their columns unrolled (AVX-512, in place).
    group = next((_static_size(r.extent) for r in conv.op.reduce_axis if r.var.name == "rci"), 1)
    narrow = group > 1 and group % lanes != 0
    strided = conv.op.attrs["strides"] != (1, 1) and height * _static_size(conv.shape[3]) > SMALL_PLANE \
        and not narrow
    # the taps a conv that reads its padding in place unrolls, if it does (and on AVX-512 a
    # stride-1 one with a wide window, its columns: :func:`_wide_window`)
    wide = conv.op.attrs.get("wide_window")
    # On AVX-512 the other depthwise convs not strided over a large plane read their padding in
    # place too, their window's columns unrolled (rows and columns per task as before). In place
    # on Zen 5 against a padded copy per task (the tuner's pick for all five of EfficientNet-B0's
    # depthwise tasks it tuned): EfficientNet-B0's 3x3 convs 1.14-1.31x, its 5x5 at stride 2
    # over 14x14 1.46x; MobileNetV2's 1.17-1.55x. (Strided over a larger plane, the columns
    # against the whole window: EfficientNet-B0 1.12x, MobileNetV2 0.91-1.00x: those keep it.)
    compact = group == 1 and not strided and not wide and vector_registers(lanes) >= 32
    in_place = "window" if strided else "columns" if wide or compact else None
    # A grouped conv's window columns unrolled on AVX-512: a block of columns shares each input
    # vector, shuffled once per channel, among the taps that overlap it. In place, against
    # none: groups of 4 and 8 channels (ResNeXt-50, RegNetY-400MF) 1.15-1.44x, of 16 1.11-1.13x
    # (RegNetY-800MF, ResNeXt-50), of 32 1.02-1.04x. (AVX2's 16 registers are not measured.)
    unrolled = in_place or ("columns" if group > 1 and vector_registers(lanes) >= 32 else "none")
    # rows per task: a task pads the input rows its output rows read once (4 rows of a 3x3
    # window: 6 input rows, where a task per row padded 3 for each), keeping 8 tasks per core
    # (the tuner chose 2-8 rows for 10 of EfficientNet-B0's 11 depthwise convs; in one
    # process, 4 rows: EfficientNet-B0 0.98x the time, MobileNetV2 0.97x, RegNetY and
    # ConvNeXt-T 0.99x)
    tasks = _static_size(conv.shape[0]) * _static_size(conv.shape[1])
    fits = [r for r in (4, 2) if r <= height and tasks * -(-height // r) >= 8 * target.cores]
    rows = knob("dw.rows", [r for r in (1, 2, 4, 8) if r <= height], fits[0] if fits and not wide else 1)
    if rows > 1:
        y, yi = so.split(y, factor=rows)
        inner = [yi]
    else:
        inner = []
    order = knob("dw.order", ("channels", "rows"), "channels")
    so.reorder(*((n, fo, y) if order == "channels" else (n, y, fo)), *inner, xo, xi, fi)
    row = parallel_outer(so, [n, fo, y] if order == "channels" else [n, y, fo])
    _whole_reduction(so, s[acc], xo, None, xi, fi, lanes)
    # the window's taps unrolled: a block of XB columns then reads XB + kw - 1 input vectors
    # per window row, each shared by the taps that overlap it, instead of one load per FMA
    # (a depthwise conv issues a load per FMA otherwise), and the tap weights stay in registers
    unroll = knob("dw.unroll", ("none", "columns", "window"), unrolled)
    st = s[acc]
    red = {iv.var.name: iv for iv in st.leaf if iv.var.name in ("rci", "ry", "rx")}
    if unroll != "none":
        st.unroll(red["rx"])
        if unroll == "window":
            st.unroll(red["ry"])
    if "rci" in red and const_int(red["rci"].extent) % lanes:
        # groups narrower than a vector: a lane reads channel (lane // g) g + c of its
        # block, one shuffle of the pixel's vector per channel c when c is a constant
        # (unrolled; a gather otherwise, 4x slower)
        st.unroll(red["rci"])
    pad = conv.op.attrs["pad"]
    # (uint8 data widened as it is padded: once per input vector in a task's rows, where in
    # place each tap's load would widen its own)
    inline = in_place and not conv.op.attrs.get("widen")
    where = knob("dw.pad", ("task", "whole", "inline"), "inline" if inline else "task") if pad is not None else None
    if where == "inline":
        s[pad].compute_inline()
    elif where == "task":
        sp = s[pad]
        sp.compute_at(so, row)
        _, v = sp.split(sp.leaf[-1], factor=lanes)
        sp.vectorize(v)
    elif where == "whole":
        _schedule_pad(s, conv, lanes)
    return s


__all__ = ["schedule_grouped"]
