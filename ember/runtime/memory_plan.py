"""Static memory planning: intermediate tensors share one arena, reused by liveness.

Each intermediate value lives from the instruction that writes it to the last instruction that
reads it. Values are placed largest first at the lowest offset that does not overlap any
already-placed value whose lifetime overlaps (first fit over sorted gaps), so two values share
bytes only when they are never alive at the same time.
"""
from __future__ import annotations

import dataclasses

ALIGN = 64


@dataclasses.dataclass(frozen=True)
class Interval:
    """A value: ``nbytes`` alive from instruction ``start`` to ``end`` (inclusive)."""

    key: object
    nbytes: int
    start: int
    end: int


@dataclasses.dataclass
class MemoryPlan:
    offsets: dict  # key -> byte offset in the arena
    arena_bytes: int
    total_bytes: int  # what the values would take without reuse

    def summary(self) -> str:
        saved = 100 * (1 - self.arena_bytes / self.total_bytes) if self.total_bytes else 0.0
        return (f"arena {self.arena_bytes / 2**20:.2f} MiB for {len(self.offsets)} intermediate tensors "
                f"of {self.total_bytes / 2**20:.2f} MiB in all ({saved:.0f}% saved by reuse)")


def _round(n: int) -> int:
    return max(ALIGN, -(-n // ALIGN) * ALIGN)


def plan_memory(values: list) -> MemoryPlan:
    """Offsets for ``values`` (a list of :class:`Interval`)."""
    placed: list = []  # (first instruction, last instruction, offset, end offset): plain tuples,
    # as a new size of a dynamic model plans again (a decoder's every step) and this loop is
    # quadratic in the intermediates
    offsets = {}
    order = sorted(values, key=lambda v: (-v.nbytes, v.start))
    for v in order:
        size, start, end = _round(v.nbytes), v.start, v.end
        busy = sorted([(o, e) for s0, e0, o, e in placed if s0 <= end and start <= e0])
        at = 0
        for lo, hi in busy:
            if at + size <= lo:
                break
            if hi > at:
                at = hi
        placed.append((start, end, at, at + size))
        offsets[v.key] = at
    arena = max((e for _, _, _, e in placed), default=0)
    return MemoryPlan(offsets, arena, sum(_round(v.nbytes) for v in values))


__all__ = ["Interval", "MemoryPlan", "plan_memory"]
