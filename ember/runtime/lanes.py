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
A hand-off costs ~10-20 us, against milliseconds a run saved in every multi-threaded caller.

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


class _Lane:
    """A daemon thread that runs one job at a time with a team of ``threads`` threads."""

    def __init__(self, lanes: "Lanes", threads: int):
        self.threads = threads
        self._lanes = lanes
        self._wake = _thread.allocate_lock()
        self._wake.acquire()
        self._job: Optional[tuple] = None
        threading.Thread(target=self._loop, name=f"ember-lane-{threads}", daemon=True).start()

    def _loop(self) -> None:
        OPENMP.use(self.threads)
        self._lanes.local.lane = True
        while True:
            self._wake.acquire()
            fn, box, done = self._job
            self._job = None
            try:
                box.append(fn())
            except BaseException as e:  # handed back to the caller
                box.append(e)
                box.append(None)
            # the finished run's closure and results (its executable, its outputs) must not
            # live on in this frame while the lane sleeps
            fn = None
            self._lanes._idle(self)
            done.release()
            box = done = None

    def run(self, fn: Callable):
        box: list = []
        done = _thread.allocate_lock()
        done.acquire()
        self._job = (fn, box, done)
        self._wake.release()
        try:
            done.acquire()
        except BaseException:
            done.acquire()  # the lane is still using the run's memory: wait for it
            raise
        if len(box) == 2:
            raise box[0]
        return box[0]


class Lanes:
    """Hands each run to an idle lane of the run's team size (made on first need)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._free: dict = {}  # threads -> idle lanes
        self.local = threading.local()
        self.lanes_made = 0

    def execute(self, threads: int, fn: Callable):
        """Run ``fn`` (a whole model run) with a team of ``threads`` threads; return its result."""
        if getattr(self.local, "lane", False):
            return fn()  # a run inside a lane's run: already on a lane
        OPENMP.release_own_team()
        with self._lock:
            idle = self._free.get(threads)
            lane = idle.pop() if idle else None
        if lane is None:
            lane = _Lane(self, threads)
            with self._lock:
                self.lanes_made += 1
        return lane.run(fn)

    def _idle(self, lane: _Lane) -> None:
        with self._lock:
            self._free.setdefault(lane.threads, []).append(lane)

    def _after_fork(self) -> None:
        self.__init__()  # threads do not survive fork


LANES = Lanes()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=LANES._after_fork)

__all__ = ["LANES", "Lanes", "OPENMP"]
