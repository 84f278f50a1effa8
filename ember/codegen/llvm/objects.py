"""One object file per kernel: cached by content, compiled in parallel, then linked together.

Kernels are independent functions, so each gets its own LLVM module. That makes three things
cheap: a kernel already compiled for any model is reused from ``<cache>/objects`` (keyed by its
unoptimized IR, the target and the Ember version); cold kernels compile on all cores in worker
processes (LLVM contexts are not shared across threads, processes are the safe unit); and the
time LLVM spends on each kernel is known, which is what a compile-time profile reports. A small
*shared* module holds what the library has once: the kernel metadata and, for instrumented
builds, the cycle-counter function.
"""
from __future__ import annotations

import atexit
import contextlib
import contextvars
import json
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from llvmlite import ir

from ...config import cache_dir
from ...errors import CompileError, EmberError
from ...target import Target
from .build import cache_key, compile_object, data_layout, opt_level
from . import profile as _profile
from .codegen import check_kernel_names, emit_function
from .metadata import add_metadata_global
from .program import add_program_runner
from ..busy import runs_in_flight
from ...runtime import handoff

# Starting a worker (a Python that imports Ember and llvmlite) costs ~0.4 s; the loop passes,
# LLVM IR emission and LLVM take roughly 60 us of CPU per byte of a kernel's lowered loop
# program, and a fused group's whole back end ~0.1 s. Below this much estimated work,
# compiling in this process is faster.
PARALLEL_MIN_SECONDS = 0.3


def _estimate(job: tuple) -> float:
    """Rough CPU seconds of a job (to choose between workers and this process)."""
    return 0.1 if job[0] == "made" else 60e-6 * len(job[1])


def kernel_ir(func, target: Target) -> tuple:
    """``func`` alone in an LLVM module: (IR text, metadata entry)."""
    module = ir.Module(name=func.name)
    module.triple = target.triple
    module.data_layout = data_layout(target)
    try:
        entry = emit_function(module, func, target.feature_set)
    except EmberError:
        raise
    except Exception as exc:  # a bug or an unsupported construct: say which kernel
        raise CompileError(f"kernel {func.name!r}: code generation failed: {type(exc).__name__}: {exc}") from exc
    return str(module), entry


def shared_ir(entries: list, target: Target, name: str) -> tuple:
    """The module every library has once: metadata, the native program runner (for the
    kernels whose scalar parameters are sizes), and the cycle counter if instrumented; from
    the kernels' metadata entries alone."""
    module = ir.Module(name=name)
    module.triple = target.triple
    module.data_layout = data_layout(target)
    arities = set()
    for e in entries:
        kinds = [p["kind"] for p in e["params"]]
        if not any(p["kind"] == "scalar" and p.get("abi") == "double" for p in e["params"]):
            arities.add((kinds.count("buffer"), kinds.count("scalar")))
    if arities:
        add_program_runner(module, arities)
    if any("profile" in e for e in entries):
        _profile.add_cycle_function(module)
    text = add_metadata_global(module, entries)
    return str(module), text


def _object_path(key: str) -> str:
    d = os.path.join(cache_dir(), "objects")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, key + ".o")


def _cached(path: str, with_entry: bool = True):
    """The object at ``path`` (and its metadata entry, ``(object, entry)``), marked used; None
    on a miss -- a file pruned from the cache while this read it included."""
    from ...cache_size import touch

    try:
        if not touch(path):
            return None
        with open(path, "rb") as fh:
            obj = fh.read()
        if not with_entry:
            return obj
        with open(path[:-2] + ".json") as fh:
            return obj, json.load(fh)
    except (FileNotFoundError, ValueError):
        return None


def _store(path: str, obj: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".obj-")
    with os.fdopen(fd, "wb") as f:
        f.write(obj)
    os.replace(tmp, path)


def _reads_back(text: str, func) -> bool:
    from ...loop.parser import parse

    try:
        return parse(text) == func
    except EmberError:
        return False


