"""Concurrent runs of one Executable: private intermediate memory per run, and how runs share
the cores.

Each run needs the arena (the memory plan's buffer of intermediates) to itself: two runs
writing one arena give both callers wrong answers. A :class:`RunPool` keeps a free list of
:class:`RunState` s -- the slot values that point into an arena and the native runner's
pointer table -- and hands one to each run, which borrows an arena from the process-wide cache
(:mod:`ember.runtime.arenas`) for as long as it runs. So a steady state of N concurrent callers
allocates nothing but the outputs, and the arenas held are those of the runs in flight plus a
few free ones, however many models the process has loaded.

Sharing the cores. Every parallel loop opens an OpenMP region of ``threads_per_run`` threads
(where the run executes: :mod:`ember.runtime.lanes`). Two runs
that each open a 2-thread region on 2 cores oversubscribe them: libgomp's workers spin while
they wait, and both runs slow down far more than 2x. So at most ``max_concurrent_runs`` runs
execute at once (default: cores // threads_per_run, which is 1 with the default of all cores
per run); further callers wait, without holding the GIL, for a turn, first come first served
(:class:`FairGate`). For throughput on
small models, run single-threaded and concurrently: ``threads_per_run=1`` (the concurrency
then defaults to one run per core).
"""
from __future__ import annotations

import _thread
import collections
import contextlib
import ctypes
import dataclasses
import os
import threading
from typing import Callable, Optional

import numpy as np

from ..errors import ArgumentError
from .arenas import ARENAS
from .ndarray import data_pointer, numpy_dtype


def view_of(base: np.ndarray, shape, slot: dict, dtype: Optional[np.dtype] = None) -> np.ndarray:
    """The value of view ``slot`` of ``base``: the same bytes reshaped (and read as the slot's
    type: a bitcast's view), or -- at a byte ``offset`` (a part of a concat its producer wrote
    in place) -- the bytes from there. ``dtype``: the slot's, where the caller has it."""
    dtype = numpy_dtype(slot["dtype"]) if dtype is None else dtype
    if "offset" not in slot:  # (the type first: of another width, a bitcast regroups the last dim)
        return (base if base.dtype == dtype else base.reshape(-1).view(dtype)).reshape(shape)
    off = slot["offset"]
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return base.reshape(-1).view(np.uint8)[off: off + n].view(dtype).reshape(shape)


_CORES: list = []  # (read once: every run asks, and the system call showed in a small model's run)


def host_cores() -> int:
    """The cores this process may run on (its affinity mask when first asked)."""
    if not _CORES:
        try:
            _CORES.append(max(1, len(os.sched_getaffinity(0))))
        except (AttributeError, OSError):
            _CORES.append(max(1, os.cpu_count() or 1))
    return _CORES[0]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_CORES.clear)  # (a child may be given other cores)


def default_threads() -> int:
    """Threads per run when none is set: ``OMP_NUM_THREADS`` if the user set it, else all cores."""
    raw = os.environ.get("OMP_NUM_THREADS", "")
    seen = _DEFAULT_THREADS.get(raw)  # (read on every run: parsed once per value)
    if seen is None:
        env = raw.split(",")[0].strip()
        seen = _DEFAULT_THREADS[raw] = int(env) if env.isdigit() and int(env) > 0 else 0
    return seen or host_cores()


_DEFAULT_THREADS: dict = {}


