"""Quantization ops against onnx's reference evaluator on random data: per-tensor, per-axis
and blocked scales, a QDQ convolution as quantization tools write it, and the integer and
quantized-linear products."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import ember


def _check(model, feeds, exact=True):
    want = ReferenceEvaluator(model).run(None, feeds)
    got = ember.compile(model).run(**feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _model(nodes, inputs, outputs, inits=(), opset=21):
    g = h.make_graph(nodes, "q", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                     [h.make_tensor_value_info(n, t, None) for n, t in outputs], list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("zp_type, axis, block", [(T.UINT8, 1, 0), (T.INT8, 1, 0), (T.INT16, 0, 0),
                                                    (T.INT8, 1, 2), (T.UINT8, 2, 3)])
def test_quantize_then_dequantize(zp_type, axis, block):
    shape = (2, 4, 5)
    x = (RNG.standard_normal(shape) * 40).astype(np.float32)
    if block:
        sshape = tuple(-(-d // block) if k == axis else d for k, d in enumerate(shape))
    else:
        sshape = (shape[axis],)
    scale = RNG.uniform(0.1, 0.5, sshape).astype(np.float32)
    npz = {T.UINT8: np.uint8, T.INT8: np.int8, T.INT16: np.int16}[zp_type]
    zp = RNG.integers(0, 10, sshape).astype(npz)
    inits = [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "z")]
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=axis, block_size=block),
             h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=axis, block_size=block)]
    _check(_model(nodes, [("x", T.FLOAT, shape)], [("q", zp_type), ("y", T.FLOAT)], inits), {"x": x})


def test_a_qdq_convolution_as_quantizers_write_it():
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    ws = (np.abs(w).reshape(4, -1).max(1) / 127).astype(np.float32)
    wq = np.clip(np.rint(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
             numpy_helper.from_array(np.array(128, np.uint8), "xz"),
             numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(ws, "ws"),
             numpy_helper.from_array(np.zeros(4, np.int8), "wz")]
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             h.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
             h.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["y"])]
    _check(_model(nodes, [("x", T.FLOAT, x.shape)], [("y", T.FLOAT)], inits, opset=19), {"x": x}, exact=False)


def test_dynamic_quantize_and_integer_products():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    nodes = [h.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])]
    _check(_model(nodes, [("x", T.FLOAT, x.shape)], [("q", T.UINT8), ("s", T.FLOAT), ("z", T.UINT8)], opset=11),
           {"x": x})
    a = RNG.integers(0, 255, (3, 4)).astype(np.uint8)
    b = RNG.integers(-128, 127, (4, 5)).astype(np.int8)
    nodes = [h.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])]
    inits = [numpy_helper.from_array(np.array(3, np.uint8), "az"),
             numpy_helper.from_array(RNG.integers(-3, 3, 5).astype(np.int8), "bz")]
    _check(_model(nodes, [("a", T.UINT8, a.shape), ("b", T.INT8, b.shape)], [("y", T.INT32)], inits, opset=19),
           {"a": a, "b": b})
    xq = RNG.integers(0, 255, (1, 2, 6, 6)).astype(np.uint8)
    wq = RNG.integers(0, 255, (3, 2, 3, 3)).astype(np.uint8)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "xs"), numpy_helper.from_array(np.array(120, np.uint8), "xz"),
             numpy_helper.from_array(wq, "w"), numpy_helper.from_array(np.array([0.01, 0.02, 0.03], np.float32), "ws"),
             numpy_helper.from_array(np.array(128, np.uint8), "wz"), numpy_helper.from_array(np.array(0.9, np.float32), "ys"),
             numpy_helper.from_array(np.array(10, np.uint8), "yz"),
             numpy_helper.from_array(RNG.integers(-100, 100, 3).astype(np.int32), "b")]
    nodes = [h.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1])]
    _check(_model(nodes, [("x", T.UINT8, xq.shape)], [("y", T.UINT8)], inits, opset=19), {"x": xq})
