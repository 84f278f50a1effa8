"""Training-mode ops where their outputs are deterministic: BatchNormalization with the batch's
statistics, Dropout with ratio 0; a Dropout that drops at random stays unsupported."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ember
from ember.errors import UnsupportedOpError


def _model(nodes, inputs, outputs, opset=15):
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs), opset_imports=[h.make_opsetid("", opset)])


def _vi(name, shape, elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, shape)


def test_batch_norm_in_training_mode_uses_the_batch_statistics():
    m = _model([h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                            momentum=0.8, epsilon=1e-3)],
               [_vi("x", [2, 3, 4, 5])] + [_vi(n, [3]) for n in "sbmv"],
               [_vi("y", [2, 3, 4, 5]), _vi("rm", [3]), _vi("rv", [3])])
    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 3.0, (2, 3, 4, 5)).astype(np.float32)
    s, b, mean, var = (rng.uniform(0.5, 1.5, 3).astype(np.float32) for _ in range(4))
    y, rm, rv = ember.compile(m).run(x, s, b, mean, var)
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    c = (slice(None), None, None)
    np.testing.assert_allclose(y, (x - bm[c]) / np.sqrt(bv[c] + 1e-3) * s[c] + b[c], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rm, 0.8 * mean + 0.2 * bm, rtol=1e-5)
    np.testing.assert_allclose(rv, 0.8 * var + 0.2 * bv, rtol=1e-4)


def _dropout():
    return _model([h.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=0)],
                  [_vi("x", [3, 4]), _vi("r", []), _vi("t", [], T.BOOL)], [_vi("y", [3, 4]), _vi("mask", [3, 4], T.BOOL)])


def test_dropout_in_training_mode_with_ratio_zero_keeps_everything():
    exe = ember.compile(_dropout())
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for ratio, training in [(0.0, True), (0.5, False)]:
        y, mask = exe.run(x, np.array(ratio, np.float32), np.array(training))
        np.testing.assert_array_equal(y, x)
        assert mask.dtype == np.bool_ and mask.all()
    with pytest.raises(UnsupportedOpError, match="ratio 0.5 drops elements at random"):
        exe.run(x, np.array(0.5, np.float32), np.array(True))