def _compile_job(job: tuple, func=None) -> tuple:
    """Worker: one kernel's whole back end, so that it runs on every core -> (object bytes,
    metadata entry, stats). A job is ``("func", loop-IR text, run the loop passes?, target,
    opt, what)`` or ``("made", pickled (make, payload), kernel name, target, opt, what)``,
    whose ``make(payload, name, target) -> (PrimFunc, stats)`` makes the loop program first (a
    layer above, by reference: the compiler's computes, schedule and lowering of a fused
    group). In this process ``func`` (the PrimFunc or (make, payload) the job carries) saves
    reading it back."""
    from ...loop.passes import default_pipeline

    kind, data, arg, target, opt, what = job
    stats: dict = {}
    if kind == "made":
        make, payload = pickle.loads(data) if func is None else func
        func, made = make(payload, arg, target)
        obj = made.pop("object", None)
        if obj is not None:  # (an offloaded group's kernel: its object compiled from a backend's C)
            from .codegen import signature_scalars
            from .metadata import kernel_metadata

            entry = {**kernel_metadata(func, signature_scalars(func)), **made.pop("entry", {})}
            stats.update(made)
            return obj, entry, stats
        passes = not made.pop("passes_done", False)  # (a maker may run its own loop passes: tier 0's)
        stats.update(made)
    else:
        from ...loop.parser import parse

        func = parse(data) if func is None else func
        passes = arg
    t1 = time.perf_counter()
    if passes:
        func = default_pipeline(func)
    t2 = time.perf_counter()
    if kind == "made":
        from ...config import debug_level

        if debug_level() >= 2:  # (jobs run in this process then)
            print(f"=== loop program {func.name} ===\n{func.script()}", file=sys.stderr)
    ir_text, entry = kernel_ir(func, target)
    stats.update(llvm_emit=time.perf_counter() - t2, llvm_lines=ir_text.count("\n"))
    if passes:
        stats["loop_passes"] = t2 - t1
    obj = compile_object(ir_text, target, what, stats, opt)
    return obj, entry, stats


def _run_job(job: tuple) -> tuple:
    return _compile_job(job)


