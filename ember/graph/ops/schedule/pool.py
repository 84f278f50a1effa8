"""Schedules of the pooling ops (``kernels.pool``): window pools reduce a vector of windows in
registers with the padded plane of each (n, c) computed in cache; global pools reduce each
plane with per-lane partials."""
from __future__ import annotations

from ....kernels.pool import schedule_global_pool, schedule_pool
from ....loop import compute as te
from ....loop.schedule import Schedule
from ..nn import _NDIM_NAME
from ..registry import set_schedule


def _pool(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
    schedule_pool(s, anchor, out, target)


def _global_pool(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
    schedule_global_pool(s, anchor, out, target)


for _s in _NDIM_NAME.values():
    for _kind in ("max", "avg", "lp"):
        set_schedule(f"nn.{_kind}_pool{_s}", "llvm", _pool)
    for _kind in ("max", "avg"):
        set_schedule(f"nn.global_{_kind}_pool{_s}", "llvm", _global_pool)
