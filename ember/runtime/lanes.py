"""Where runs execute: on a few long-lived *lanes* shared by the process, never on the caller.

Every thread that opens an OpenMP parallel region gets a libgomp team of its own, whose
workers stay alive (and counted) after the region ends. Once the process holds more libgomp
threads than cores -- a server's client threads each running the model, or a main thread
that ran a warm-up before the clients started -- libgomp stops spinning between regions and
puts its workers to sleep after every one, and waking them costs tens of microseconds per
parallel loop (squeezenet on 2 cores: 5.5 ms a run from one thread, 8 ms once a second
thread has run it). The team of a thread can only be freed by that thread, and a server's
main thread never runs again.

So runs never execute on the calling thread: each is handed to an idle *lane*, a daemon
thread with one team of ``threads`` threads, and the caller waits for it without the GIL.
The process then holds exactly the teams its concurrent runs need (one, with the defaults).
The hand-off is native (:mod:`.handoff`): a run of native code (a library's program runner)
never takes the GIL on the lane, and the caller waits in native code, so a tiny model's whole
run went from ~140 to ~50 us on the 2-core VM (ONNX Runtime: ~20 us); a run with Python
steps (control flow, a profile) is a Python job on the same lane.

A caller may hold a team all the same: PyTorch's parallel ops run on the calling thread with
the same libgomp (torch's copy serves the whole process), and a main thread that ran Ember
before lanes existed has one. Before handing a run over, the caller frees its own team
(``omp_pause_resource_all``, a no-op for a thread without one): mobilenet_v3_small after one
torch op, 4.2 -> 1.3 ms a run on 2 cores. Torch makes its team again at its next parallel op.
"""
from __future__ import annotations

import _thread
import ctypes
import ctypes.util
import os
import threading
from typing import Callable, Optional

from . import handoff


class _OpenMP:
    """libgomp's per-thread team size (``omp_set_num_threads``), set only when it changes."""

    def __init__(self):
        self._lib = None
        self._tried = False
        self._local = threading.local()

    def lib(self):
        if not self._tried:
            self._tried = True
            for name in ("libgomp.so.1", ctypes.util.find_library("gomp")):
                if not name:
                    continue
                try:
                    lib = ctypes.CDLL(name)
                    lib.omp_set_num_threads.argtypes, lib.omp_set_num_threads.restype = [ctypes.c_int], None
                except (OSError, AttributeError):
                    continue
                self._lib = lib
                break
        return self._lib

    def release_own_team(self) -> None:
        """Free this thread's libgomp team, if it has one (its workers exit): the threads it
        holds would make libgomp throttle every other team (see the module docstring)."""
        pause = getattr(self, "_pause", False)
        if pause is False:
            lib = self.lib()
            pause = getattr(lib, "omp_pause_resource_all", None) if lib is not None else None  # (OpenMP 5.0)
            if pause is not None:
                pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
            self._pause = pause
        if pause is not None:
            pause(1)  # omp_pause_soft: the calling thread's pool only; no-op inside a parallel region

    def use(self, threads: int) -> None:
        """Make this thread's next parallel regions use ``threads`` threads."""
        if getattr(self._local, "threads", None) != threads:
            lib = self.lib()
            if lib is not None:
                lib.omp_set_num_threads(threads)
            self._local.threads = threads


OPENMP = _OpenMP()


# How long a lane spins for its next job after one, before it sleeps: a caller that runs again
# soon (a loop over inputs) finds it awake, which saved ~25 us a run of a tiny model; with the
# caller's own work between runs, no model measured slower. The caller sleeps at once while its
# run executes: on 2 cores a spinning caller takes a core from the run's team.
LANE_SPIN_NS = 100_000
CALLER_SPIN_NS = 0