def _worker_main() -> None:
    """A worker process: jobs arrive on stdin one at a time (length-prefixed pickles) until
    stdin closes; each result (or the exception it raised) goes back the same way on stdout."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = inp.read(8)
        if len(head) < 8:
            return
        job = pickle.loads(inp.read(int.from_bytes(head, "little")))
        if os.environ.get("EMBER_TEST_WORKER_EXIT"):  # (the tests' way to kill a worker mid-job)
            os._exit(3)
        try:
            res = _run_job(job)
        except BaseException as exc:  # sent back and raised in the parent, with its message
            res = exc
        data = pickle.dumps(res)
        out.write(len(data).to_bytes(8, "little") + data)
        out.flush()


class _Worker:
    """One compile worker process and the file its stderr goes to (read if it dies)."""

    def __init__(self, cmd: list, env: dict):
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=env)

    def run(self, job: tuple):
        data = pickle.dumps(job)
        try:
            self.proc.stdin.write(len(data).to_bytes(8, "little") + data)
            self.proc.stdin.flush()
            head = self.proc.stdout.read(8)
            res = pickle.loads(self.proc.stdout.read(int.from_bytes(head, "little"))) if len(head) == 8 else None
        except (OSError, pickle.UnpicklingError, EOFError):
            res = None
        if res is None:
            self.proc.kill()
            self.proc.wait()
            self.err.seek(0)
            tail = self.err.read().decode(errors="replace").strip()[-2000:]
            raise CompileError(f"a compile worker for {job[-1]} died (exit {self.proc.returncode}): {tail}")
        return res

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.err.close()


class _Pool:
    """Compile workers kept for the rest of a compile (a model compile builds its constant
    folding program first, then the model: starting Python and LLVM again for each costs
    ~0.4 s), and closed after :data:`IDLE_SECONDS` without work or at exit.

    Plain subprocesses rather than multiprocessing: a spawned multiprocessing child re-imports
    the caller's ``__main__`` (a user's script without a main guard would run again), and a
    forked one would inherit the OpenMP threads of kernels already loaded."""

    IDLE_SECONDS = 20.0

    def __init__(self):
        self.lock = threading.Lock()
        self.workers: list = []
        self.timer = None
        # (at exit a background build may hold the lock: its workers exit with their stdin)
        atexit.register(self.close, 0.05)

    def _spawn(self, workers: int) -> None:
        """Start workers up to ``workers`` (not waiting: each imports Ember and LLVM while the
        caller goes on); the idle timer restarts."""
        if self.timer is not None:
            self.timer.cancel()
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        cmd = [sys.executable, "-c", "from ember.codegen.llvm.objects import _worker_main; _worker_main()"]
        while len(self.workers) < workers:
            self.workers.append(_Worker(cmd, env))
        self.timer = threading.Timer(self.IDLE_SECONDS, self.close)
        self.timer.daemon = True
        self.timer.start()

    def warm_up(self, workers: int) -> None:
        """Start the workers a later build will need now, so that their start overlaps the
        caller's work (a model's constant folding compiles its few kernels here meanwhile)."""
        with self.lock:
            self._spawn(workers)

    def run(self, jobs: list, workers: int, here=None, polite: bool = False) -> list:
        """Results of ``jobs`` (in order), each job sent to the next free worker, the largest
        first. With ``here`` (``here(i)`` runs job i in this process) this process takes jobs
        from the same queue too: while the workers are still starting (a model's folding
        program, the first build of a compile) it is the one doing the work. ``polite``: the
        last worker takes a job only while no model run is in flight
        (:func:`ember.codegen.busy.model_running`)."""
        with self.lock:
            self._spawn(workers)
            if self.timer is not None:
                self.timer.cancel()
            order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][1]))  # the largest first
            results: list = [None] * len(jobs)
            lock = threading.Lock()
            progress = _Progress(len(jobs))

            def take():
                with lock:
                    return order.pop(0) if order else None

            failed: list = []

            def drain(w: _Worker, yields: bool) -> None:
                try:
                    while True:
                        while yields and runs_in_flight() and order:
                            time.sleep(0.005)
                        if (i := take()) is None:
                            return
                        results[i] = w.run(jobs[i])
                        progress.step()
                except BaseException as e:  # (raised by the caller below)
                    failed.append(e)
            # threads that only wait on the processes; daemons, so that a process exiting in
            # the middle of a background build does not wait for its jobs (the objects written
            # so far stay: each is renamed into place whole)
            threads = [threading.Thread(target=drain, args=(w, polite and k == workers - 1), daemon=True)
                       for k, w in enumerate(self.workers[:workers])]
            try:
                for t in threads:
                    t.start()
                if here is not None:
                    while (i := take()) is not None:
                        results[i] = here(i)
                        progress.step()
                for t in threads:
                    t.join()
                if failed:
                    raise failed[0]
                progress.close()
            except BaseException:
                self._close_workers()
                raise
            self.timer = threading.Timer(self.IDLE_SECONDS, self.close)
            self.timer.daemon = True
            self.timer.start()
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results

    def _close_workers(self) -> None:
        for w in self.workers:
            w.close()
        self.workers = []

    def close(self, wait: float = 1.0) -> None:
        """Stop the workers (they exit when their stdin closes)."""
        if self.lock.acquire(timeout=wait):
            try:
                self._close_workers()
            finally:
                self.lock.release()


class _Progress:
    """``ember: compiling kernels 37/141`` on a terminal, for a build of many kernels in the
    foreground (a tiered build in the background says how many groups run at tier 1 instead)."""

    MIN_JOBS = 16

    def __init__(self, total: int):
        self.total, self.done, self.last = total, 0, 0.0
        try:
            self.on = total >= self.MIN_JOBS and not _BACKGROUND.get() and sys.stderr.isatty()
        except (AttributeError, ValueError):
            self.on = False
        self.lock = threading.Lock()

    def step(self) -> None:
        with self.lock:
            self.done += 1
            now = time.monotonic()
            if self.on and (now - self.last > 0.2 or self.done == self.total):
                self.last = now
                print(f"\rember: compiling kernels {self.done}/{self.total}", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.on:
            print("\r" + " " * 40 + "\r", end="", file=sys.stderr, flush=True)


_POOL = _Pool()


def warm_up_workers() -> None:
    """Start the compile workers a build is about to need (see :meth:`_Pool.warm_up`)."""
    from ...config import debug_level

    if _jobs() > 1 and debug_level() < 2:
        _POOL.warm_up(_jobs() - 1)


def _in_workers(jobs: list, workers: int, here=None, polite: bool = False) -> list:
    """Compile ``jobs`` in ``workers`` worker processes (kept for the next call), and in this
    process too with ``here`` (see :meth:`_Pool.run`)."""
    return _POOL.run(jobs, workers, here, polite)


def _jobs() -> int:
    env = os.environ.get("EMBER_COMPILE_JOBS")
    if env:
        return max(1, int(env))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# set by a build in the background (a tiered compile's tier 1): its jobs go to the workers
# alone, so this process -- running the model meanwhile -- keeps its core and its GIL
_BACKGROUND = contextvars.ContextVar("ember_background_build", default=False)


@contextlib.contextmanager
def in_background():
    """Compile the kernels built inside in the worker processes only (see ``_BACKGROUND``)."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def object_key(text: str, kind: str, target: Target, opt: int) -> str:
    """The cache key of one kernel's object: what its job starts from (its loop program before
    or after the loop passes, or its fused group's text and name), the target, the
    optimization level and a digest of Ember's own sources (the computes, schedules, passes
    and code generator are a function of exactly these)."""
    from ...version import source_digest

    return cache_key(f"{source_digest()}\0{kind}\0{text}", target, opt)


