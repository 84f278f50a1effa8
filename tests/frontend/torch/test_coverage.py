"""The coverage report (bench/torch_ops.py) and the converter table's names."""
import torch

from ember.frontend.torch.coverage import coverage
from ember.frontend.torch.table import supported_targets


def test_every_aten_target_of_the_table_is_an_operator_of_this_torch():
    missing = []
    for name in supported_targets():
        if not name.startswith("aten."):
            continue
        _, packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
        if op is None:
            missing.append(name)
    assert missing == []  # (a name no operator has would never match a node: a dead converter)


def test_the_report_partitions_the_core_operators():
    cov = coverage()
    parts = [cov[k] for k in ("converted", "training", "random", "out=", "missing")]
    assert sorted(sum(parts, [])) == cov["core"]
    assert len(cov["core"]) > 150
    # every core op an inference graph can use converts, except these (complex numbers, data-
    # dependent scalars, strides, sparse bags and samplers)
    assert len(cov["converted"]) >= 0.9 * (len(cov["core"]) - len(cov["training"]) - len(cov["random"]))
    assert "aten.convolution.default" in cov["converted"] and "aten.convolution_backward.default" in cov["training"]
