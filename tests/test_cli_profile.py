"""``ember profile`` end to end on a small ONNX model."""
import csv
import json

import pytest

from ember.cli import main


def test_profile_prints_the_top_kernels_and_writes_files(conv_net_path, tmp_path, capsys):
    model = conv_net_path
    files = {k: str(tmp_path / f"p.{k}") for k in ("csv", "json", "trace")}
    assert main(["profile", model, "--top", "2", "--warmup", "1", "--repeat", "2", "--csv", files["csv"],
                 "--json", files["json"], "--trace", files["trace"]]) == 0
    out = capsys.readouterr().out
    assert "Ember kernel profile: convnet (top 2 of" in out and "Conv_0+BatchNormalization_1+Relu_2" in out
    assert "after 1 warm-up run(s)" in out and "end-to-end" in out
    assert len(list(csv.DictReader(open(files["csv"])))) >= 3
    assert json.load(open(files["json"]))["repeat"] == 2
    assert json.load(open(files["trace"]))["traceEvents"]


def test_profile_by_op_type(conv_net_path, capsys):
    assert main(["profile", conv_net_path, "--group-by", "op", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "one row per op" in out and "conv2d" in out and "dense" in out


def test_profile_needs_one_model(capsys):
    with pytest.raises(SystemExit):
        main(["profile"])
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    assert "warm-up" in capsys.readouterr().out


def test_loops_of_a_kernel_named_by_a_prefix_and_a_name_that_is_none(conv_net_path, capsys):
    assert main(["profile", conv_net_path, "--repeat", "1", "--warmup", "1", "--loops", "--loop-kernel",
                 "fused_conv"]) == 0
    assert "loop instrumentation overhead" in capsys.readouterr().out
    assert main(["profile", conv_net_path, "--repeat", "1", "--loops", "--loop-kernel", "no_such_kernel"]) == 2
    err = capsys.readouterr().err
    assert "is no kernel of this model" in err and "fused_conv" in err


def test_profile_marks_the_kernels_a_backend_runs(tmp_path, capsys):
    """``--offload reference``: the example backend takes the blocked convolutions, rows marked."""
    import onnx

    from offload.test_reference import _model

    path = str(tmp_path / "blocked.onnx")
    onnx.save(_model(), path)
    assert main(["profile", path, "--repeat", "1", "--warmup", "1", "--offload", "reference", "--top", "0",
                 "--csv", str(tmp_path / "p.csv")]) == 0
    rows = list(csv.DictReader(open(tmp_path / "p.csv")))
    assert sum(r["kernel"].endswith(" [reference]") for r in rows) == 3, [r["kernel"] for r in rows]
