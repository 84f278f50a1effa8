"""Knobs: defaults outside tuning, the tuner's values inside; any decisions of the conv and
GEMM schedules compute what the default computes (property-based, against numpy)."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember.kernels.common import host
from ember.kernels.conv_nchwc import conv2d_nchwc_nd
from ember.kernels.matmul import matmul
from ember.loop.knobs import decisions, knob


def test_knob_is_its_default_outside_tuning():
    assert knob("x", (1, 2, 3), 2) == 2


def test_knob_takes_the_decision_and_records_the_space():
    with decisions({"x": 3, "y": 99}) as d:
        assert knob("x", (1, 2, 3), 2) == 3
        assert knob("y", (1, 2), 1) == 1  # not a choice: the default
        assert knob("z", (5,), 4) == 4  # the default joins the choices
    assert d.seen["x"].choices == (1, 2, 3) and d.seen["z"].choices == (4, 5)
    assert json.loads(d.to_json()) == {"x": 3, "y": 1, "z": 4}


def test_a_model_compiled_inside_decisions_is_scheduled_by_them(small_model):
    """``ember.compile`` inside ``decisions``: every group schedules under them, in its compile
    job too (another process), and the kernels are not the default's cached ones -- an A/B of
    a knob over a whole model compared two identical builds before."""
    x = np.random.default_rng(0).standard_normal((1, 16, 28, 28)).astype(np.float32)
    plain = ember.compile(small_model, cache=False)
    with decisions({"conv.columns": 1}):
        chosen = ember.compile(small_model, cache=False)
    assert chosen.module.path != plain.module.path and chosen.tuned_kernels == []
    traces = [[s.trace.to_json() for s, _, _ in e.kernel_sources_thunk() if hasattr(s, "trace")]
              for e in (plain, chosen)]
    assert traces[0] and traces[0] != traces[1]
    np.testing.assert_allclose(chosen.run(x)[0], plain.run(x)[0], rtol=1e-4, atol=1e-4)


def _conv_ref(x, w, stride, pad):
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, f, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return out


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_conv_decisions_compute_the_convolution(data):
    target = host()
    lanes = target.fp32_lanes
    fb = 2 * lanes
    C, F, H, k, stride = 8, 2 * fb, 10, 3, data.draw(st.sampled_from([1, 2]))
    with decisions({}) as d:
        conv2d_nchwc_nd((1, C, H, H), (F // fb, C, k, k, fb), (stride, stride), (1, 1, 1, 1), target=target)
    values = {name: data.draw(st.sampled_from(kn.choices), label=name) for name, kn in d.seen.items()}
    with decisions(values):
        s, args = conv2d_nchwc_nd((1, C, H, H), (F // fb, C, k, k, fb), (stride, stride), (1, 1, 1, 1),
                                  target=target)
    mod = ember.build(s, args, "conv")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    w = rng.standard_normal((F, C, k, k)).astype(np.float32)
    packed = np.ascontiguousarray(w.reshape(F // fb, fb, C, k, k).transpose(0, 2, 3, 4, 1))
    oh = (H + 2 - k) // stride + 1
    out = np.zeros((1, F // fb, oh, oh, fb), np.float32)
    mod["conv"](x, packed, out)
    got = out.transpose(0, 1, 4, 2, 3).reshape(1, F, oh, oh)
    np.testing.assert_allclose(got, _conv_ref(x, w, stride, 1), rtol=1e-4, atol=1e-4)


def _check_depthwise(H: int, k: int, stride: int, draw) -> None:
    """A depthwise conv (2 channel blocks, ``H`` x 9) under the decisions ``draw(name, knob)``
    picks, against numpy, blocked input and output."""
    target = host()
    fb = target.fp32_lanes
    blocks, W = 2, 9
    pad = k // 2
    shapes = ((1, blocks, H, W, fb), (blocks, 1, k, k, fb), (stride, stride), (pad, pad, pad, pad))
    with decisions({}) as d:
        conv2d_nchwc_nd(*shapes, target=target, grouped=True)
    assert "dw.unroll" in d.seen
    values = {name: draw(name, kn) for name, kn in d.seen.items()}
    with decisions(values):
        s, args = conv2d_nchwc_nd(*shapes, target=target, grouped=True)
    mod = ember.build(s, args, "dw")
    rng = np.random.default_rng(1)
    C = blocks * fb
    x = rng.standard_normal((1, C, H, W)).astype(np.float32)
    w = rng.standard_normal((C, 1, k, k)).astype(np.float32)
    xb = np.ascontiguousarray(x.reshape(1, blocks, fb, H, W).transpose(0, 1, 3, 4, 2))
    packed = np.ascontiguousarray(w.reshape(blocks, fb, k, k).transpose(0, 2, 3, 1)[:, None])
    oh, ow = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    out = np.zeros((1, blocks, oh, ow, fb), np.float32)
    mod["dw"](xb, packed, out)
    got = out.transpose(0, 1, 4, 2, 3).reshape(1, C, oh, ow)
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ref = np.zeros((1, C, oh, ow))
    for i in range(k):
        for j in range(k):
            ref += xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride] * w[None, :, 0, i, j, None, None]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_depthwise_decisions_compute_the_convolution(data):
    # every decision of the depthwise schedule (rows per task, loop order, padding, columns,
    # the window's taps unrolled) against numpy
    H, k = data.draw(st.sampled_from([7, 10]), label="H"), data.draw(st.sampled_from([3, 5]), label="k")
    stride = data.draw(st.sampled_from([1, 2]), label="stride")
    _check_depthwise(H, k, stride, lambda name, kn: data.draw(st.sampled_from(kn.choices), label=name))


@pytest.mark.parametrize("H,k,stride,unroll", [(7, 3, 1, "none"), (10, 5, 2, "none"), (10, 3, 2, "window"),
                                                (7, 5, 1, "window"), (10, 5, 1, "columns")])
def test_a_depthwise_conv_reads_its_padding_in_place(H, k, stride, unroll):
    # dw.pad "inline": no padded copy; each tap's load is guarded where it falls in the padding
    _check_depthwise(H, k, stride, lambda name, kn: {"dw.pad": "inline", "dw.unroll": unroll}.get(name, kn.default))


def test_a_strided_depthwise_conv_over_a_large_plane_reads_its_padding_in_place():
    def chosen(hw, stride, target):
        with decisions({}) as d:
            conv2d_nchwc_nd((1, 4, hw, hw, 16), (4, 1, 3, 3, 16), (stride, stride), (1, 1, 1, 1), target=target,
                            grouped=True)
        return d.seen["dw.pad"].default, d.seen["dw.unroll"].default
    avx512, avx2 = "llvm -mcpu=skylake-avx512", "llvm -mcpu=znver3"
    assert chosen(112, 2, avx512) == chosen(112, 2, avx2) == ("inline", "window")  # a 56x56 output
    assert chosen(112, 1, avx2) == chosen(14, 2, avx2) == ("task", "none")  # stride 1; a 7x7 output
    # on AVX-512 those read it in place too, the window's columns unrolled
    assert chosen(112, 1, avx512) == chosen(14, 2, avx512) == ("inline", "columns")


def test_a_wide_depthwise_window_on_avx512_reads_its_padding_in_place_its_columns_unrolled():
    def chosen(k, stride, target, hw=28):
        with decisions({}) as d:
            conv2d_nchwc_nd((1, 4, hw, hw, 16), (4, 1, k, k, 16), (stride, stride), (k // 2,) * 4, target=target,
                            grouped=True)
        return tuple(d.seen[n].default for n in ("dw.pad", "dw.unroll", "dw.rows", "conv.columns"))
    avx512, avx2 = "llvm -mcpu=skylake-avx512", "llvm -mcpu=znver3"
    assert chosen(5, 1, avx512) == chosen(7, 1, avx512, 56) == ("inline", "columns", 1, 7)  # 28 and 56 in 7s
    assert chosen(7, 1, avx512, 7) == ("inline", "columns", 1, 7)
    assert chosen(3, 1, avx2)[:2] == chosen(5, 1, avx2)[:2] == ("task", "none")  # AVX2
    assert chosen(3, 1, avx512) == ("inline", "columns", 4, 4)  # 3x3: rows and columns as with a copy
    assert chosen(5, 2, avx512)[:2] == ("inline", "window")  # strided: its own rule


def test_a_grouped_conv_unrolls_its_window_columns_on_avx512_narrow_groups_padding_rows_per_task():
    def chosen(g, stride, target):
        with decisions({}) as d:
            conv2d_nchwc_nd((1, 4, 56, 56, 16), (4, g, 3, 3, 16), (stride, stride), (1,) * 4, target=target,
                            grouped=True)
        return d.seen["dw.pad"].default, d.seen["dw.unroll"].default
    avx512, avx2 = "llvm -mcpu=skylake-avx512", "llvm -mcpu=znver3"
    assert chosen(8, 2, avx512) == chosen(4, 1, avx512) == chosen(16, 1, avx512) == ("task", "columns")
    assert chosen(16, 2, avx512) == chosen(1, 2, avx512) == ("inline", "window")  # whole vectors, depthwise
    assert chosen(8, 1, avx2) == ("task", "none")
    assert chosen(4, 2, avx2) == ("task", "none")  # narrower than AVX2's 8 lanes too


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_gemm_decisions_compute_the_product(data):
    M, N, K = 37, 70, 29
    with decisions({}) as d:
        matmul(M, N, K)
    values = {name: data.draw(st.sampled_from(kn.choices), label=name) for name, kn in d.seen.items()}
    with decisions(values):
        s, args = matmul(M, N, K)
    mod = ember.build(s, args, "mm")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    mod["mm"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
