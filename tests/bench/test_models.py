"""``ember bench`` on a small ONNX model: every requested peer is timed or skipped with a note,
the outputs are compared, the JSON parses. (The figures themselves belong to the benchmarks.)"""
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ember.bench import peers
from ember.bench.models import main


def _conv_model(path):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_every_peer_is_timed_or_skipped_with_a_note(tmp_path, capsys):
    model = _conv_model(tmp_path / "small.onnx")
    out = tmp_path / "figures.json"
    assert main([model, "--vs", "onnxruntime", "--vs", "openvino", "--vs", "tvm", "--repeat", "2",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    (row,) = json.loads(out.read_text())
    assert row["model"] == "small.onnx" and row["median_ms"]["ember"] > 0
    for peer in ("onnxruntime", "openvino", "tvm"):
        if peer in row["median_ms"]:  # installed: timed, its ratio printed, outputs compared
            assert f"ember/{peer}" in text and f"max abs difference to {peer}" in text
            assert row[f"ratio_{peer}"] > 0
        else:
            assert f"{peer} is not installed: skipped ({peers.INSTALL[peer]})" in text
