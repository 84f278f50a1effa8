"""Quantized products by int8 weights on uint8 x int8 kernels, against numpy's exact integer
products and the float reference of the QDQ form."""
import re

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import ember
from ember.driver import lower_kernel
from ember.target import Target

pytestmark = pytest.mark.skipif(not {"avx512vnni", "avxvnni"} & Target.host().feature_set,
                                reason="the integer products need VNNI on the host")
RNG = np.random.default_rng(7)


def _model(nodes, inputs, inits, out="y"):
    g = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info(out, TP.UNDEFINED, None)],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


def _dots(exe) -> int:
    return sum("dot_u8i8x4" in (s.script() if hasattr(s, "script") else lower_kernel(s, a, n).script())
               for s, a, n in exe.kernel_sources)


@pytest.mark.parametrize("adtype", [np.uint8, np.int8])
def test_matmul_integer_is_exact_with_a_runtime_zero_point(adtype):
    K, N = 64, 40
    w = RNG.integers(-128, 128, (K, N)).astype(np.int8)
    m = _model([h.make_node("MatMulInteger", ["a", "w", "za"], ["y"])],
               [h.make_tensor_value_info("a", TP.UINT8 if adtype == np.uint8 else TP.INT8, ["b", 7, K]),
                h.make_tensor_value_info("za", TP.UINT8 if adtype == np.uint8 else TP.INT8, [])], {"w": w})
    exe = ember.compile(m)
    assert _dots(exe) == 1
    info = np.iinfo(adtype)
    a = RNG.integers(info.min, info.max + 1, (3, 7, K)).astype(adtype)
    za = np.array(info.max // 3, adtype)
    ref = (a.astype(np.int64) - int(za)) @ w.astype(np.int64)
    np.testing.assert_array_equal(exe.run(a, za)[0], ref)


def test_a_qdq_product_with_per_channel_weights_runs_on_integers():
    K, N = 96, 48
    wq = RNG.integers(-127, 128, (K, N)).astype(np.int8)
    sw = (RNG.random(N) * 0.02 + 0.001).astype(np.float32)
    inits = {"w": wq, "sw": sw, "zw": np.zeros(N, np.int8), "sx": np.array(0.05, np.float32),
             "zx": np.array(131, np.uint8), "bias": RNG.standard_normal(N).astype(np.float32)}
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=1),
             h.make_node("MatMul", ["xd", "wd"], ["p"]), h.make_node("Add", ["p", "bias"], ["y"])]
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, ["n", K])], inits)
    exe = ember.compile(m)
    assert _dots(exe) == 1
    x = RNG.standard_normal((33, K)).astype(np.float32)
    xq = np.clip(np.round(x / 0.05) + 131, 0, 255)
    ref = ((xq - 131) * np.float32(0.05)).astype(np.float32) @ (wq * sw).astype(np.float32) + inits["bias"]
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-5, atol=1e-4)


