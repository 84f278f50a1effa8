"""The generic GPU schedule: a stage's output elements spread over a grid of thread blocks.

Every root stage of a fused group (its output, and each reduction or materialized value
before it) gets its spatial loops fused into one and split into blocks of
:data:`BLOCK_THREADS` threads, one thread an element; a reduction's loops run in that thread.
Elementwise and injective stages are inlined into their readers first, as on the CPU. It is
the schedule every op family has until a faster one is registered for it
(``set_schedule(op, "cuda", fn)``): correct for any group, and the base the checks (ptxas, and
the CPU execution of :mod:`ember.loop.passes.threads_on_cpu`) cover.
"""
from __future__ import annotations

from ..loop import compute as te
from ..loop.schedule import Schedule
from .common import const_int

BLOCK_THREADS = 256  # a block's threads: 8 warps, within every architecture's limits

__all__ = ["BLOCK_THREADS", "schedule_gpu_root"]


def schedule_gpu_root(s: Schedule, t: te.Tensor, threads: int = BLOCK_THREADS) -> None:
    """Bind stage ``t``'s spatial loops to ``block_x`` x ``thread_x`` (see the module doc)."""
    st = s[t]
    spatial = [iv for iv in st.leaf if iv in t.op.axis]
    if not spatial:
        return  # (a 0-d value: one thread of one block computes it)
    fused = st.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    n = const_int(fused.extent)
    if n is not None and n < threads:
        threads = max(1, n)  # (a small value: one block of just its threads)
    blocks, lanes = st.split(fused, factor=threads)
    st.bind(blocks, "block_x")
    st.bind(lanes, "thread_x")