class _Lane:
    """A daemon thread that runs one job at a time with a team of ``threads`` threads: native
    jobs (a library's program runner) without the GIL, Python jobs (a whole run with control
    steps, a profile) as Python calls. Both wait in native code (:mod:`.handoff`) where it is
    available, else on locks."""

    def __init__(self, lanes: "Lanes", threads: int):
        self.threads = threads
        self._lanes = lanes
        self._job: Optional[tuple] = None
        native = handoff.functions()
        self._native = native is not None
        if self._native:
            self._serve, self._call, self._finish = native
            self._block = handoff.Block(lanes.lane_spin_ns, lanes.caller_spin_ns)
        else:
            self._wake = _thread.allocate_lock()
            self._wake.acquire()
            self._done = _thread.allocate_lock()
            self._done.acquire()
        threading.Thread(target=self._loop, name=f"ember-lane-{threads}", daemon=True).start()

    def _loop(self) -> None:
        OPENMP.use(self.threads)
        self._lanes.local.lane = True
        while True:
            if self._native:
                self._serve(self._block.address)  # native jobs run in there; back for a Python one
            else:
                self._wake.acquire()
            fn, box = self._job
            self._job = None
            try:
                box.append(fn())
            except BaseException as e:  # handed back to the caller
                box.append(e)
                box.append(None)
            # the finished run's closure and results (its executable, its outputs) must not
            # live on in this frame while the lane sleeps
            fn = box = None
            if self._native:
                self._finish(self._block.address)
            else:
                self._done.release()

    def run(self, fn: Callable):
        """Run ``fn`` on the lane; its result (or its exception, raised here)."""
        box: list = []
        self._job = (fn, box)
        if self._native:
            self._call(self._block.address, handoff.PYTHON_JOB, 0, 0, 0, 0)
        else:
            self._wake.release()
            try:
                self._done.acquire()
            except BaseException:
                self._done.acquire()  # the lane is still using the run's memory: wait for it
                raise
        if len(box) == 2:
            raise box[0]
        return box[0]

    def run_native(self, runner, address: int, words: int, ptrs: int, fns: int) -> int:
        """Call the program runner (its ctypes function and its address) on the lane; its status."""
        if self._native:
            return self._call(self._block.address, handoff.NATIVE_JOB, address, words, ptrs, fns)
        return self.run(lambda: runner(words, ptrs, fns))


class Lanes:
    """Hands each run to an idle lane of the run's team size (made on first need)."""

    def __init__(self, lane_spin_ns: int = LANE_SPIN_NS, caller_spin_ns: int = CALLER_SPIN_NS):
        self.lane_spin_ns, self.caller_spin_ns = lane_spin_ns, caller_spin_ns
        self._lock = threading.Lock()
        self._free: dict = {}  # threads -> idle lanes
        self.local = threading.local()
        self.lanes_made = 0

    def _take(self, threads: int) -> _Lane:
        OPENMP.release_own_team()
        with self._lock:
            idle = self._free.get(threads)
            if idle:
                return idle.pop()
            self.lanes_made += 1
        return _Lane(self, threads)

    def _give(self, lane: _Lane) -> None:
        with self._lock:
            self._free.setdefault(lane.threads, []).append(lane)

    def execute(self, threads: int, fn: Callable):
        """Run ``fn`` (a whole model run) with a team of ``threads`` threads; return its result."""
        if getattr(self.local, "lane", False):
            return fn()  # a run inside a lane's run: already on a lane
        lane = self._take(threads)
        try:
            return lane.run(fn)
        finally:
            self._give(lane)

    def run_native(self, threads: int, runner, address: int, words: int, ptrs: int, fns: int) -> int:
        """Call a library's program runner (its ctypes function and its address; its arguments'
        addresses) with a team of ``threads`` threads, without the GIL; its status."""
        if getattr(self.local, "lane", False):
            return runner(words, ptrs, fns)  # (a loop body's steps, a branch: already on a lane)
        lane = self._take(threads)
        try:
            return lane.run_native(runner, address, words, ptrs, fns)
        finally:
            self._give(lane)

    def _after_fork(self) -> None:
        self.__init__(self.lane_spin_ns, self.caller_spin_ns)  # threads do not survive fork


LANES = Lanes()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=LANES._after_fork)

__all__ = ["LANES", "Lanes", "OPENMP"]
