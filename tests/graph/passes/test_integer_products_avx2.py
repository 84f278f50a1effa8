"""Integer products on a CPU without VNNI: AVX2's pmaddubsw pair (``dot_u8i7x4``), exact only
for weights none of whose pairs can sum past int16 with uint8 data, so taken only for them
(7-bit weights, as ORT's ``reduce_range`` writes them); full-range weights run on pmaddwd,
exact too (``dot_i16x2``): a product's rows widened to int16 by their producer, a conv's
words by the conv's copy of its input. The kernels are built for an AVX2 CPU (Haswell) and run
on this host."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import ember
from ember.codegen.llvm import emit_llvm
from ember.driver import lower_kernel
from ember.loop.passes import default_pipeline
from ember.target import Target

HASWELL = "llvm -mcpu=haswell"
pytestmark = pytest.mark.skipif("avx2" not in Target.host().feature_set, reason="runs AVX2 code")
RNG = np.random.default_rng(17)


def _model(nodes, inputs, inits):
    g = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", TP.UNDEFINED, None)],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


def _dot_kernels(exe, dot: str = "dot_u8i7x4", insn: str = "pmadd.ub.sw") -> int:
    """Kernels that run ``dot`` and whose LLVM IR calls ``insn`` (pmaddubsw by default)."""
    target = Target.from_string(HASWELL)
    n = 0
    for s, a, name in exe.kernel_sources:
        f = default_pipeline(s) if hasattr(s, "script") else lower_kernel(s, a, name)
        if dot in f.script():
            n += insn in emit_llvm(f, target)
    return n


def _pairwise_kernels(exe) -> int:
    return _dot_kernels(exe)


def _widened_kernels(exe) -> int:
    """Kernels that run full-range weights on pmaddwd: a product's over rows its producer
    widened to int16 (``dot_i16x2``), or over words a kernel widens itself (``dot_u8i8x4``)."""
    return _dot_kernels(exe, "dot_i16x2", "pmadd.wd") + _dot_kernels(exe, "dot_u8i8x4", "pmadd.wd") \
        - _dot_kernels(exe, "dot_u8i8x4", "pmadd.ub.sw")


def _qdq(op, wq, sw, w_axis, sx, zx, **attrs):
    """Nodes and initializers of ``op`` over QDQ data (scale ``sx``, zero ``zx``) and weights
    ``wq`` dequantized per channel along ``w_axis``."""
    inits = {"w": wq, "sw": sw, "zw": np.zeros(len(sw), np.int8), "sx": np.array(sx, np.float32),
             "zx": np.array(zx, np.uint8)}
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=w_axis),
             h.make_node(op, ["xd", "wd"], ["y"], **attrs)]
    return nodes, inits


def _qdq_matmul(wq, K, N):
    sw = (RNG.random(N) * 0.02 + 0.001).astype(np.float32)
    nodes, inits = _qdq("MatMul", wq, sw, 1, 0.05, 131)
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, ["n", K])], inits)
    x = RNG.standard_normal((29, K)).astype(np.float32)
    xq = np.clip(np.round(x / np.float32(0.05)) + 131, 0, 255)
    ref = ((xq - 131) * np.float32(0.05)).astype(np.float32) @ (wq * sw).astype(np.float32)
    return m, x, ref


@pytest.mark.parametrize("top,pairwise", [(64, True), (128, False)])
def test_seven_bit_weights_run_on_pmaddubsw_and_full_range_ones_on_pmaddwd(top, pairwise):
    K, N = 96, 40
    wq = RNG.integers(-top, top, (K, N)).astype(np.int8)
    if not pairwise:
        wq[0, 0], wq[1, 0] = 127, 127  # (a pair that 255 * 254 would saturate)
    m, x, ref = _qdq_matmul(wq, K, N)
    exe = ember.compile(m, target=HASWELL)
    assert (_pairwise_kernels(exe), _widened_kernels(exe)) == ((1, 0) if pairwise else (0, 1))
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("high,low,pairwise", [(64, -64, True), (127, -128, False)])
def test_the_worst_pairs_are_exact(high, low, pairwise):
    """Against data at 255: pairs at pmaddubsw's bound (128 = 64 + 64; -128), and full-range
    ones past it (which pmaddubsw would saturate, so pmaddwd runs them): exact int32 sums."""
    K, N = 64, 24
    wq = np.where(RNG.random((K, N)) < 0.5, high, low).astype(np.int8)
    m, _, _ = _qdq_matmul(wq, K, N)
    exe = ember.compile(m, target=HASWELL)
    assert (_pairwise_kernels(exe), _widened_kernels(exe)) == ((1, 0) if pairwise else (0, 1))
    x = np.full((3, K), 1e3, np.float32)  # (quantized to 255)
    sw = nh.to_array(next(i for i in m.graph.initializer if i.name == "sw"))
    ref = ((255 - 131) * np.float32(0.05)) * (np.ones((3, K)) @ (wq.astype(np.float64) * sw))
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-5, atol=1e-4)


def _conv_ref(xd, wd, stride, pad):
    """The float conv of ``xd`` (N C H W) by ``wd`` (F C kh kw), in float64."""
    F, _, kh, kw = wd.shape
    xp = np.pad(xd.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (xp.shape[2] - kh) // stride + 1, (xp.shape[3] - kw) // stride + 1
    return sum(np.einsum("nchw,fc->nfhw", xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride], wd[:, :, i, j])
               for i in range(kh) for j in range(kw))


# (C, F, window, stride, padding, H, W): a 3x3 conv, a stem's three channels read as four, an
# unpadded 1x1 conv (its copy made only to widen), a strided 1x1 conv from many channels (its
# subsampled copy widens: from 256 words, 512 channels)
CONVS = [(32, 24, 3, 1, 1, 9, 10), (3, 64, 7, 2, 3, 20, 18), (48, 16, 1, 1, 0, 5, 6), (512, 32, 1, 2, 0, 8, 8)]


@pytest.mark.parametrize("top", [64, 128])
@pytest.mark.parametrize("C,F,k,stride,pad,H,W", CONVS)
def test_a_qdq_conv_runs_blocked_on_pmaddubsw_or_pmaddwd(top, C, F, k, stride, pad, H, W):
    """7-bit weights on pmaddubsw; full-range ones on pmaddwd over int16 pairs (``dot_i16x2``),
    the data's words widened as the conv copies them, the weights at compile time."""
    wq = RNG.integers(-top, top, (F, C, k, k)).astype(np.int8)
    if top == 128:
        wq[:, :2] = 127  # (pairs past int16 in every filter)
    sw = (RNG.random(F) * 0.01 + 0.001).astype(np.float32)
    nodes, inits = _qdq("Conv", wq, sw, 0, 0.04, 100, pads=[pad] * 4, strides=[stride] * 2)
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, C, H, W])], inits)
    exe = ember.compile(m, target=HASWELL)
    if top == 64:
        assert _pairwise_kernels(exe) == 1
    else:
        assert (_pairwise_kernels(exe), _dot_kernels(exe, "dot_i16x2", "pmadd.wd")) == (0, 1)
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32) * 3
    x[..., 0, :] = 1e3  # (a row quantized to 255: the largest pair sums)
    xd = (np.clip(np.round(x / np.float32(0.04)) + 100, 0, 255) - 100) * np.float32(0.04)
    ref = _conv_ref(xd, wq * sw[:, None, None, None].astype(np.float64), stride, pad)
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("pad,zx", [(0, 100), (0, 37), (1, 100)])
def test_an_unpadded_conv_pads_with_zero_whatever_its_zero_point(pad, zx):
    """The pad value of a conv without padding is never read (the columns a tile reads past a
    row's end make outputs it does not store): 0, so that convs of every zero point share their
    kernels; a padded one pads with its zero point's bytes."""
    from ember.graph.ir import Call
    from ember.graph.visit import post_order

    C, F = 32, 24
    wq = RNG.integers(-128, 128, (F, C, 2 * pad + 1, 2 * pad + 1)).astype(np.int8)
    sw = (RNG.random(F) * 0.01 + 0.001).astype(np.float32)
    nodes, inits = _qdq("Conv", wq, sw, 0, 0.04, zx, pads=[pad] * 4)
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, C, 7, 9])], inits)
    exe = ember.compile(m, target=HASWELL, wait=True, cache=False)
    convs = [c for _, f in exe.graph.functions for c in post_order(f) if isinstance(c, Call) and c.op == "nn.conv2d_nchwc"]
    assert [c.attr("pad_value") for c in convs] == [int(np.array([zx] * 4, np.uint8).view(np.int32)[0]) if pad else 0]
    x = RNG.standard_normal((1, C, 7, 9)).astype(np.float32) * 3
    xd = (np.clip(np.round(x / np.float32(0.04)) + zx, 0, 255) - zx) * np.float32(0.04)
    ref = _conv_ref(xd, wq * sw[:, None, None, None].astype(np.float64), 1, pad)
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("split", [False, True])
def test_a_pmaddwd_conv_runs_at_tier0(split):
    """Tier 0's shape-generic kernels take a conv over int16 pairs with its block static (the
    copy that widens the words needs it): the same sums as tier 1."""
    from ember.codegen.llvm import build_made
    from ember.compiler.executable import Executable
    from ember.compiler.tier0 import call_sizes, constant_params, remap_program, tier0_kernels

    C, F = 32, 48
    wq = RNG.integers(-128, 128, (F, C, 3, 3)).astype(np.int8)
    wq[:, :2] = 127
    nodes, inits = _qdq("Conv", wq, (RNG.random(F) * 0.01 + 0.001).astype(np.float32), 0, 0.04, 100, pads=[1] * 4)
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, C, 12, 11])], inits)
    exe = ember.compile(m, target=HASWELL, wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=split, sizes=call_sizes(exe.program))
    t0 = Executable(build_made(jobs, exe.target), remap_program(exe.program, chosen), exe.constants)
    assert all(c["kernel"].startswith("tier0_") for c in t0.program["calls"])
    x = RNG.standard_normal((1, C, 12, 11)).astype(np.float32) * 3
    np.testing.assert_array_equal(t0.run(x)[0], exe.run(x)[0])


