"""Schedules of the row computations (``kernels.norm.schedule_rows``): softmax, log-softmax,
layer and instance norm, Lp normalization. Rows run in parallel, each row's statistics are
computed inside its iteration (the row stays in L1) with vectorized reductions, and the
output (with any epilogue) is written once, vectorized.

Local response normalization is elementwise over its output, with a sum of squares over a
window of channels: that sum is computed for one output row at a time, inside the row's
parallel iteration, vectorized along the row."""
from __future__ import annotations

from ....kernels.common import vector_lanes
from ....kernels.elementwise import schedule_elementwise
from ....kernels.norm import schedule_rows
from ....loop import compute as te
from ....loop.schedule import Schedule
from ..registry import set_schedule

ROW_OPS = ("nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.instance_norm", "nn.lp_normalize")


def _rows(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
    schedule_rows(s, anchor, out, target)


def _lrn(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
    if out is not anchor:
        s[anchor].compute_inline()  # elementwise over the sums: it runs as the epilogue's input
    schedule_elementwise(s, out, target)  # outer axes fused and parallel, the row vectorized
    if out.ndim < 3:  # (N, C): the channels are the row; the sum stays a loop of its own
        return
    so = s[out]
    sq = s[anchor.op.attrs["sq"]]
    sq.compute_at(so, so.leaf[0])  # inside the fused outer loop: one row of the output
    *spatial, r = sq.leaf
    sq.reorder(*spatial[:-1], r, spatial[-1])
    _, lanes = sq.split(spatial[-1], factor=vector_lanes(target, anchor.dtype))
    sq.vectorize(lanes)


for _op in ROW_OPS:
    set_schedule(_op, "llvm", _rows)
set_schedule("nn.lrn", "llvm", _lrn)
