"""Products by weights dequantized from a few bits (a DequantizeLinear of int4/uint4/int8
constants feeding a MatMul, as ONNX Runtime's weight-only quantizer writes it in its QDQ
format) keep their codes: ``nn.matmul_nbits``, decoded in the GEMM. Against numpy's product
by the dequantized weights."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import ember
from ember.driver import lower_kernel

RNG = np.random.default_rng(11)


def _nbits_kernels(exe) -> int:
    return sum("matmul_nbits" in n for _, _, n in exe.kernel_sources)


def _model(K, N, q, kind, scale, zero, block, axis=0, rows="n"):
    """x (1, rows, K) @ DequantizeLinear(q, scale, zero) -> y, with q of ONNX type ``kind``."""
    inits = [h.make_tensor("q", kind, q.shape, q.reshape(-1).tolist()), nh.from_array(scale, "s")]
    ins = ["q", "s"]
    if zero is not None:
        inits.append(h.make_tensor("z", kind, zero.shape, zero.reshape(-1).tolist()))
        ins.append("z")
    attrs = {"axis": axis} | ({"block_size": block} if block else {})
    nodes = [h.make_node("DequantizeLinear", ins, ["w"], **attrs), h.make_node("MatMul", ["x", "w"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [1, rows, K])],
                     [h.make_tensor_value_info("y", TP.UNDEFINED, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


def _check(m, K, w, rows=(1, 5, 37)):
    exe = ember.compile(m)
    for r in rows:
        x = RNG.standard_normal((1, r, K)).astype(np.float32)
        ref = x @ w
        np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    return exe


@pytest.mark.parametrize("kind,lo,hi,zero,block,K", [(TP.INT4, -8, 8, False, 32, 128), (TP.UINT4, 0, 16, True, 32, 96),
                                                     (TP.INT4, -8, 8, True, 16, 80), (TP.UINT8, 0, 256, True, 64, 128)])
def test_blocked_dequantization_keeps_its_codes(kind, lo, hi, zero, block, K):
    N = 40
    blocks = -(-K // block)
    q = RNG.integers(lo, hi, (K, N))
    s = (RNG.random((blocks, N)) * 0.05 + 0.01).astype(np.float32)
    z = RNG.integers(lo, hi, (blocks, N)) if zero else None
    m = _model(K, N, q, kind, s, z, block)
    rep = np.arange(K) // block
    w = ((q - (z[rep] if zero else 0)) * s[rep]).astype(np.float32)
    exe = _check(m, K, w)
    assert _nbits_kernels(exe) >= 1


def test_per_column_int8_weights_keep_their_codes():
    K, N = 72, 24
    q = RNG.integers(-128, 128, (K, N))
    s = (RNG.random(N) * 0.05 + 0.01).astype(np.float32)
    m = _model(K, N, q, TP.INT8, s, None, 0, axis=1)
    exe = _check(m, K, (q * s).astype(np.float32))
    assert _nbits_kernels(exe) >= 1


def test_blocks_along_the_columns_are_left_to_folding():
    K, N = 64, 64
    q = RNG.integers(-8, 8, (K, N))
    s = (RNG.random((K, N // 16)) * 0.05 + 0.01).astype(np.float32)
    m = _model(K, N, q, TP.INT4, s, None, 16, axis=1, rows=3)
    exe = _check(m, K, (q * np.repeat(s, 16, axis=1)).astype(np.float32), rows=(3,))
    assert _nbits_kernels(exe) == 0


def test_the_decoding_is_inside_the_product():
    """The product's kernel reads the codes (uint8) and no kernel writes float weights."""
    K, N = 64, 32
    q = RNG.integers(-8, 8, (K, N))
    s = (RNG.random((2, N)) * 0.05 + 0.01).astype(np.float32)
    exe = ember.compile(_model(K, N, q, TP.INT4, s, None, 32))
    (src,) = [(s_, a, n) for s_, a, n in exe.kernel_sources if "matmul_nbits" in n]
    script = lower_kernel(*src).script() if not hasattr(src[0], "script") else src[0].script()
    assert "uint8" in script and "matmul_nbits" in script
    assert len(exe.kernel_sources) == 1


@pytest.mark.parametrize("rows", [2, 9, "n"])
def test_the_stored_layout_runs_unpacked(rows):
    """Without the packing pass (opt level 1) MatMulNBits's product reads the codes in their
    stored layout, packing its panels per call from them (or, for a few rows, in place)."""
    K, N, block = 64, 24, 32
    q = RNG.integers(0, 16, (N, K)).astype(np.uint8)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8).reshape(N, K // block, block // 2)
    s = (RNG.random((N, K // block)) * 0.05 + 0.01).astype(np.float32)
    node = h.make_node("MatMulNBits", ["x", "b", "s"], ["y"], domain="com.microsoft", K=K, N=N, bits=4,
                       block_size=block)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", TP.FLOAT, [1, rows, K])],
                     [h.make_tensor_value_info("y", TP.UNDEFINED, None)],
                     [nh.from_array(packed, "b"), nh.from_array(s.reshape(-1), "s")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 21), h.make_opsetid("com.microsoft", 1)])
    exe = ember.compile(m, opt_level=1)
    assert _nbits_kernels(exe) == 1
    w = ((q.astype(np.float32) - 8) * np.repeat(s, block, axis=1)).T
    x = RNG.standard_normal((1, 9 if rows == "n" else rows, K)).astype(np.float32)
    np.testing.assert_allclose(exe.run(x)[0], x @ w, rtol=1e-4, atol=1e-4)