def compile_objects(funcs: list, target: Target, stats: Optional[dict] = None, passes: bool = False) -> tuple:
    """Objects for ``funcs`` (one each, cached) and the library key; returns
    ``(objects, key, metadata)``. With ``passes`` the funcs are as lowered and each job runs the
    loop passes first. New kernels compile in worker processes when there is enough work:
    parsing the loop program, the loop passes, LLVM IR emission, optimization and code
    generation all run there, on every core. ``stats[kernel name]`` (if given) gets the
    seconds of ``loop_passes``, ``llvm_emit``, ``llvm_opt`` and ``llvm_codegen``,
    ``llvm_lines`` and ``cached``."""
    check_kernel_names(funcs)
    texts = [f.script() for f in funcs]
    opt = opt_level()
    jobs = [("func", t, passes, target, opt, f"kernel {f.name!r}") for t, f in zip(texts, funcs)]
    keys = [object_key(t, "passes" if passes else "func", target, opt) for t in texts]
    # a worker gets the kernel as text: one that does not read back as itself (a hand-made
    # PrimFunc the text form cannot say) is compiled here, from the object
    return _compile(jobs, keys, funcs, [f.name for f in funcs], target, stats, opt,
                    here=lambda i: not _reads_back(texts[i], funcs[i]))


def compile_made_objects(kernels: list, target: Target, stats: Optional[dict] = None) -> tuple:
    """Objects for ``kernels`` (``(name, key text, make, payload)``: each job calls
    ``make(payload, name, target)`` for its loop program, see :func:`_compile_job`) and the
    library key, like :func:`compile_objects`: a model's whole back end, from its fused groups
    on, runs on every core. ``key text`` says everything the kernel is made from (its object's
    cache key); ``make`` is a module-level function, which pickles by name. A fifth element, where
    given, is the kernel's LLVM optimization level (else :func:`~ember.config.opt_level`'s). A
    ``make`` with an ``in_process(payload)`` attribute saying True has that job made in this
    process (what it needs exists only here: an offload backend a script registered)."""
    opt = opt_level()
    opts = [k[4] if len(k) > 4 else opt for k in kernels]  # (a kernel's own LLVM level: tier 0's)
    items = [(k[2], k[3]) for k in kernels]
    jobs = [("made", pickle.dumps(item), k[0], target, o, f"kernel {k[0]!r}")
            for k, item, o in zip(kernels, items, opts)]
    keys = [object_key(k[1], "made", target, o) for k, o in zip(kernels, opts)]
    return _compile(jobs, keys, items, [k[0] for k in kernels], target, stats, opt,
                    here=lambda i: getattr(items[i][0], "in_process", lambda _: False)(items[i][1]))