def test_weights_with_a_zero_point_keep_the_float_product():
    K, N = 32, 16
    wq = RNG.integers(0, 256, (K, N)).astype(np.uint8)
    inits = {"w": wq, "sw": np.array(0.01, np.float32), "zw": np.array(128, np.uint8)}
    m = _model([h.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"]), h.make_node("MatMul", ["x", "wd"], ["y"])],
               [h.make_tensor_value_info("x", TP.FLOAT, [5, K])], inits)
    exe = ember.compile(m)
    assert _dots(exe) == 0
    x = RNG.standard_normal((5, K)).astype(np.float32)
    np.testing.assert_allclose(exe.run(x)[0], x @ ((wq.astype(np.float32) - 128) * 0.01), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("adtype,stride,pad,blocked,C", [(np.uint8, 1, 1, True, 32), (np.int8, 2, 1, True, 32),
                                                        (np.uint8, 1, 0, True, 32), (np.uint8, 1, 1, False, 32),
                                                        (np.uint8, 2, 1, True, 3)])
def test_a_qdq_conv_runs_on_integers_with_its_padding_at_the_zero_point(adtype, stride, pad, blocked, C):
    """(Three channels: a stem's, read as one word of four per pixel, with a window wide enough
    to pay for blocking its input.)"""
    F, k = 48, (5 if C == 3 else 3)
    wq = RNG.integers(-127, 128, (F, C, k, k)).astype(np.int8)
    sw = (RNG.random(F) * 0.01 + 0.001).astype(np.float32)
    zx = 100 if adtype == np.uint8 else -20
    inits = {"w": wq, "sw": sw, "zw": np.zeros(F, np.int8), "sx": np.array(0.04, np.float32),
             "zx": np.array(zx, adtype)}
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=0),
             h.make_node("Conv", ["xd", "wd"], ["y"], pads=[pad] * 4, strides=[stride] * 2)]
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, C, 11, 13])], inits)
    exe = ember.compile(m, disabled_passes=() if blocked else ["block_layout"])
    assert _dots(exe) == (1 if blocked else 0)  # (unblocked: the plain int32 kernel)
    x = RNG.standard_normal((1, C, 11, 13)).astype(np.float32)
    info = np.iinfo(adtype)
    xd = (np.clip(np.round(x / np.float32(0.04)) + zx, info.min, info.max) - zx) * np.float32(0.04)
    wd = wq * sw[:, None, None, None]
    ref = _conv(xd.astype(np.float32), wd.astype(np.float32), stride, pad)
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-4, atol=1e-4)