class RunState:
    """One run's private memory: every slot value that does not change between runs at one
    layout (constants, arena views and views of both), the native pointer table, and while it
    runs an arena per phase of the program (one, unless it binds sizes while running) borrowed
    from the process's :data:`~ember.runtime.arenas.ARENAS`. A phase is laid out again when a
    run comes with other symbol values (a new layout) or is lent another arena than last time."""

    __slots__ = ("slots", "constants", "arenas", "had", "fixed", "ptrs", "layouts", "gate", "dtypes")

    def __init__(self, slots: list, constants: list):
        self.slots = slots
        self.constants = constants
        self.arenas: dict = {}  # phase -> the arena this run borrowed
        self.had: dict = {}  # phase -> the arena its views point into
        self.fixed: list = [None] * len(slots)
        self.dtypes = [numpy_dtype(s["dtype"]) for s in slots]
        for k, s in enumerate(slots):
            if s["kind"] == "const":
                self.fixed[k] = constants[s["index"]]
        for k, s in enumerate(slots):
            if s["kind"] == "view" and self.fixed[s["base"]] is not None:
                self.fixed[k] = view_of(self.fixed[s["base"]], [int(d) for d in s["shape"]], s, self.dtypes[k])
        self.ptrs = (ctypes.c_void_p * max(1, len(slots)))()
        for k, v in enumerate(self.fixed):
            if v is not None:
                self.ptrs[k] = data_pointer(v)
        self.layouts: dict = {}

    def prepare(self, layout) -> None:
        """Lay this state out for ``layout`` (a :class:`~ember.runtime.layout.Layout` of one
        phase), on an arena borrowed for this run."""
        p = layout.phase.index
        arena = self.arenas.get(p)
        if arena is not None and arena.nbytes < layout.arena_bytes:
            ARENAS.give(arena)
            arena = None
        if arena is None:
            arena = self.arenas[p] = ARENAS.take(layout.arena_bytes, layout.new_arena, prefer=self.had.get(p))
        if self.layouts.get(p) is layout and self.had.get(p) is arena:
            return
        slots, shapes, fixed, ptrs = self.slots, layout.shapes, self.fixed, self.ptrs
        mine = layout.phase.slots
        # (a decoder's every step is a new layout: one array constructor and one address a slot,
        # where slicing, viewing and reshaping the arena took three and a lookup of the address)
        base, offsets = data_pointer(arena), layout.offsets
        for k in mine:
            s = slots[k]
            if s["kind"] == "arena":
                off = offsets[k]
                fixed[k] = np.ndarray(shapes[k], self.dtypes[k], arena, off)
                ptrs[k] = base + off
        for k in mine:  # views are listed after their bases
            s = slots[k]
            if s["kind"] == "view" and slots[s["base"]]["kind"] == "arena":
                fixed[k] = view_of(fixed[s["base"]], shapes[k], s, self.dtypes[k])
                ptrs[k] = data_pointer(fixed[k])
        self.layouts[p] = layout
        self.had[p] = arena

    def release(self) -> None:
        """Give back the arenas this run borrowed (the run is over)."""
        for arena in self.arenas.values():
            ARENAS.give(arena)
        self.arenas.clear()


@dataclasses.dataclass(frozen=True)
class MemoryInfo:
    """An executable's memory, in bytes (``exe.memory_info``).

    ``weights``: its constants (for a loaded export, pages mapped from the library);
    ``arena_per_run``: the planned intermediates one run needs; ``arenas``: the arenas its runs
    in flight hold now; ``pool``: the bytes of the free arenas the process keeps for the next runs
    of any executable (:mod:`ember.runtime.arenas`); ``peak_arenas``: the most runs ever in
    flight at once;
    ``outputs_per_run``: the new output arrays each run returns; ``peak``: weights plus the
    arenas and outputs of the peak number of concurrent runs; ``intermediates``: the
    intermediates' total size without the memory plan's reuse.
    """

    weights: int
    arena_per_run: int
    arenas: int
    pool: int
    peak_arenas: int
    outputs_per_run: int
    peak: int
    intermediates: int
    weights_mapped: bool = False

    def __str__(self) -> str:
        def mib(n):
            return f"{n / 2**20:.2f} MiB"

        where = " (mapped from the export)" if self.weights_mapped else ""
        return (f"weights {mib(self.weights)}{where}; arena {mib(self.arena_per_run)} per run "
                f"(intermediates {mib(self.intermediates)} before reuse); {self.arenas} in use, "
                f"peak {self.peak_arenas}; free arenas of the process {mib(self.pool)}; outputs {mib(self.outputs_per_run)} per run; "
                f"peak {mib(self.peak)}")


