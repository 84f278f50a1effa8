"""An executable that runs before its model's build is done: tier 0 now, tier 1 as it lands.

``ember.compile`` of a model whose kernels are not in the cache returns a
:class:`TieredExecutable` as soon as every fused group has a kernel that runs (tier 0,
:mod:`.tier0`; or the group's own specialized kernel where the cache has it), and a
background thread compiles the specialized kernels (tier 1) on the compile workers. As each
batch of them is ready the thread makes a whole executable of the program with those groups
switched over (:func:`ember.compiler.build.build_executable` yields them) and swaps it in with
one reference assignment: a run reads ``current`` once and runs on that executable to the end,
so no run, from one thread or many, sees a half-switched program; the last executable is
exactly the one ``wait=True`` gives, kept in the cache as such.

Everything else (``input_info``, ``profile``, ``memory_info`` ...) is the current
executable's; settings (``threads_per_run``, a profiler's timer) are applied to each
executable swapped in. ``tier_info`` says which group runs at which tier; ``wait()`` blocks
until tier 1 (and raises what its build raised, if it failed: the model keeps running at
tier 0 then).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import sys
import threading
import time
import warnings
from typing import Any, Callable, Iterator, Optional

from ..codegen.busy import model_running
from ..runtime.pool import host_cores

__all__ = ["TierInfo", "TieredExecutable"]

# How long the background build waits for the model's first run to start (a script's run right
# after ``ember.compile``), and at most for it to end, before it starts compiling tier 1. That
# run then has every core, where the build's workers would leave it one: DenseNet-121's first
# run with other models' kernels cached, on 2 cores, 0.20-0.32 -> 0.08-0.12 s; tier 1 lands
# that much later
FIRST_RUN_GRACE = 0.2
FIRST_RUN_MOST = 3.0


@dataclasses.dataclass(frozen=True)
class TierInfo:
    """Where a tiered compile stands: ``tiers`` maps each fused group (kernel name) to the tier
    it runs at now (0 or 1); ``done`` once every group runs at tier 1; ``error`` the tier-1
    build's failure, if any; ``seconds``: from the compile's start to each switch."""

    tiers: dict
    done: bool
    error: Optional[BaseException] = None
    switches: tuple = ()  # (seconds since the compile started, groups at tier 1) per switch

    @property
    def at_tier0(self) -> list:
        return sorted(g for g, t in self.tiers.items() if t == 0)

    def __str__(self) -> str:
        n1 = sum(1 for t in self.tiers.values() if t == 1)
        state = "done" if self.done else ("failed: " + str(self.error) if self.error else "compiling")
        return f"{n1}/{len(self.tiers)} groups at tier 1 ({state})"


class TieredExecutable:
    """Runs like an Executable (``run``, ``__call__``, every attribute is the current
    executable's) while its tier-1 kernels compile in the background (see the module
    docstring)."""

    _OWN = frozenset({"current", "_settings", "_lock", "_tiers", "_done", "_error", "_thread", "_t0",
                      "_switches", "_on_done", "_progress", "_final", "_run_started", "_run_ended"})

    def __init__(self, first, tiers: dict, steps: Iterator, t0: float, progress: bool = False):
        # (the first run takes every core: the build starts after it, see _build)
        self._run_started = threading.Event()
        self._run_ended = threading.Event()
        self._final = None  # (the all-tier-1 executable, once swapped in)
        self.current = first
        self._settings: dict = {}
        self._lock = threading.Lock()
        self._tiers = dict(tiers)
        self._done = threading.Event()
        self._error: Optional[BaseException] = None
        self._t0 = t0
        self._switches: list = []
        self._on_done: list = []
        self._progress = progress
        # (the build runs in the compile's context: its settings -- tuning records, LLVM level,
        # shape assumptions -- are context variables)
        ctx = contextvars.copy_context()
        self._thread = threading.Thread(target=ctx.run, args=(self._build, steps), name="ember-tier1", daemon=True)
        self._thread.start()

    def __getattr__(self, name: str):
        return getattr(self.current, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            object.__setattr__(self, name, value)
            return
        with self._lock:  # (a setting is every executable's: the next one swapped in gets it too)
            self._settings[name] = value
            setattr(self.current, name, value)

    def run(self, *arrays: Any, **named: Any) -> list:
        """The model's outputs, from the executable current when the run starts."""
        exe = self.current
        with self._marked(exe):
            return exe.run(*arrays, **named)

    __call__ = run

    def _run_into(self, out, *arrays: Any) -> list:
        exe = self.current
        with self._marked(exe):
            return exe._run_into(out, *arrays)

    @contextlib.contextmanager
    def _marked(self, exe):
        """A run of ``exe`` marked in flight while tier 1 still compiles (the background build's
        last worker waits for it), and the first run's start and end seen (the build waits for
        them)."""
        if not self._run_started.is_set():  # (every run passes here: no lock once it is set)
            self._run_started.set()
        try:
            with contextlib.nullcontext() if exe is self._final else model_running():
                yield
        finally:
            if not self._run_ended.is_set():
                self._leave_a_core()  # (before the build starts: the caller's next run may be next)
                self._run_ended.set()

    def _leave_a_core(self) -> None:
        """From now on (the build is starting) runs leave a core to it (a user's
        ``threads_per_run`` stays theirs)."""
        with self._lock:
            if self.current is not self._final:
                self._share_cores(self.current, final=False)
                for k, v in self._settings.items():
                    setattr(self.current, k, v)

    def export(self, path: str) -> str:
        """Wait for tier 1, then export (an export holds the specialized kernels)."""
        self.wait()
        return self.current.export(path)

    @property
    def tier_info(self) -> TierInfo:
        with self._lock:
            return TierInfo(dict(self._tiers), self._done.is_set() and self._error is None, self._error,
                            tuple(self._switches))

    def when_done(self, callback: Callable) -> None:
        """Call ``callback(executable)`` with the all-tier-1 executable once it is swapped in
        (now, if it is already; never, if the build fails)."""
        with self._lock:
            if not self._done.is_set():
                self._on_done.append(callback)
                return
        if self._error is None:
            callback(self.current)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until every group runs at tier 1 (or ``timeout`` seconds); True when done.
        Raises the tier-1 build's error, if it failed."""
        self._done.wait(timeout)
        if self._error is not None:
            raise self._error
        return self._done.is_set()

    def _switch(self, exe, tiers: dict) -> None:
        final = all(t == 1 for t in tiers.values())
        with self._lock:
            self._share_cores(exe, final)
            for k, v in self._settings.items():
                setattr(exe, k, v)
            self._tiers = dict(tiers)
            if final:
                self._final = exe
            self._switches.append((time.perf_counter() - self._t0, sum(1 for t in tiers.values() if t == 1)))
            self.current = exe  # (one assignment: a run in flight keeps the executable it took)

    @staticmethod
    def _share_cores(exe, final: bool) -> None:
        """While tier 1 compiles (in worker processes, one per core, the last idle while a run is
        in flight), a run takes all cores but one by default: a parallel loop whose threads
        share cores with the compiler waits on descheduled ones (ResNet-18 at tier 0: 56 ms
        alone, 400 ms so)."""
        if not final:
            exe.threads_per_run = max(1, host_cores() - 1)

    def _build(self, steps: Iterator) -> None:
        # The first result is what the user waits for: a run that starts soon after the compile
        # returns gets every core to itself, and the build starts once it is done (or when none
        # has started within FIRST_RUN_GRACE s); from then on runs leave a core to the build
        if self._run_started.wait(FIRST_RUN_GRACE):
            self._run_ended.wait(FIRST_RUN_MOST)
        self._leave_a_core()
        try:
            for exe, tiers in steps:
                self._switch(exe, tiers)
                if self._progress:
                    n1 = sum(1 for t in tiers.values() if t == 1)
                    print(f"\rember: {n1}/{len(tiers)} groups at tier 1", end="" if n1 < len(tiers) else "\n",
                          file=sys.stderr, flush=True)
        except BaseException as e:  # (the model keeps running on what it has; wait() raises it)
            self._error = e
        with self._lock:
            callbacks, self._on_done = self._on_done, []
            self._done.set()
        if self._error is None:
            for cb in callbacks:
                try:
                    cb(self.current)
                except Exception as e:  # (keeping the executable is an optimization)
                    warnings.warn(f"tier 1 is done, but {e}", stacklevel=1)

    def __repr__(self) -> str:
        return f"<TieredExecutable {self.tier_info}: {self.current!r}>"