def test_saturating_int8_runs_full_range_weights_on_pmaddubsw_as_ort_does():
    """``saturating_int8=True``: full-range weights on pmaddubsw too, each pair of products along
    K summed in int16 with saturation (as ORT's MLAS and oneDNN run them without VNNI): the
    sums of a numpy model of the instruction, which differ from the exact ones."""
    K, N = 64, 24
    wq = np.where(RNG.random((K, N)) < 0.5, 127, -128).astype(np.int8)
    m, _, _ = _qdq_matmul(wq, K, N)
    exe = ember.compile(m, target=HASWELL, saturating_int8=True)
    assert (_pairwise_kernels(exe), _widened_kernels(exe)) == (1, 0)
    x = RNG.standard_normal((3, K)).astype(np.float32) * 4
    x[0] = 1e3  # (a row quantized to 255: pairs of 127s saturate)
    xq = np.clip(np.round(x / np.float32(0.05)) + 131, 0, 255).astype(np.int64)
    pairs = xq[:, 0::2, None] * wq[None, 0::2].astype(np.int64) + xq[:, 1::2, None] * wq[None, 1::2].astype(np.int64)
    sums = np.clip(pairs, -32768, 32767).sum(axis=1) - 131 * wq.astype(np.int64).sum(axis=0)
    sw = nh.to_array(next(i for i in m.graph.initializer if i.name == "sw"))
    ref = np.float32(0.05) * sums * sw.astype(np.float64)
    exact = np.float32(0.05) * ((xq - 131) @ wq.astype(np.int64)) * sw.astype(np.float64)
    assert np.abs(ref - exact).max() > 1e-2  # (the data saturates)
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-5, atol=1e-4)


