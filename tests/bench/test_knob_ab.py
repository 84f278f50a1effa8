"""bench/knob_ab.py: knob values compared over a whole model, call by call."""
import importlib.util
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _knob_ab():
    spec = importlib.util.spec_from_file_location("knob_ab", os.path.join(ROOT, "bench", "knob_ab.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _two_convs(path):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.1, n)
             for n, s in [("w1", (32, 16, 3, 3)), ("w2", (32, 32, 1, 1))]]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 14, 14])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 14, 14])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_knob_applies_to_the_convolutions_its_filter_names(tmp_path, capsys):
    model = _two_convs(str(tmp_path / "m.onnx"))
    ab = _knob_ab()
    assert ab.main([model, "{}", '{"conv.columns": 1}', "--rounds", "2", "--weights", "16,3,3"]) == 0
    out, err = capsys.readouterr()
    assert '{"conv.columns": 1}: 1 kernel(s) so scheduled' in err  # the 3x3 one, not the 1x1
    rows = [line for line in out.splitlines() if "conv2d_nchwc" in line]
    assert len(rows) == 1 and rows[0].rstrip().endswith("x") and "all calls:" in out
