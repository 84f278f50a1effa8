"""One process-wide cache of arenas, lent to runs of every executable.

A run borrows an arena (its intermediates' memory) for the time it runs and gives it back
after. Why one cache for the process and not an arena per executable: where an arena lands in
memory sets how fast a whole run goes. Measured on a 2-core Zen 4 VM, four compiles of one
MobileNetV2 in one process, each with an arena of its own, ran alternately: the fourth was
6-8% slower every time (a fresh arena made it fast and another one slow), though the code,
weights and memory plans were the same. Lent the same arena, all four ran within 1% of each
other. So two executables compared in one process (a tuned kernel set against the untuned one,
the PyTorch import against the ONNX one) are compared on the same memory, and a process that
loads several models keeps the arenas that its concurrent runs need, not one per model.

The cache hands a run the arena it had last time where that one is free and large enough
(its views and pointers stay valid), else the free arena given back most recently that is
large enough, else a new one; an arena its run outgrew is dropped. It keeps at most
:data:`KEEP` free arenas, dropping the smallest.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional

import numpy as np

KEEP = 4  # free arenas kept: enough for the concurrent runs of a few models on a small host
GROWTH = 1.5  # an outgrown arena's successor is this much larger (see ArenaCache.take)


class ArenaCache:
    """Free arenas (uint8 numpy arrays) shared by every run in the process."""

    def __init__(self, keep: int = KEEP):
        self.keep = keep
        self._free: list = []
        self._lock = threading.Lock()
        self.made = 0  # arenas allocated so far (a steady state makes none)

    def take(self, nbytes: int, make: Callable[[int], np.ndarray], prefer: Optional[np.ndarray] = None) -> np.ndarray:
        """An arena of at least ``nbytes`` for one run to use alone until it is given back:
        ``prefer`` if it is free and large enough, else the free one given back last that is,
        else ``make(size)``: of ``nbytes``, or :data:`GROWTH` times ``prefer``'s size where the
        caller outgrew it (a sequence that grows a little each run -- a decoder's past -- then
        gets a new arena every so many runs, not every run: a new arena is memory the kernels
        fault in page by page)."""
        size = nbytes
        with self._lock:
            free = self._free
            pick = next((i for i, a in enumerate(free) if a is prefer), None) if prefer is not None else None
            if pick is not None and free[pick].nbytes < nbytes:
                # the caller outgrew its arena (a larger symbol value): drop it rather than keep
                # one more arena per size a dynamic model has run at
                size = max(nbytes, int(free.pop(pick).nbytes * GROWTH))
                pick = None
            if pick is None:
                pick = next((i for i in range(len(free) - 1, -1, -1) if free[i].nbytes >= nbytes), None)
            if pick is not None:
                return free.pop(pick)
            self.made += 1
        if size > nbytes:
            try:
                return make(size)
            except Exception:  # (the room to grow did not fit in memory: the size asked for may)
                pass
        return make(nbytes)

    def give(self, arena: np.ndarray) -> None:
        """Give back an arena: no run may touch it after this."""
        with self._lock:
            self._free.append(arena)
            if len(self._free) > self.keep:
                self._free.pop(min(range(len(self._free)), key=lambda i: self._free[i].nbytes))

    @property
    def free_bytes(self) -> int:
        with self._lock:
            return sum(a.nbytes for a in self._free)

    @property
    def free(self) -> int:
        with self._lock:
            return len(self._free)

    def clear(self) -> None:
        """Drop the free arenas (their memory goes once no view of them is left)."""
        with self._lock:
            self._free.clear()


ARENAS = ArenaCache()

__all__ = ["ARENAS", "ArenaCache", "KEEP"]
