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

import concurrent.futures as cf
import os
import pickle
import subprocess
import sys
import tempfile
import time
from typing import Optional

from llvmlite import ir

from ...config import cache_dir
from ...loop import dtype as dt
from ...errors import CompileError, EmberError
from ...target import Target
from .build import cache_key, compile_object, data_layout
from . import profile as _profile
from .codegen import check_kernel_names, emit_function, signature_scalars
from .metadata import add_metadata_global
from .program import add_program_runner

# Starting a worker (a Python that imports llvmlite) costs ~0.4 s; LLVM takes roughly 1.5 s per
# MB of IR text at O3. Below this much new IR, compiling in this process is faster.
PARALLEL_MIN_IR_BYTES = 1_000_000


def kernel_ir(func, target: Target) -> tuple:
    """``func`` alone in an LLVM module: (IR text, metadata entry)."""
    module = ir.Module(name=func.name)
    module.triple = target.triple
    module.data_layout = data_layout(target)
    try:
        entry = emit_function(module, func)
    except EmberError:
        raise
    except Exception as exc:  # a bug or an unsupported construct: say which kernel
        raise CompileError(f"kernel {func.name!r}: code generation failed: {type(exc).__name__}: {exc}") from exc
    return str(module), entry


def shared_ir(funcs: list, entries: list, target: Target, name: str) -> tuple:
    """The module every library has once: metadata, the native program runner (for the
    kernels whose scalar parameters are sizes), and the cycle counter if instrumented."""
    module = ir.Module(name=name)
    module.triple = target.triple
    module.data_layout = data_layout(target)
    arities = {(len(f.buffers), len(signature_scalars(f))) for f in funcs
               if not any(dt.is_float(v.dtype) for v in signature_scalars(f))}
    if arities:
        add_program_runner(module, arities)
    if any(_profile.layout_of(f) for f in funcs):
        _profile.add_cycle_function(module)
    text = add_metadata_global(module, entries)
    return str(module), text


def _object_path(key: str) -> str:
    d = os.path.join(cache_dir(), "objects")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, key + ".o")


def _store(path: str, obj: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".obj-")
    with os.fdopen(fd, "wb") as f:
        f.write(obj)
    os.replace(tmp, path)


def _compile_job(job: tuple) -> tuple:
    """Worker: (IR text, target, what) -> (object bytes, times)."""
    text, target, what = job
    times: dict = {}
    obj = compile_object(text, target, what, times)
    return obj, times


def _worker_main() -> None:
    """A worker process: a pickled list of jobs on stdin, a pickled list of results (or the
    exception) on stdout."""
    jobs = pickle.load(sys.stdin.buffer)
    try:
        out = [_compile_job(j) for j in jobs]
    except BaseException as exc:  # sent back and raised in the parent, with its message
        out = exc
    pickle.dump(out, sys.stdout.buffer)


def _in_workers(jobs: list, workers: int) -> list:
    """Compile ``jobs`` in ``workers`` fresh Python processes, balanced by IR size.

    Plain subprocesses rather than multiprocessing: a spawned multiprocessing child re-imports
    the caller's ``__main__`` (a user's script without a main guard would run again), and a
    forked one would inherit the OpenMP threads of kernels already loaded."""
    buckets: list = [[] for _ in range(workers)]
    loads = [0] * workers
    for i in sorted(range(len(jobs)), key=lambda i: -len(jobs[i][0])):  # longest first
        k = loads.index(min(loads))
        buckets[k].append(i)
        loads[k] += len(jobs[i][0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    cmd = [sys.executable, "-c", "from ember.codegen.llvm.objects import _worker_main; _worker_main()"]

    def run(bucket: list):
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        out, err = p.communicate(pickle.dumps([jobs[i] for i in bucket]))
        what = ", ".join(jobs[i][2] for i in bucket[:4]) + (" ..." if len(bucket) > 4 else "")
        if p.returncode != 0 or not out:
            raise CompileError(f"a compile worker for {what} died (exit {p.returncode}): "
                               f"{err.decode(errors='replace').strip()[-2000:]}")
        res = pickle.loads(out)
        if isinstance(res, BaseException):
            raise res
        return res

    results: list = [None] * len(jobs)
    with cf.ThreadPoolExecutor(workers) as pool:  # threads only wait on the processes
        for bucket, res in zip(buckets, pool.map(run, buckets)):
            for i, r in zip(bucket, res):
                results[i] = r
    return results


def _jobs() -> int:
    env = os.environ.get("EMBER_COMPILE_JOBS")
    if env:
        return max(1, int(env))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def compile_objects(funcs: list, target: Target, stats: Optional[dict] = None) -> tuple:
    """Objects for ``funcs`` (one each, cached) and the library key; returns
    ``(objects, key, metadata)``. ``stats[kernel name]`` (if given) gets the seconds of
    ``llvm_emit``, ``llvm_opt`` and ``llvm_codegen``, ``llvm_lines`` and ``cached``."""
    check_kernel_names(funcs)
    texts, entries = [], []
    for f in funcs:
        t0 = time.perf_counter()
        text, entry = kernel_ir(f, target)
        texts.append(text)
        entries.append(entry)
        if stats is not None:
            stats.setdefault(f.name, {}).update(llvm_emit=time.perf_counter() - t0, llvm_lines=text.count("\n"))
    shared_text, metadata = shared_ir(funcs, entries, target, "shared")
    keys = [cache_key(t, target) for t in texts + [shared_text]]
    objs: list = [None] * len(keys)
    todo = []
    for i, k in enumerate(keys):
        path = _object_path(k)
        if os.path.exists(path):
            with open(path, "rb") as fh:
                objs[i] = fh.read()
        else:
            todo.append(i)
    names = [f.name for f in funcs] + ["(metadata)"]
    jobs = [((texts + [shared_text])[i], target, f"kernel {names[i]!r}") for i in todo]
    workers = min(_jobs(), len(jobs))
    if workers > 1 and sum(len(j[0]) for j in jobs) >= PARALLEL_MIN_IR_BYTES:
        results = _in_workers(jobs, workers)
    else:
        results = [_compile_job(j) for j in jobs]
    for i, (obj, times) in zip(todo, results):
        objs[i] = obj
        _store(_object_path(keys[i]), obj)
        if stats is not None and i < len(funcs):
            stats[names[i]].update(times)
    if stats is not None:
        done = set(todo)
        for i, f in enumerate(funcs):
            stats[f.name]["cached"] = i not in done
    lib_key = cache_key("\0".join(keys), target)
    return objs, lib_key, metadata


__all__ = ["compile_objects", "kernel_ir", "shared_ir"]
