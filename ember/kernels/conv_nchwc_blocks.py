"""The block shapes of the blocked convolution (:mod:`.conv_nchwc`): how many output channels a
block holds, how many columns a register block keeps, when a small plane is computed as one
row, and when two output-channel blocks share a register block. Choices from the target's
vector width and register count and the layer's sizes, each with what measured it."""
from __future__ import annotations

from typing import Optional, Sequence

from .common import host, likely_int, vector_lanes

def channel_block(dtype: str = "float32", target=None, channels: Optional[int] = None) -> int:
    """The output-channel block ``FB`` of the blocked layout: two vectors (the register budget
    then leaves room for up to 6 columns x 2 vectors of accumulators on AVX2's 16 registers),
    or one where that pads ``channels`` less: fewer than two vectors (MobileNet's 16- and
    24-channel projections on AVX-512: a block of 32 would be half padding, and the plain
    layout costs a layout change on each side), or an odd number of vectors (EfficientNet's
    40, 144 and 240 channels: blocks of 32 compute 64, 160 and 256). Every kernel of the
    region pays for the padding, and one vector per column still keeps the FMAs fed (the
    micro-kernel then blocks more columns): measured in one process, EfficientNet-B0 0.93x
    the time, RegNetY-400MF 0.88x, MobileNetV3-small 0.90x on AVX-512; 0.98x and 0.96x on
    AVX2."""
    lanes = vector_lanes(host(target), dtype)
    if channels is None:
        return 2 * lanes
    one, two = -(-channels // lanes) * lanes, -(-channels // (2 * lanes)) * 2 * lanes
    return lanes if channels < 2 * lanes or one < two else 2 * lanes


def width_block(width, fb: int, lanes: int, registers: int = 16, pointwise: bool = False, least: int = 4) -> int:
    """The columns ``XB`` a micro-kernel keeps in registers: from ``least`` (4) up to what the
    accumulators leave (``FB/lanes`` per column, plus the weight vectors and one broadcast),
    the one that pads the row least, the smaller on ties (measured: 4 columns run as fast as
    6 where both fit the row exactly).

    ``pointwise`` (a 1x1 conv) with one vector per column: the larger on ties. Each step of
    its reduction loads a weight vector and a broadcast per column for one FMA per column, so
    the loop's own instructions weigh on the few FMAs of a small block: in place in
    EfficientNet-B0 (AVX2, 8-channel blocks), its 24- and 40-channel projections at 56x56 ran
    1.14-1.23x faster in blocks of 8 columns than of 4, at 28x28 1.11-1.14x in blocks of 7.
    (Blocks of 14, AVX2's whole budget, were faster still there, 1.16-1.32x, but 1.13x slower
    than 7 on RegNetY-400MF's 208->440 at 14x14: the cap stays.)

    On AVX-512 (32 registers) the callers ask for ``least`` 7 for dense convs, and a 1x1 conv
    of two vectors per column may fill the registers (a 14-wide row in one block: no taps are
    unrolled, so the spills below do not arise). In place in ResNet-50 on Zen 5 (blocks of
    32): 7 columns rather than 4 ran its convs at 56x56 and 28x28 1.05-1.16x faster; its 1x1
    convs at 14x14 in one block of 14 columns, the whole reduction in registers
    (:func:`reduction_chunks`), 1.08-1.17x."""
    vecs = max(1, fb // lanes)
    # accumulators in at most 3/4 of the registers: at 28 of AVX-512's 32, LLVM's schedule
    # of the unrolled taps spilled them to the stack (a 14-wide row ran at 40-75% of peak,
    # varying with the stack's address from one process to the next)
    roomy = pointwise and vecs >= 2 and registers >= 32
    most = max(1, (registers - vecs - 1 if roomy else min(registers - vecs - 1, registers * 3 // 4)) // vecs)
    larger = pointwise and vecs == 1
    width = width if isinstance(width, int) else likely_int(width)  # (symbolic: as for its likely size)
    if width is None:
        return min(least, most)
    if width <= most:
        return width
    cands = range(min(least, most), most + 1)
    return min(cands, key=lambda xb: (-(-width // xb) * xb, -xb if larger else xb))


def _wide_window(strides: Sequence[int], kw: int, registers: int) -> bool:
    """Whether a depthwise conv reads its padding in place with its window's columns unrolled,
    one row per task, in blocks of at least 7 columns: at stride 1, a window at least 5 wide,
    on AVX-512's 32 registers (which hold a block's accumulators, its input vectors and the
    row's taps). Measured in place, two threads, Zen 5, against a padded copy per task of 4
    rows of 4-7 columns: ConvNeXt-T's 7x7 convs 1.26-1.47x at every size (56x56 to 7x7),
    EfficientNet-B0's 5x5 ones 1.14-1.33x, MobileNetV3-small's 1.14-1.26x; blocks of 4
    columns ran EfficientNet-B0's 240 channels at 28x28 0.89x, of 7 1.33x. (3x3 windows:
    0.79-1.24x, so they keep the copy; AVX2's 16 registers are not measured.)"""
    return tuple(strides) == (1, 1) and kw >= 5 and registers >= 32


# The block of a wide output's flat plane (_wide_output): found by the tuner on ResNet-50's 7x7
# convs; in place there, 10 columns 1.33-1.40x, 13 1.25-1.35x, 14 1.21-1.27x, 7 1.07-1.14x
FLAT_COLUMNS = 10


def _wide_output(plane: int, weight_bytes: int, registers: int, target) -> bool:
    """Whether a stride-1 1x1 conv over a small ``plane`` computes it as one row in blocks of
    :data:`FLAT_COLUMNS`, the whole reduction in registers: on AVX-512, for weights of 3/4 of
    the L2 or more, where those blocks pad the plane by a tenth at most. Each weight vector then
    feeds 10 FMAs. In place on Zen 5 (1 MiB L2) against the plane in rows and its reduction in
    chunks: ResNet-50's 7x7 convs to and from 2048 channels (4 MiB) 1.33-1.40x,
    EfficientNet-B0's 192->1152 (0.84 MiB) 1.06-1.09x and its 320->1280 head 1.28x,
    MobileNetV2's 320->1280 1.09x, EfficientNet-B0's 1152->192 projections (0.84 MiB)
    1.16-1.19x; lighter weights lost or broke even so (end to end MobileNetV3-small's
    96->576, 0.2 MiB: 0.94x; MobileNetV2's 160->960, 0.6 MiB: 0.93-1.00x in place), as did
    MobileNetV2's 960->160 projections (0.6 MiB: 0.81-0.85x), outside the rule."""
    padded = -(-plane // FLAT_COLUMNS) * FLAT_COLUMNS
    return registers >= 32 and 4 * weight_bytes >= 3 * target.l2_bytes and (padded - plane) * 10 <= plane


def _flat_pads_less(oh: int, ow: int, fb: int, lanes: int, registers: int) -> bool:
    """Whether a stride-1 1x1 conv over a small plane (one task's) computes fewer padded
    positions as one row of ``oh * ow`` than as ``oh`` rows: a 7x7 plane is 7 rows of 8
    (blocks of 4 columns) or one of 50 (blocks of 5)."""
    xr, xf = (width_block(w, fb, lanes, registers, pointwise=True) for w in (ow, oh * ow))
    return -(-oh * ow // xf) * xf < oh * -(-ow // xr) * xr


# The columns of a register block of two output-channel blocks (_paired_blocks)
PAIRED_COLUMNS = 3


def _paired_blocks(registers: int, vecs: int, blocks, taps: int, other: bool) -> bool:
    """Whether a float conv's register block is two output-channel blocks of two vectors by
    :data:`PAIRED_COLUMNS` columns: 12 accumulators, the 3 columns' inputs broadcast and held,
    one weight vector at a time -- AVX2's 16 registers exactly (:func:`.conv_nchwc._vector_block` orders
    the products so). Against one block by 4-5 columns (8-10 accumulators, with FMA's latency
    of 4 barely enough to keep both pipes busy), in place on Zen 3 (medians of 15-20 rounds):
    ResNet-18's 3x3 convs but the stem 1.09x, ResNet-50's at 56x56 ~1.07x, 7x7 ~1.03x, 28x28
    and 14x14 as fast; the stem (unblocked input) 1.13x in one run and 0.64x in another, and 1x1
    convs, which read a weight vector per broadcast anyway, 0.86-1.15x: they keep theirs.
    Where the blocks pair up (an even count) and nothing else shapes the block (``other``:
    unblocked input, groups, a flat plane, a wide window, packed dots, a per-channel scale)."""
    return registers < 32 and vecs == 2 and taps > 1 and isinstance(blocks, int) and blocks % 2 == 0 \
        and not other


__all__ = ["FLAT_COLUMNS", "PAIRED_COLUMNS", "channel_block", "width_block"]