def made_object_cached(key_text: str, target: Target, opt: Optional[int] = None) -> bool:
    """Whether the object of a made kernel whose key text is ``key_text`` is in the cache (a
    build of it would not compile it)."""
    key = object_key(key_text, "made", target, opt_level() if opt is None else opt)
    return os.path.exists(_object_path(key))


def _compile(jobs: list, keys: list, items: list, names: list, target: Target, stats: Optional[dict],
             opt: int, here=None) -> tuple:
    """The objects of ``jobs`` (cached by ``keys``; ``items`` what each job carries, for a job
    run in this process), then the shared module's; ``(objects, library key, metadata)``."""
    from ...config import debug_level

    objs: list = [None] * len(jobs)
    entries: list = [None] * len(jobs)
    todo = []
    for i, k in enumerate(keys):
        hit = _cached(_object_path(k))
        if hit is None:
            todo.append(i)
        else:
            objs[i], entries[i] = hit
    # this process compiles too: one worker fewer than the cores (on 2 cores a second worker's
    # start -- Python, Ember, LLVM: ~0.4 s of CPU -- cost more than it gave)
    background = _BACKGROUND.get()
    # (a background build uses every core, its last worker only while no run is in flight)
    workers = min(_jobs() - (0 if background else 1), len(todo))
    parallel = _jobs() > 1 and debug_level() < 2  # (debug output goes to this process's stderr)
    if todo and parallel:
        # a cold build: the workers start now, whether this build uses them or the next one
        # (a model's constant folding comes first and compiles its few kernels here)
        _POOL.warm_up(_jobs() - 1)
    # this process takes jobs from the same queue as the workers: while they start (a model's
    # folding program comes first) it does the work, and a small build never waits for them
    results: dict = {}
    if workers >= 1 and parallel and (background or sum(_estimate(jobs[i]) for i in todo) >= PARALLEL_MIN_SECONDS):
        local = {i for i in todo if here is not None and here(i)}
        remote = [i for i in todo if i not in local]
        if remote:
            out = _in_workers([jobs[i] for i in remote], workers,
                              here=None if background else lambda k: _compile_job(jobs[remote[k]], items[remote[k]]),
                              polite=background and workers == _jobs())
            results.update(zip(remote, out))
    for i in todo:
        if i not in results:
            results[i] = _compile_job(jobs[i], items[i])
    for i in todo:
        obj, entry, times = results[i]
        objs[i], entries[i] = obj, entry
        _store(_object_path(keys[i]), obj)
        _store(_object_path(keys[i])[:-2] + ".json", json.dumps(entry).encode())
        if stats is not None:
            stats.setdefault(names[i], {}).update(times)
    if stats is not None:
        done = set(todo)
        for i, n in enumerate(names):
            stats.setdefault(n, {})["cached"] = i not in done
    shared_text, metadata = shared_ir(entries, target, "shared")
    extra = [(shared_text, "kernel '(metadata)'")]
    handoff_text = handoff.object_ir(target.triple)
    if handoff_text is not None:  # (every library carries the lanes' hand-off: no JIT to run it)
        extra.append((handoff_text, "the lanes' hand-off"))
    extra_keys = []
    for text, what in extra:
        key = cache_key(text, target, opt)
        path = _object_path(key)
        obj = _cached(path, with_entry=False)
        if obj is None:
            obj = compile_object(text, target, what, {}, opt)
            _store(path, obj)
        objs.append(obj)
        extra_keys.append(key)
    lib_key = cache_key("\0".join(keys + extra_keys), target)
    return objs, lib_key, metadata


__all__ = ["compile_made_objects", "compile_objects", "in_background", "kernel_ir", "made_object_cached",
           "shared_ir"]
