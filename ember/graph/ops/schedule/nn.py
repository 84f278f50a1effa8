"""Schedules of the row computations (``kernels.norm.schedule_rows``): softmax, log-softmax,
layer and instance norm, Lp normalization. Rows run in parallel, each row's statistics are
computed inside its iteration (the row stays in L1) with vectorized reductions, and the
output (with any epilogue) is written once, vectorized."""
from __future__ import annotations

from ....kernels.norm import schedule_rows
from ....loop import compute as te
from ....loop.schedule import Schedule
from ..registry import set_schedule

ROW_OPS = ("nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.instance_norm", "nn.lp_normalize")


def _rows(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
    schedule_rows(s, anchor, out, target)


for _op in ROW_OPS:
    set_schedule(_op, "llvm", _rows)
