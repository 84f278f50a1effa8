"""Schedules of the linear NN ops: convolutions (also transposed), ``nn.dense``, ``nn.matmul``.

Convolutions use the register-blocked direct schedule (``kernels.conv.schedule_conv``, or
``kernels.conv_nchwc.schedule_conv_nchwc`` in the blocked channel layout); a
product uses the schedule of the computation its compute chose (``attrs["kind"]``): packed
GEMM, dot products of rows, or -- with a vector operand -- a plain reduction.
"""
from __future__ import annotations

from ....kernels.common import const_int
from ....kernels.conv import schedule_conv
from ....kernels.conv_nchwc import schedule_conv_nchwc
from ....kernels.gpu import schedule_gpu_product
from ....kernels.matmul import schedule_dot, schedule_gemm
from ....loop import compute as te
from ....loop.schedule import Schedule
from ..nn import _NDIM_NAME
from ..registry import set_schedule


def schedule_product(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
    """``nn.dense`` / ``nn.matmul``: the schedule of the computation kind the compute chose."""
    kind = anchor.op.attrs.get("kind")
    if kind == "gemm":
        schedule_gemm(s, anchor, out, target)
    elif kind == "dot":
        schedule_dot(s, anchor, out, target)
    else:
        schedule_direct(s, anchor, out, target)


def schedule_direct(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
    """A product with a vector operand (memory-bound): outputs in parallel, each reduced in
    a register inside the output's loop."""
    so = s[out]
    spatial = [iv for iv in so.leaf if iv.kind == "spatial"]
    if out is not anchor and spatial:
        s[anchor].compute_at(so, spatial[-1])
    if spatial and (const_int(spatial[0].extent) or 2) > 1:
        so.parallel(spatial[0])


def _conv(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
    schedule_conv(s, anchor, out, target)


for _s in _NDIM_NAME.values():
    set_schedule(f"nn.conv{_s}", "llvm", _conv)
    set_schedule(f"nn.conv{_s}_transpose", "llvm", _conv)
set_schedule("nn.conv2d_nchwc", "llvm", schedule_conv_nchwc)
set_schedule("nn.dense", "llvm", schedule_product)
set_schedule("nn.matmul", "llvm", schedule_product)
set_schedule("nn.matmul_packed", "llvm", schedule_product)
set_schedule("nn.matmul_nbits", "llvm", schedule_product)
set_schedule("nn.matmul_nbits_packed", "llvm", schedule_product)


def _gpu_product(row_axis, rows: int, cols: int):
    """The GPU's register-tiled schedule (:func:`ember.kernels.gpu.schedule_gpu_product`); the
    group's other stages keep the generic one where it does not apply."""
    def sched(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
        axis = row_axis if row_axis >= 0 else len(out.shape) + row_axis
        for st in list(s.stages):  # (a padded input: read where the product reads it)
            if (not st.is_placeholder and st.attach[0] == "root" and not st.is_output and st.tensor is not anchor
                    and not isinstance(st.body, te.Reduce)):
                st.compute_inline()
        schedule_gpu_product(s, anchor, out, axis, rows, cols)
    return sched


for _s in ("1d", "2d", "3d"):  # (NC<spatial>: a filter's weights shared by every pixel it makes)
    set_schedule(f"nn.conv{_s}", "cuda", _gpu_product(1, 8, 1))
set_schedule("nn.dense", "cuda", _gpu_product(-2, 4, 4))
set_schedule("nn.matmul", "cuda", _gpu_product(-2, 4, 4))