def test_saturating_int8_takes_pmaddubsw_for_a_full_range_conv():
    C, F = 32, 24
    wq = RNG.integers(-128, 128, (F, C, 3, 3)).astype(np.int8)
    wq[:, :2] = 127
    sw = (RNG.random(F) * 0.01 + 0.001).astype(np.float32)
    nodes, inits = _qdq("Conv", wq, sw, 0, 0.04, 100, pads=[1] * 4)
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, C, 9, 10])], inits)
    exe = ember.compile(m, target=HASWELL, saturating_int8=True)
    assert (_pairwise_kernels(exe), _dot_kernels(exe, "dot_i16x2", "pmadd.wd")) == (1, 0)
    # (codes 75-125: no pair reaches past int16, 2 * 125 * 128 < 32767)
    x = np.clip(RNG.standard_normal((1, C, 9, 10)) * 0.5, -1, 1).astype(np.float32)
    xd = (np.clip(np.round(x / np.float32(0.04)) + 100, 0, 255) - 100) * np.float32(0.04)
    ref = _conv_ref(xd, wq * sw[:, None, None, None].astype(np.float64), 1, 1)
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-4, atol=1e-3)


def test_a_depthwise_conv_whose_weights_a_later_pass_scaled_reads_the_codes():
    """A per-channel multiply after a QDQ depthwise conv is folded into its weights after the
    constants were folded (EfficientNet's: a product of constants, not a constant): the conv
    still reads the uint8 codes, which its producer writes as bytes, not floats."""
    from onnx.reference import ReferenceEvaluator

    from ember.driver import lower_kernel

    from .test_integer_products import conv_then_depthwise

    C, k = 32, 3
    inits = {"w1": RNG.integers(-64, 64, (C, 16, 1, 1)).astype(np.int8), "s1": np.full(C, 0.02, np.float32),
             "w2": RNG.integers(-127, 128, (C, 1, k, k)).astype(np.int8),
             "s2": (RNG.random(C) * 0.01 + 0.001).astype(np.float32), "z": np.zeros(C, np.int8),
             "sx": np.array(0.04, np.float32), "zx": np.array(0, np.uint8), "sy": np.array(0.05, np.float32),
             "zy": np.array(9, np.uint8), "g": (RNG.random((1, C, 1, 1)) + 0.5).astype(np.float32)}
    nodes = conv_then_depthwise(C, k, out="y2") + [h.make_node("Mul", ["y2", "g"], ["y"])]
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, 16, 12, 13])], inits)
    exe = ember.compile(m, target=HASWELL)
    scripts = [s.script() if hasattr(s, "script") else lower_kernel(s, a, n).script() for s, a, n in exe.kernel_sources]
    depthwise = [s for s in scripts if "nn_conv2d_nchwc_pad" in s and "dot_" not in s]
    assert depthwise and all(s[:s.index("p1:")].endswith('"uint8", align=1), ') for s in depthwise)
    x = RNG.standard_normal((1, 16, 12, 13)).astype(np.float32) * 3
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    step = 0.05 * np.abs(inits["w2"] * inits["s2"][:, None, None, None] * inits["g"].reshape(C, 1, 1, 1)).max()
    assert np.abs(exe.run(x)[0] - ref).max() <= step * 1.01
