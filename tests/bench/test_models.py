"""``ember bench`` on a small ONNX model: every requested peer is timed or skipped with a note,
the outputs are compared, the JSON parses. (The figures themselves belong to the benchmarks.)"""
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ember.bench import peers
from ember.bench.models import main


def _conv_model(path, batch=1):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16, 8, 8])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_every_peer_is_timed_or_skipped_with_a_note(tmp_path, capsys):
    model = _conv_model(tmp_path / "small.onnx")
    out = tmp_path / "figures.json"
    # (each runtime alone in a process of its own: the default)
    assert main([model, "--vs", "onnxruntime", "--vs", "openvino", "--vs", "tvm", "--repeat", "2",
                 "--rounds", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    (row,) = json.loads(out.read_text())
    assert row["model"] == "small.onnx" and row["median_ms"]["ember"] > 0
    for peer in ("onnxruntime", "openvino", "tvm"):
        if peer in row["median_ms"]:  # installed: timed, its ratio printed, outputs compared
            assert f"ember/{peer}" in text and f"max abs difference to {peer}" in text
            assert row[f"ratio_{peer}"] > 0
        else:
            assert f"{peer} is not installed: skipped ({peers.INSTALL[peer]})" in text


def test_ember_with_offload_auto_is_a_runtime_of_its_own(tmp_path, capsys):
    """``--vs ember_auto``: the choice measured once in a process of its own and kept (the
    timed processes take it), its outputs compared with Ember alone's; skipped with a note
    without a backend."""
    import os

    from ember.config import cache_dir

    model = _conv_model(tmp_path / "small.onnx")
    out = tmp_path / "figures.json"
    assert main([model, "--vs", "ember_auto", "--repeat", "2", "--rounds", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    (row,) = json.loads(out.read_text())
    if "ember_auto" not in row["median_ms"]:
        assert f"ember_auto is not installed: skipped ({peers.INSTALL['ember_auto']})" in text
        return
    assert "max abs difference to ember_auto" in text and row["ratio_ember_auto"] > 0
    assert any(f.startswith("auto-") for f in os.listdir(os.path.join(cache_dir(), "index")))


def test_a_model_with_a_symbolic_batch_runs_at_one_or_the_shape_given(tmp_path, capsys):
    model = _conv_model(tmp_path / "dynamic.onnx", batch="batch")
    assert main([model, "--in-process", "--repeat", "2"]) == 0
    assert "symbolic dims set to 1: x ('batch', 3, 8, 8) -> (1, 3, 8, 8)" in capsys.readouterr().out
    out = tmp_path / "figures.json"
    assert main([model, "--in-process", "--repeat", "2", "--input-shape", "x=3,3,8,8", "--json", str(out)]) == 0
    assert "symbolic dims" not in capsys.readouterr().out and json.loads(out.read_text())[0]["median_ms"]["ember"] > 0


def test_in_process_timing_and_a_zoo_name_that_does_not_exist(tmp_path, capsys):
    import pytest

    model = _conv_model(tmp_path / "small.onnx")
    assert main([model, "--in-process", "--repeat", "2"]) == 0
    text = capsys.readouterr().out
    assert "ember/onnxruntime" in text or "onnxruntime is not installed" in text
    with pytest.raises(SystemExit):
        main(["--zoo", "no_such_model"])
    assert "no zoo model 'no_such_model'" in capsys.readouterr().err


def test_a_runtime_alone_in_a_child_process(tmp_path):
    from ember.bench.isolated import time_isolated

    model = _conv_model(tmp_path / "small.onnx")
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    res = time_isolated(model, feeds, ["ember", "onnxruntime"], threads=2, rounds=1, repeat=3)
    assert res["ember"]["median"] > 0 and res["ember"]["shape"] == [1, 16, 8, 8]
    # each round knows where the cores were (2 cores in CI: a round trip was measured)
    (rnd,) = res["ember"]["rounds"]
    assert len(rnd["round_trips"]) == 2 and rnd["placement"] in ("near", "far", None)
    if "skipped" in res["onnxruntime"]:  # (CI installs the test extra only)
        assert "not installed" in res["onnxruntime"]["skipped"]
        return
    # the same outputs in both children (up to float rounding)
    assert abs(res["ember"]["checksum"] - res["onnxruntime"]["checksum"]) <= 1e-4 * res["ember"]["checksum"]


def test_light_models_get_random_weights_unless_asked_to_keep_theirs(tmp_path, monkeypatch, capsys):
    """The light models' weights are splat constants (0.02): benchmarks time them with random
    weights by default; a model file named keeps its own unless --random-weights."""
    import ember.bench.models as models

    timed = []
    monkeypatch.setattr(models, "bench_model", lambda path, *a, **k: timed.append(path) or {"model": path})
    mine = str(tmp_path / "mine.onnx")
    _conv_model(mine)
    assert main(["--light", "squeezenet", mine, "--repeat", "1"]) == 0
    assert timed[0] == mine and timed[1].endswith("squeezenet_random.onnx")
    assert "light models with random weights" in capsys.readouterr().err
    w = {i.name for i in onnx.load(timed[1]).graph.initializer}
    assert w and not any(n.op_type == "ConstantOfShape" for n in onnx.load(timed[1]).graph.node)
    timed.clear()
    assert main(["--light", "squeezenet", mine, "--splat-weights", "--random-weights", "--repeat", "1"]) == 0
    assert timed[0].endswith("mine_random.onnx") and timed[1] == models.light_path("squeezenet")
