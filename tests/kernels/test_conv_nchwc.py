"""The blocked-layout convolution (ember.kernels.conv_nchwc) against numpy: its schedules
(whole reductions per block of columns; chunks of input channels over a row or a plane),
column tails, plain and blocked inputs."""
import re

import numpy as np
import pytest

import ember
from ember.kernels.conv_nchwc import (SMALL_PLANE, conv2d_nchwc, conv2d_nchwc_nd, reduction_chunks,
                                      schedule_conv_nchwc, width_block)
from ember.loop import compute as te
from ember.loop.schedule import Schedule
from ember.target import Target
from ember.loop.knobs import decisions

RNG = np.random.default_rng(3)
AVX2 = Target("x86_64-unknown-linux-gnu", "znver3", vector_bits=256, cores=2)


def _conv_ref(x, w, s, p):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    f, _, kh, kw = w.shape
    oh, ow = (xp.shape[2] - kh) // s + 1, (xp.shape[3] - kw) // s + 1
    out = np.zeros((x.shape[0], f, oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,fc->nfhw", xp[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s], w[:, :, i, j])
    return out


@pytest.mark.parametrize("n,c,h,w,f,k,s,cb", [
    (1, 16, 12, 9, 32, 3, 1, 8),    # rows (108 positions), 9 columns: a tail block
    (2, 3, 11, 13, 16, 3, 2, 0),    # plain input, stride 2, batch 2
    (1, 24, 7, 7, 32, 1, 1, 8),     # a small plane: chunks of 8 input channels
    (1, 5, 6, 5, 16, 3, 1, 0),      # a small plane, plain input of 5 channels
    (1, 512, 14, 14, 32, 1, 1, 16),  # 1x1 reducing many channels: the plane schedule at 14x14
    (1, 256, 13, 13, 16, 3, 1, 16),  # chunks by rows, 13 columns in blocks of 5 (a rounded-up row)
    (1, 32, 14, 14, 32, 1, 2, 16),   # a strided 1x1: 7 columns in blocks of 4, the extra reads clamped
])
def test_conv2d_nchwc_matches_numpy(n, c, h, w, f, k, s, cb):
    fb, p = 16, (k // 2,) * 4
    dshape = (n, c // cb, h, w, cb) if cb else (n, c, h, w)
    sch, args = conv2d_nchwc_nd(dshape, (f // fb, c, k, k, fb), (s, s), p)
    x, wt = RNG.standard_normal((n, c, h, w)).astype(np.float32), RNG.standard_normal((f, c, k, k)).astype(np.float32)
    xb = np.moveaxis(x.reshape(n, c // cb, cb, h, w), 2, -1).copy() if cb else x
    wp = np.moveaxis(wt.reshape(f // fb, fb, c, k, k), 1, -1).copy()
    want = _conv_ref(x, wt, s, p)
    out = np.zeros((n, f // fb) + want.shape[2:] + (fb,), np.float32)
    ember.build(sch, args, "k")["k"](xb, wp, out)
    np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(want.shape), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,h,w,f", [
    (256, 14, 14, 32),   # ResNet-50's projection shape, small: subsampled by default (256 channels)
    (256, 13, 11, 16),   # odd sizes: 7x6 outputs from rows and columns 0, 2, ..., 12 and 0, ..., 10
    (32, 15, 15, 16),    # few channels: strided reads by default
])
@pytest.mark.parametrize("chosen", [
    {"conv.subsample": True},
    {"conv.subsample": False},
    {"conv.subsample": True, "conv.pad_in_task": False},  # the copy made once, not per task
    {"conv.subsample": True, "conv.reduction": "row"},
    {"conv.subsample": True, "conv.reduction": ""},
])
def test_strided_1x1_conv_over_a_subsampled_copy_matches_numpy(c, h, w, f, chosen):
    """A strided 1x1 conv reads every other row and column: from 256 input channels it reads
    them from a copy of those (contiguous), the copy made per task or once."""
    cb, fb = 16, 16
    with decisions() as d:
        conv2d_nchwc_nd((1, c // cb, h, w, cb), (f // fb, c, 1, 1, fb), (2, 2), (0, 0, 0, 0))
    assert d.seen["conv.subsample"].default == (c >= 256)
    with decisions(chosen):
        sch, args = conv2d_nchwc_nd((1, c // cb, h, w, cb), (f // fb, c, 1, 1, fb), (2, 2), (0, 0, 0, 0))
    names = {st.name for st in sch.stages}
    assert any(n.endswith("_sub") for n in names) == chosen["conv.subsample"]
    x, wt = RNG.standard_normal((1, c, h, w)).astype(np.float32), RNG.standard_normal((f, c, 1, 1)).astype(np.float32)
    want = _conv_ref(x, wt, 2, (0, 0, 0, 0))
    xb = np.moveaxis(x.reshape(1, c // cb, cb, h, w), 2, -1).copy()
    wp = np.moveaxis(wt.reshape(f // fb, fb, c, 1, 1), 1, -1).copy()
    out = np.zeros((1, f // fb) + want.shape[2:] + (fb,), np.float32)
    ember.build(sch, args, "k")["k"](xb, wp, out)
    np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(want.shape), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("c,h,w,f", [
    (64, 7, 7, 32),    # EfficientNet's and ResNet's last stage: 7 rows of 8 or one row of 50
    (32, 5, 9, 16),    # 45 positions: one row of 45 (blocks of 5), not 5 rows of 10
    (48, 8, 8, 16),    # 8 columns: rows pad nothing, so the default keeps them
])
@pytest.mark.parametrize("flat", [True, False])
def test_1x1_conv_over_a_small_plane_as_one_row_matches_numpy(c, h, w, f, flat):
    """A stride-1 1x1 conv over a plane of at most SMALL_PLANE positions may compute it as one
    row of h*w positions in blocks of columns, the last block's extra positions reading the
    last one (never stored); the write-back reads the rows and columns back."""
    cb, fb = 16, 16
    with decisions() as d:  # (on AVX2: blocks of 4-6 columns of two vectors)
        conv2d_nchwc_nd((1, c // cb, h, w, cb), (f // fb, c, 1, 1, fb), target=AVX2)
    assert d.seen["conv.flat"].default == (w % 4 != 0)
    with decisions({"conv.flat": flat}):
        sch, args = conv2d_nchwc_nd((1, c // cb, h, w, cb), (f // fb, c, 1, 1, fb))
    assert any(st.name.endswith("_flat") for st in sch.stages) == flat
    x, wt = RNG.standard_normal((1, c, h, w)).astype(np.float32), RNG.standard_normal((f, c, 1, 1)).astype(np.float32)
    want = _conv_ref(x, wt, 1, (0, 0, 0, 0))
    xb = np.moveaxis(x.reshape(1, c // cb, cb, h, w), 2, -1).copy()
    wp = np.moveaxis(wt.reshape(f // fb, fb, c, 1, 1), 1, -1).copy()
    out = np.full((1, f // fb, h, w, fb), np.nan, np.float32)  # every position must be written
    ember.build(sch, args, "k")["k"](xb, wp, out)
    np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(want.shape), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("h,w,xb", [(5, 9, 15), (4, 4, 7), (3, 5, 8), (5, 3, 5), (2, 3, 5)])  # (5 columns: AVX2 too)
def test_a_plane_as_one_row_runs_its_whole_reduction_in_any_block_of_columns(h, w, xb):
    """Blocks of positions that span rows of the result: the write-back reads the row back
    through ``(q // w) * w + q % w``, which must simplify to ``q`` for its bounds (it was a
    LoweringError, a failed candidate for the tuner)."""
    c, f, cb = 32, 32, 16
    with decisions({"conv.flat": True, "conv.reduction": "", "conv.columns": xb}):
        sch, args = conv2d_nchwc_nd((1, c // cb, h, w, cb), (f // cb, c, 1, 1, cb))
    x, wt = RNG.standard_normal((1, c, h, w)).astype(np.float32), RNG.standard_normal((f, c, 1, 1)).astype(np.float32)
    xb_ = np.moveaxis(x.reshape(1, c // cb, cb, h, w), 2, -1).copy()
    wp = np.moveaxis(wt.reshape(f // cb, cb, c, 1, 1), 1, -1).copy()
    out = np.full((1, f // cb, h, w, cb), np.nan, np.float32)
    ember.build(sch, args, "k")["k"](xb_, wp, out)
    want = _conv_ref(x, wt, 1, (0, 0, 0, 0))
    np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(want.shape), want, rtol=1e-4, atol=1e-3)


def test_a_1x1_conv_with_heavy_weights_over_a_small_plane_runs_one_row_in_blocks_of_10_on_avx512():
    """On AVX-512, weights of 3/4 of the L2 or more (ResNet-50's 7x7 convs, EfficientNet-B0's
    and MobileNetV2's heads): one row of the plane in blocks of 10 columns, the whole reduction
    in registers; lighter weights (MobileNetV3-small's 96->576) and AVX2 keep their defaults.
    The chosen schedule against numpy (the last block's extra position never stored)."""
    avx512 = Target("x86_64-unknown-linux-gnu", "znver4", vector_bits=512, cores=2, l2_bytes=1 << 20)

    def chosen(c, f, target):
        with decisions({}) as d:
            conv2d_nchwc_nd((1, c // 16, 7, 7, 16), (f // 32, c, 1, 1, 32), target=target)
        return tuple(d.seen[n].default for n in ("conv.flat", "conv.columns", "conv.reduction"))
    assert chosen(512, 2048, avx512) == chosen(192, 1152, avx512) == (True, 10, "")
    assert chosen(96, 576, avx512)[:2] == (False, 7)
    assert chosen(512, 2048, AVX2)[1] != 10
    c, f = 256, 768  # (0.75 MiB of weights)
    assert chosen(c, f, avx512) == (True, 10, "")
    with decisions({"conv.flat": True, "conv.columns": 10, "conv.reduction": ""}):  # (run on this host)
        sch, args = conv2d_nchwc_nd((1, c // 16, 7, 7, 16), (f // 32, c, 1, 1, 32))
    x, wt = RNG.standard_normal((1, c, 7, 7)).astype(np.float32), RNG.standard_normal((f, c, 1, 1)).astype(np.float32)
    xb = np.moveaxis(x.reshape(1, c // 16, 16, 7, 7), 2, -1).copy()
    wp = np.moveaxis(wt.reshape(f // 32, 32, c, 1, 1), 1, -1).copy()
    out = np.full((1, f // 32, 7, 7, 32), np.nan, np.float32)
    ember.build(sch, args, "k")["k"](xb, wp, out)
    want = _conv_ref(x, wt, 1, (0, 0, 0, 0))
    np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(want.shape), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("c,h,w,f,k", [
    (32, 14, 14, 96, 3),   # ResNet's 14x14 3x3 (small): 6 output blocks, 14 columns in blocks of 2
    (64, 14, 14, 96, 1),   # a 1x1 at 14x14
    (16, 5, 7, 96, 3),     # a small plane, 7 columns: a tail block
])
@pytest.mark.parametrize("chosen", [
    {"conv.filters": 2, "conv.columns": 2, "conv.reduction": ""},
    {"conv.filters": 2, "conv.columns": 2, "conv.reduction": "row"},
    {"conv.filters": 2, "conv.columns": 2, "conv.reduction": "plane"},
    {"conv.filters": 3, "conv.columns": 1, "conv.reduction": "plane"},
])
def test_output_channel_blocks_per_register_block_match_numpy(c, h, w, f, k, chosen):
    """``conv.filters``: the accumulators of 2 or 4 output-channel blocks in one register
    block, sharing each broadcast input, in each of the reduction's shapes; only counts whose
    accumulators, and the smaller of the columns' inputs and the weight vectors, fit AVX2's 16
    registers are choices. By default a conv with a window pairs its (even count of) blocks."""
    cb, fb, p = 16, 16, (k // 2,) * 4
    with decisions(chosen) as d:
        sch, args = conv2d_nchwc_nd((1, c // cb, h, w, cb), (f // fb, c, k, k, fb), (1, 1), p, target=AVX2)
    knob = d.seen["conv.filters"]
    assert knob.default == (2 if k > 1 else 1) and chosen["conv.filters"] in knob.choices
    xb = chosen["conv.columns"]
    assert all(n * 2 * xb + min(xb, n * 2) + 1 <= 16 for n in knob.choices)
    x, wt = RNG.standard_normal((1, c, h, w)).astype(np.float32), RNG.standard_normal((f, c, k, k)).astype(np.float32)
    want = _conv_ref(x, wt, 1, p)
    xb = np.moveaxis(x.reshape(1, c // cb, cb, h, w), 2, -1).copy()
    wp = np.moveaxis(wt.reshape(f // fb, fb, c, k, k), 1, -1).copy()
    out = np.full((1, f // fb, h, w, fb), np.nan, np.float32)
    ember.build(sch, args, "k")["k"](xb, wp, out)
    np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(want.shape), want, rtol=1e-4, atol=1e-3)


def test_a_larger_plane_is_never_one_row():
    """Past SMALL_PLANE positions a plane is rows of tasks: the knob is not offered."""
    with decisions() as d:
        conv2d_nchwc_nd((1, 2, 14, 14, 16), (2, 32, 1, 1, 16))
    assert "conv.flat" not in d.seen


def test_width_block_pads_the_row_least():
    assert [width_block(w, 16, 8) for w in (56, 28, 14, 7, 3, 112)] == [4, 4, 5, 4, 3, 4]
    assert width_block(13, 16, 8) == 5  # 15 columns computed, the fewest of 4..6
    assert width_block(7, 32, 16, registers=32) == 7  # AVX-512: a 7-wide row fits in registers
    # a 1x1 conv with one vector per column: the larger on ties
    assert [width_block(w, 8, 8, pointwise=True) for w in (56, 28, 112, 14, 7, 30)] == [8, 7, 8, 7, 7, 10]
    assert width_block(56, 16, 8, pointwise=True) == 4  # two vectors per column: as before
    assert width_block(56, 16, 16, registers=32, pointwise=True) == 14  # AVX-512, one vector
    assert SMALL_PLANE >= 49  # ResNet's 7x7 layers take the plane schedule
    # AVX-512, blocks of two vectors: dense convs from 7 columns; a 1x1's block may fill the
    # registers (14 columns), a 3x3's stays within 3/4 of them (12)
    assert [width_block(w, 32, 16, registers=32, least=7) for w in (56, 28, 14, 112)] == [7, 7, 7, 7]
    assert width_block(14, 32, 16, registers=32, pointwise=True, least=7) == 14
    assert width_block(28, 16, 16, registers=32, pointwise=True) == 14  # one vector: as before


@pytest.mark.parametrize("c,hw,stride,in_task", [
    (128, 56, 2, True),   # ResNet-50's strided 3x3: 3 rows of 58 columns of 128 channels, 89 KiB
    (256, 28, 2, True),   # 92 KiB
    (512, 56, 1, False),  # 348 KiB: the copy made once
])
def test_a_task_pads_the_rows_it_reads_where_they_fit_128_kib(c, hw, stride, in_task):
    data = te.placeholder((1, c // 16, hw, hw, 16), "float32", "d")
    conv = conv2d_nchwc(data, te.placeholder((c // 16, c, 3, 3, 16), "float32", "w"), (stride, stride), (1,) * 4)
    target = Target("x86_64-unknown-linux-gnu", "cpu", vector_bits=512, cores=2, l2_bytes=1 << 20)
    with decisions({}) as d:
        schedule_conv_nchwc(Schedule(conv), conv, conv, target)
    assert d.seen["conv.pad_in_task"].default == in_task


def test_avx512_dense_convs_block_at_least_7_columns_and_a_14_wide_1x1_reduces_in_registers():
    target = Target("x86_64-unknown-linux-gnu", "cpu", vector_bits=512, cores=2, l1d_bytes=48 << 10)

    def conv(c, hw, k):
        data = te.placeholder((1, c // 32, hw, hw, 32), "float32", "d")
        packed = te.placeholder((c // 32, c, k, k, 32), "float32", "w")
        return conv2d_nchwc(data, packed, (1, 1), (k // 2,) * 4, target=target)
    assert conv(64, 56, 3).op.attrs["xb"] == conv(64, 28, 1).op.attrs["xb"] == 7
    one = conv(256, 14, 1)
    assert one.op.attrs["xb"] == 14 and reduction_chunks(one, target) == ""  # (its weights: 32 KiB)
    assert reduction_chunks(conv(256, 14, 3), target) == "plane"  # a 3x3 keeps its chunks


@pytest.mark.parametrize("c,f,hw,k,chunks", [
    (512, 512, 7, 3, "plane"),    # a small plane
    (1024, 256, 14, 1, "plane"),  # a block's weights overflow L1, the plane's chunk fits it
    (256, 256, 14, 3, "plane"),   # a 3x3 chunk of the 14x14 plane: 38 KiB, within twice L1
    (128, 128, 28, 3, "row"),     # at 28x28: 117 KiB, by rows
    (512, 128, 28, 1, "row"),     # a block's weights fill the L1: chunks of them are reused
    (256, 64, 56, 1, ""),         # a block's weights are half the L1: they stay there
    (64, 256, 56, 1, ""),         # the weights of a block stay in L1 across columns
    (128, 512, 28, 1, ""),
])
def test_the_reduction_is_chunked_by_the_l1_footprint(c, f, hw, k, chunks):
    data = te.placeholder((1, c // 16, hw, hw, 16), "float32", "d")
    packed = te.placeholder((f // 16, c, k, k, 16), "float32", "w")
    conv = conv2d_nchwc(data, packed, (1, 1), (k // 2,) * 4)
    target = Target("x86_64-unknown-linux-gnu", "znver3", vector_bits=256, cores=2, l1d_bytes=32 << 10)
    assert reduction_chunks(conv, target) == chunks


@pytest.mark.parametrize("c,f,vector_bits,chunks", [
    (160, 960, 512, ""),       # AVX-512, a block's weights in L1: the whole reduction in registers
    (960, 160, 512, "plane"),  # a projection's weights overflow L1: the plane, a chunk at a time
    (160, 960, 256, "plane"),  # AVX2 (not measured): the plane
])
def test_a_small_plane_whose_weights_stay_in_l1_reduces_in_registers_on_avx512(c, f, vector_bits, chunks):
    data = te.placeholder((1, c // 16, 7, 7, 16), "float32", "d")
    packed = te.placeholder((f // 16, c, 1, 1, 16), "float32", "w")
    target = Target("x86_64-unknown-linux-gnu", "cpu", vector_bits=vector_bits, cores=2, l1d_bytes=48 << 10)
    conv = conv2d_nchwc(data, packed, target=target)
    conv = conv.op.attrs.get("conv", conv)  # (AVX2: the plane as one row, seen through a view)
    assert conv.op.attrs["flat"] == (vector_bits == 256)
    assert reduction_chunks(conv, target) == chunks


def test_rows_run_outer_over_groups_of_channel_blocks_that_fit_the_l2():
    """A small L2 splits the 4 channel blocks into groups of 2 (a divisor): the row loop runs
    between the groups and their blocks, and the result is unchanged."""
    import dataclasses

    from ember.kernels.conv_nchwc import _weight_group

    target = dataclasses.replace(Target.host(), l2_bytes=160 << 10)  # half: 2 blocks of 36 KiB
    c, f, hw = 64, 64, 10
    sch, args = conv2d_nchwc_nd((1, c // 16, hw, hw, 16), (f // 16, c, 3, 3, 16), (1, 1), (1,) * 4, target=target)
    conv = sch.outputs[0]
    assert _weight_group(conv, target) == 2 and _weight_group(conv, Target.host()) == 4
    x, wt = RNG.standard_normal((1, c, hw, hw)).astype(np.float32), RNG.standard_normal((f, c, 3, 3)).astype(np.float32)
    out = np.zeros((1, f // 16, hw, hw, 16), np.float32)
    ember.build(sch, args, "k")["k"](np.moveaxis(x.reshape(1, c // 16, 16, hw, hw), 2, -1).copy(),
                                     np.moveaxis(wt.reshape(f // 16, 16, c, 3, 3), 1, -1).copy(), out)
    np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(1, f, hw, hw), _conv_ref(x, wt, 1, (1,) * 4),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,h,w,k,s,d,fb,rows", [
    (32, 14, 14, 3, 1, 1, 16, 1),   # MobileNet's 3x3 depthwise (8 tasks of 4 rows: too few)
    (48, 15, 13, 5, 2, 1, 16, 1),   # 5x5 stride 2 (EfficientNet), odd planes: column tails
    (16, 9, 9, 3, 1, 2, 8, 1),      # dilated
    (64, 7, 7, 3, 1, 1, 32, 1),     # a late, small plane; two vectors per block where lanes are 16
    (64, 28, 28, 3, 1, 1, 16, 4),   # enough tasks: 4 output rows per task
    (96, 30, 27, 5, 2, 1, 16, 4),   # 4 rows per task, strided, 15 output rows: a short last task
    (32, 28, 27, 3, 1, 1, 16, 2),   # 2 blocks: 14 tasks of 4 rows too few, 28 of 2
])
def test_depthwise_conv2d_nchwc_matches_numpy(c, h, w, k, s, d, fb, rows):
    """A depthwise conv in the blocked layout: each block's channels filtered by their own
    windows, a task's rows reading the input rows it padded once (4 output rows per task where
    that leaves 8 tasks per core)."""
    p = (d * (k // 2),) * 4
    with decisions() as chosen:
        sch, args = conv2d_nchwc_nd((1, c // fb, h, w, fb), (c // fb, 1, k, k, fb), (s, s), p, (d, d),
                                    grouped=True, target=Target("x86_64-unknown-linux-gnu", "znver3",
                                                                vector_bits=512, cores=2))
    assert chosen.seen["dw.rows"].default == rows
    x, wt = RNG.standard_normal((1, c, h, w)).astype(np.float32), RNG.standard_normal((c, 1, k, k)).astype(np.float32)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    oh, ow = (xp.shape[2] - d * (k - 1) - 1) // s + 1, (xp.shape[3] - d * (k - 1) - 1) // s + 1
    want = np.zeros((1, c, oh, ow))
    for i in range(k):
        for j in range(k):
            win = xp[:, :, i * d:i * d + s * (oh - 1) + 1:s, j * d:j * d + s * (ow - 1) + 1:s]
            want += win * wt[None, :, 0, i, j, None, None]
    xb = np.moveaxis(x.reshape(1, c // fb, fb, h, w), 2, -1).copy()
    wp = np.moveaxis(wt.reshape(c // fb, fb, 1, k, k), 1, -1).copy()
    out = np.zeros((1, c // fb, oh, ow, fb), np.float32)
    ember.build(sch, args, "k")["k"](xb, wp, out)
    np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(want.shape), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,f,k,s,p", [
    (32, 32, 3, 1, 1),   # ResNet's 3x3: the last block of columns reads into padding made for it
    (32, 32, 3, 2, 1),   # strided 3x3
    (32, 16, 1, 2, 0),   # a strided 1x1 with no padding: the last block's reads clamped instead
    (16, 32, 1, 1, 0),   # a pointwise conv
])
def test_a_conv_over_a_symbolic_width_guards_no_fma_and_matches_numpy(c, f, k, s, p):
    """With the width symbolic (an image model exported with dynamic height and width) the
    last block of columns is partial at most sizes: its reads must be proved in bounds, or
    the lowering guards every FMA (ResNet-18 ran 10x slower)."""
    from ember.loop import IfThenElse, Store, Var
    from ember.loop.lower import lower
    from ember.loop.visit import walk

    cb, fb = 16, 16
    h, w = Var("h"), Var("w")
    sch, args = conv2d_nchwc_nd((1, c // cb, h, w, cb), (f // fb, c, k, k, fb), (s, s), (p,) * 4)
    func = lower(sch, args, "k")
    for n in walk(func.body):  # only stores to memory (the write-back, the padded copy) guarded
        if isinstance(n, IfThenElse):
            assert all(st.buffer.scope != "local" for st in walk(n) if isinstance(st, Store)), n
    mod = ember.build(sch, args, "k")
    for hh, ww in ((9, 9), (11, 16), (6, 23)):
        x, wt = RNG.standard_normal((1, c, hh, ww)).astype(np.float32), RNG.standard_normal((f, c, k, k)).astype(np.float32)
        want = _conv_ref(x, wt, s, (p,) * 4)
        xb = np.moveaxis(x.reshape(1, c // cb, cb, hh, ww), 2, -1).copy()
        wp = np.moveaxis(wt.reshape(f // fb, fb, c, k, k), 1, -1).copy()
        out = np.zeros((1, f // fb) + want.shape[2:] + (fb,), np.float32)
        mod["k"](xb, wp, out)
        np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(want.shape), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k,s", [(3, 1), (5, 2)])
def test_a_depthwise_conv_over_a_symbolic_plane_guards_no_fma_and_matches_numpy(k, s):
    """A depthwise conv that reads its padding in place (each tap's load under a select on
    whether it falls in the padding) over a symbolic plane: its tiles of rows and columns run
    past the plane, and the selects keep those reads inside the input -- proved so, no FMA is
    guarded (EfficientNet-B0's with a dynamic height and width ran 2-3x slower guarded)."""
    from ember.loop import IfThenElse, Store, Var
    from ember.loop.lower import lower
    from ember.loop.visit import walk

    c, fb, p = 32, 16, (k // 2,) * 4
    sch, args = conv2d_nchwc_nd((1, c // fb, Var("h"), Var("w"), fb), (c // fb, 1, k, k, fb), (s, s), p,
                                grouped=True)
    for n in walk(lower(sch, args, "k").body):
        if isinstance(n, IfThenElse):
            assert all(st.buffer.scope != "local" for st in walk(n) if isinstance(st, Store)), n
    mod = ember.build(sch, args, "k")
    for h, w in ((9, 9), (14, 11), (23, 6)):
        x, wt = RNG.standard_normal((1, c, h, w)).astype(np.float32), RNG.standard_normal((c, 1, k, k)).astype(np.float32)
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
        oh, ow = (xp.shape[2] - k) // s + 1, (xp.shape[3] - k) // s + 1
        want = np.zeros((1, c, oh, ow))
        for i in range(k):
            for j in range(k):
                want += xp[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s] * wt[None, :, 0, i, j, None, None]
        xb = np.moveaxis(x.reshape(1, c // fb, fb, h, w), 2, -1).copy()
        wp = np.moveaxis(wt.reshape(c // fb, fb, 1, k, k), 1, -1).copy()
        out = np.zeros((1, c // fb, oh, ow, fb), np.float32)
        mod["k"](xb, wp, out)
        np.testing.assert_allclose(np.moveaxis(out, -1, 2).reshape(want.shape), want, rtol=1e-4, atol=1e-4)


def _dilated_conv(d: int, plane, c: int = 32, f: int = 32):
    """A "same" 3x3 conv of rate ``d`` (DeepLab's ASPP) over a (1, c, *plane) input, ``plane``
    ints or symbols: the graph Module and its weights."""
    from ember.graph import Call, Function, Module, Var as GVar, const
    from ember.graph.infer import infer_types
    from ember.graph.types import Dim, TensorType

    wt = RNG.standard_normal((f, c, 3, 3)).astype(np.float32)
    x = GVar("x", TensorType((1, c) + tuple(Dim(p) if isinstance(p, str) else p for p in plane), "float32"))
    conv = Call("nn.conv2d", [x, const(wt)], {"padding": (d, d, d, d), "dilation": (d, d)})
    return infer_types(Module({"main": Function([x], conv)})), wt


def _dilated_reference(a, wt, d: int):
    """numpy's answer for :func:`_dilated_conv` on input ``a`` (in float64)."""
    h, w = a.shape[2:]
    xp = np.pad(a.astype(np.float64), ((0, 0), (0, 0), (d, d), (d, d)))
    want = np.zeros((a.shape[0], wt.shape[0], h, w))
    for i in range(3):
        for j in range(3):
            want += np.einsum("nchw,fc->nfhw", xp[:, :, i * d:i * d + h, j * d:j * d + w], wt[:, :, i, j])
    return want


def _conv_scripts(exe) -> str:
    """The loop programs of ``exe``'s conv kernels (before the loop passes)."""
    from ember.loop.lower import lower

    return "\n".join((fn if args is None else lower(fn, args, name)).script()
                     for fn, args, name in exe.kernel_sources if "conv" in name)


def test_a_dilated_conv_over_a_symbolic_plane_runs_its_center_tap_alone_on_planes_within_its_rate():
    """DeepLab's ASPP with a dynamic height and width: a 3x3 conv of rate d, padded d, over a
    plane no larger than d reads only padding with every tap but the center. Its kernel
    branches on the plane to a variant that computes the center tap alone, unpadded (the
    static compile trims those taps: trim_conv_taps). Exact on both sides of the branch."""
    from ember.loop import IfThenElse

    d = 6
    mod, wt = _dilated_conv(d, ("h", "w"))
    exe = ember.compile(mod)
    funcs = [fn for fn, _, name in exe.kernel_sources if "conv" in name]
    assert any(isinstance(fn.body, IfThenElse) for fn in funcs)
    for h, w in ((4, 6), (6, 5), (9, 7), (13, 13)):
        a = RNG.standard_normal((1, 32, h, w)).astype(np.float32)
        np.testing.assert_allclose(exe.run(a)[0], _dilated_reference(a, wt, d), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("how", ["twin", "static"])
def test_a_dilated_conv_over_a_static_plane_within_its_rate_computes_its_center_tap_alone(how):
    """The same conv over a static plane no larger than its rate: the static twin of a dynamic
    model's kernel at a hinted 5x6 (ember.compiler.twin), or a static model compiled without
    trim_conv_taps. It computes the center tap alone (no padded copy, one tap's FMAs), as its
    symbolic kernel's variant would; exact."""
    d, (h, w) = 6, (5, 6)
    mod, wt = _dilated_conv(d, ("h", "w") if how == "twin" else (h, w))
    if how == "twin":
        exe = ember.compile(mod, shape_hints={"x": (1, 32, h, w)})
    else:
        exe = ember.compile(mod, disabled_passes=["trim_conv_taps"])
    static = _conv_scripts(exe).split("\n    else:\n")[0]  # (the twin's branch comes first)
    # (no padded copy, no loop over the window's taps: ``ry``/``rx``; the columns' write-back
    # may run in threes)
    assert "_pad" not in static and not re.search(r"\br[xy]\w* in serial\(3\)", static), static
    a = RNG.standard_normal((1, 32, h, w)).astype(np.float32)
    np.testing.assert_allclose(exe.run(a)[0], _dilated_reference(a, wt, d), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("symbolic", [False, True])
def test_a_dilated_conv_skips_the_tap_rows_that_read_padding(symbolic):
    """DeepLab's rate-12 ASPP conv over a 14x14 plane: for most output rows two of the three
    tap rows read only padding. The reduction's condition that a tap row lies in the plane is
    hoisted above that row's FMAs (ember.loop.passes.hoist_if), so they are skipped, not
    guarded one by one; exact at planes within and beyond the rate, static and symbolic."""
    from ember.loop.lower import lower
    from ember.loop.passes import default_pipeline
    from ember.loop.stmt import For, IfThenElse
    from ember.loop.visit import walk

    d = 4
    sizes = [(7, 9), (3, 5), (12, 10)] if symbolic else [(7, 9)]
    mod, wt = _dilated_conv(d, ("h", "w") if symbolic else (7, 9))
    exe = ember.compile(mod, disabled_passes=["trim_conv_taps"],
                        shape_hints={"x": (1, 32, 7, 9)} if symbolic else None)
    (src, args, name), = [k for k in exe.kernel_sources if "conv" in k[2]]
    func = default_pipeline(src if args is None else lower(src, args, name))
    guards = [n for n in walk(func.body) if isinstance(n, IfThenElse) and "ry" in str(n.condition)]
    assert guards and all(isinstance(g.then_case, For) for g in guards)  # (above the loops, not in them)
    for h, w in sizes:
        a = RNG.standard_normal((1, 32, h, w)).astype(np.float32)
        np.testing.assert_allclose(exe.run(a)[0], _dilated_reference(a, wt, d), rtol=1e-4, atol=1e-4)