class FairGate:
    """A counting semaphore that admits in arrival order. A release hands the turn straight to
    the longest waiter, so a client that releases and asks again at once (a serving loop) waits
    behind the others instead of barging ahead of them (threading.Semaphore lets it: with 4
    clients on ResNet-50 that made p99 latency 4x the median)."""

    def __init__(self, turns: int):
        self.size = turns
        self._turns = turns
        self._lock = threading.Lock()
        self._waiters: collections.deque = collections.deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def acquire(self) -> None:
        with self._lock:
            if self._turns > 0 and not self._waiters:
                self._turns -= 1
                return
            turn = _thread.allocate_lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()  # released by the release() that hands this waiter its turn

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._turns += 1


class RunPool:
    """Hands each run a :class:`RunState` of its own and bounds how many run at once."""

    def __init__(self, make_state: Callable[[], RunState]):
        self._make = make_state
        self._free: list = []
        self._lock = threading.Lock()
        self._threads: Optional[int] = None
        self._max: Optional[int] = None
        self._gate = FairGate(self.max_concurrent_runs)
        self.created = 0
        self.in_flight = 0
        self.peak_in_flight = 0

    # -- settings ------------------------------------------------------------------------------
    @property
    def threads_per_run(self) -> int:
        return self._threads or default_threads()

    @threads_per_run.setter
    def threads_per_run(self, n: Optional[int]) -> None:
        self._threads = _positive("threads_per_run", n)
        self._reset_gate()

    @property
    def max_concurrent_runs(self) -> int:
        return self._max or max(1, host_cores() // self.threads_per_run)

    @max_concurrent_runs.setter
    def max_concurrent_runs(self, n: Optional[int]) -> None:
        self._max = _positive("max_concurrent_runs", n)
        self._reset_gate()

    def _reset_gate(self) -> None:
        # runs in flight release the semaphore they acquired; new runs take the new one
        self._gate = FairGate(self.max_concurrent_runs)
        with self._lock:
            del self._free[self.max_concurrent_runs:]

    # -- runs ----------------------------------------------------------------------------------
    def acquire(self) -> RunState:
        """A turn to run (waiting for one), on a :class:`RunState` of this run's own; give it
        back with :meth:`release`."""
        gate = self._gate
        gate.acquire()
        try:
            with self._lock:
                state = self._free.pop() if self._free else None
                self.in_flight += 1
                if self.in_flight > self.peak_in_flight:
                    self.peak_in_flight = self.in_flight
            if state is None:
                try:
                    state = self._make()
                except BaseException:
                    with self._lock:
                        self.in_flight -= 1
                    raise
                with self._lock:
                    self.created += 1
        except BaseException:
            gate.release()
            raise
        state.gate = gate  # (the gate it was admitted by: settings may replace the pool's)
        return state

    def release(self, state: RunState) -> None:
        """The run on ``state`` is over."""
        try:
            state.release()
            with self._lock:
                self.in_flight -= 1
                if len(self._free) < state.gate.size:  # (the runs that may be in flight at once)
                    self._free.append(state)
        finally:
            state.gate.release()

    @contextlib.contextmanager
    def run(self):
        """``with pool.run() as state:`` -- :meth:`acquire` and :meth:`release` around a run."""
        state = self.acquire()
        try:
            yield state
        finally:
            self.release(state)

    @property
    def arenas(self) -> int:
        """Arenas this executable's runs hold now (one per run in flight; free arenas belong to
        the process's cache)."""
        with self._lock:
            return self.in_flight


def _positive(what: str, n) -> Optional[int]:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ArgumentError(f"{what} must be a positive integer (or None for the default), got {n!r}")
    return n


__all__ = ["FairGate", "MemoryInfo", "RunPool", "RunState", "default_threads", "host_cores"]
