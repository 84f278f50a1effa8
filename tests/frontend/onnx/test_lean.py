"""Reading an ONNX file with its large weights straight into arrays (``lean.load_lean``): the
same model and weights as ``onnx.load``, and ``onnx.load``'s answer for what it does not expect."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.errors import ModelError
from ember.frontend.onnx import lean
from ember.frontend.onnx.checks import load_model_lean

RNG = np.random.default_rng(0)


def _model(path, big=(512, 600), external=False):
    """x @ W (W large, >= 1 MB) + b (small), then a Reshape by a constant shape."""
    w = RNG.standard_normal(big).astype(np.float32)
    b = RNG.standard_normal(big[1]).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Reshape", ["a", "s"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array(np.array([2, -1], np.int64), "s")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, big[0]])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2 * big[1]])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    if external:
        onnx.save(m, str(path), save_as_external_data=True, location="w.bin", size_threshold=1024)
    else:
        onnx.save(m, str(path))
    return str(path), w, b


def test_large_weights_are_read_apart_and_equal(tmp_path):
    path, w, b = _model(tmp_path / "m.onnx")
    proto, arrays = lean.load_lean(path)
    assert set(arrays) == {"w"} and arrays["w"].dtype == np.uint8
    np.testing.assert_array_equal(arrays["w"].view(np.float32).reshape(w.shape), w)
    full = onnx.load(path)
    t = {i.name: i for i in proto.graph.initializer}
    assert not t["w"].raw_data and list(t["w"].dims) == list(w.shape)  # (the message keeps dims, not data)
    np.testing.assert_array_equal(numpy_helper.to_array(t["b"]), b)
    assert [n.SerializeToString() for n in proto.graph.node] == [n.SerializeToString() for n in full.graph.node]
    assert proto.opset_import == full.opset_import and proto.graph.output == full.graph.output
    x = RNG.standard_normal((4, 512)).astype(np.float32)
    np.testing.assert_allclose(ember.compile(path, wait=True).run(x)[0], (x @ w + b).reshape(2, -1),
                               rtol=1e-4, atol=1e-3)


def test_what_the_lean_reader_does_not_expect_goes_to_onnx_load(tmp_path):
    path, w, _ = _model(tmp_path / "e.onnx", external=True)  # (external data: onnx.load reads it)
    proto, arrays = lean.load_lean(path)
    assert arrays == {} and np.array_equal(numpy_helper.to_array(proto.graph.initializer[0]), w)
    x = RNG.standard_normal((4, 512)).astype(np.float32)
    assert ember.compile(path, wait=True).run(x)[0].shape == (2, 1200)


def test_a_truncated_file_is_a_model_error(tmp_path):
    path, _, _ = _model(tmp_path / "t.onnx")
    data = open(path, "rb").read()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="cannot be read"):
        load_model_lean(str(cut))
    with pytest.raises(ModelError):
        ember.compile(str(cut))
