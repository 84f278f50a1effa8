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