def _conv(x, w, stride, pad):
    """numpy's cross-correlation of x (1, C, H, W) with w (F, C, kh, kw)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    F, C, kh, kw = w.shape
    oh, ow = (x.shape[2] - kh) // stride + 1, (x.shape[3] - kw) // stride + 1
    out = np.zeros((1, F, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i: i + stride * oh: stride, j: j + stride * ow: stride]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return out


def conv_then_depthwise(C: int, k: int, stride: int = 1, out: str = "y") -> list:
    """The nodes of a QDQ 1x1 conv (weights ``w1``, scales ``s1``) into a QDQ depthwise conv
    (``w2``, ``s2``) of ``C`` channels, ``k`` x ``k``: the data's scale and zero point ``sx``,
    ``zx``, the first output's ``sy``, ``zy``, the weights' zero points ``z``."""
    return [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
            h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
            h.make_node("DequantizeLinear", ["w1", "s1", "z"], ["w1d"], axis=0),
            h.make_node("Conv", ["xd", "w1d"], ["y1"]),
            h.make_node("QuantizeLinear", ["y1", "sy", "zy"], ["y1q"]),
            h.make_node("DequantizeLinear", ["y1q", "sy", "zy"], ["y1d"]),
            h.make_node("DequantizeLinear", ["w2", "s2", "z"], ["w2d"], axis=0),
            h.make_node("Conv", ["y1d", "w2d"], [out], pads=[k // 2] * 4, strides=[stride] * 2, group=C)]


@pytest.mark.parametrize("adtype,stride,C,k", [(np.uint8, 1, 32, 3), (np.int8, 2, 48, 3), (np.int8, 1, 16, 5)])
def test_a_qdq_depthwise_conv_reads_the_codes(adtype, stride, C, k):
    """After an integer conv (blocked, its output quantized), a QDQ depthwise conv reads the
    uint8 codes themselves, widened as they are padded (at the zero point), its float sums of
    the integer products exact; int8 codes are moved to uint8, their zero point with them."""
    from onnx.reference import ReferenceEvaluator

    info = np.iinfo(adtype)
    z1 = 3 if adtype == np.uint8 else -7
    inits = {"w1": RNG.integers(-127, 128, (C, 32, 1, 1)).astype(np.int8), "s1": np.full(C, 0.02, np.float32),
             "w2": RNG.integers(-127, 128, (C, 1, k, k)).astype(np.int8),
             "s2": (RNG.random(C) * 0.01 + 0.001).astype(np.float32),
             "z": np.zeros(C, np.int8), "sx": np.array(0.04, np.float32), "zx": np.array(0, adtype),
             "sy": np.array(0.05, np.float32), "zy": np.array(z1, adtype)}
    m = _model(conv_then_depthwise(C, k, stride), [h.make_tensor_value_info("x", TP.FLOAT, [1, 32, 12, 13])], inits)
    exe = ember.compile(m)
    scripts = [s.script() if hasattr(s, "script") else lower_kernel(s, a, n).script() for s, a, n in exe.kernel_sources]
    depthwise = [s for s in scripts if "nn_conv2d_nchwc_pad" in s and "dot_u8i8x4" not in s]
    assert depthwise and all(s[:s.index("p1:")].endswith('"uint8", align=1), ') for s in depthwise)
    x = RNG.standard_normal((1, 32, 12, 13)).astype(np.float32) * 3
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = exe.run(x)[0]
    # (a product's rounding to the middle code may differ by one step: 0.05 times a weight)
    step = 0.05 * np.abs(inits["w2"].astype(np.float32) * inits["s2"][:, None, None, None]).max()
    assert np.abs(got - ref).max() <= step * 1.01
    assert np.mean(np.abs(got - ref) > 1e-4) < 0.01
    assert info.min < z1 < info.max


@pytest.mark.parametrize("adtype", [np.uint8, np.int8])
def test_a_max_pool_of_dequantized_values_pools_the_codes(adtype):
    """(Blocked after an integer conv: its vectors no wider than the block of 8-bit codes.)"""
    from onnx.reference import ReferenceEvaluator

    inits = {"w": RNG.integers(-127, 128, (32, 32, 1, 1)).astype(np.int8), "sw": np.full(32, 0.01, np.float32),
             "zw": np.zeros(32, np.int8), "s": np.array(0.05, np.float32), "z": np.array(3, adtype)}
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             h.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=0),
             h.make_node("Conv", ["d", "wd"], ["c"]),
             h.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "s", "z"], ["cd"]),
             h.make_node("MaxPool", ["cd"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"]), h.make_node("DequantizeLinear", ["pq", "s", "z"], ["y"])]
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, 32, 12, 12])], inits)
    exe = ember.compile(m)
    pools = [s for s in (s.script() if hasattr(s, "script") else lower_kernel(s, a, n).script()
                         for s, a, n in exe.kernel_sources) if "max_pool" in s]
    assert pools and all(s[:s.index("p1:")].endswith(f'"{np.dtype(adtype).name}", align=1), ') for s in pools)
    assert all("predicate" not in s for s in pools)
    x = RNG.standard_normal((1, 32, 12, 12)).astype(np.float32) * 3
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = exe.run(x)[0]
    assert np.mean(got != ref) < 0.01 and np.abs(got - ref).max() <= 0.05 * 1.01


@pytest.mark.parametrize("adtype", [np.uint8, np.int8])
def test_a_quantizer_after_a_max_pool_quantizes_its_input_and_the_pool_takes_the_codes(adtype):
    """(Ember's quantizer writes the pair after ResNet's pool, before the conv that reads it.)"""
    from onnx.reference import ReferenceEvaluator

    inits = {"w": RNG.integers(-127, 128, (32, 32, 1, 1)).astype(np.int8), "sw": np.full(32, 0.01, np.float32),
             "zw": np.zeros(32, np.int8), "s": np.array(0.05, np.float32), "z": np.array(3, adtype)}
    nodes = [h.make_node("Relu", ["x"], ["r"]),
             h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"]), h.make_node("DequantizeLinear", ["pq", "s", "z"], ["pd"]),
             h.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=0),
             h.make_node("Conv", ["pd", "wd"], ["y"])]
    m = _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, 32, 12, 12])], inits)
    exe = ember.compile(m)
    pools = [s for s in (s.script() if hasattr(s, "script") else lower_kernel(s, a, n).script()
                         for s, a, n in exe.kernel_sources) if "max_pool" in s]
    assert pools and all(re.search(r'p0: Buffer\([^"]*"u?int8"', s) for s in pools), pools  # (it reads bytes)
    x = RNG.standard_normal((1, 32, 12, 12)).astype(np.float32) * 3
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-5, atol=1e-4)
