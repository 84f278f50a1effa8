"""Run onnx's node test cases (``onnx.backend.test.case.node.collect_testcases``) through a
backend and count passes per op type: Ember's conformance report, with ONNX Runtime on the
same cases for comparison (``python bench/onnx_node_cases.py``).

A case passes when the backend's outputs match the reference outputs at the case's tolerances
(``rtol``/``atol``, onnx's defaults 1e-3/1e-7 like onnx's own runner). Anything else is a
failure, recorded with its reason: an ``EmberError`` (unsupported op or dtype: the error
names it) or a wrong result. A crash of the process is the one thing :func:`run_cases` cannot
record; :func:`run_cases_in_processes` runs the cases in child processes, which also records
crashes (and, on several cores, runs the cases side by side).
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from typing import Callable, Iterable, Optional

import numpy as np


@dataclasses.dataclass
class CaseResult:
    name: str
    op_type: str
    passed: bool
    reason: str = ""  # "" when passed; error class + message, or "mismatch: ..."
    seconds: float = 0.0


def node_cases(pattern: Optional[str] = None) -> list:
    """onnx's node test cases (optionally those whose name contains ``pattern``)."""
    from onnx.backend.test.case.node import collect_testcases

    cases = [c for c in collect_testcases(None) if c.kind == "node"]
    return [c for c in cases if pattern is None or pattern in c.name]


def op_type(case) -> str:
    nodes = case.model.graph.node
    return nodes[-1].op_type if nodes else "?"


def _array(x):
    """onnx's cases hold some values as TensorProtos or numpy scalars; the runner normalizes them."""
    import onnx
    from onnx import numpy_helper

    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    return np.asarray(x) if isinstance(x, np.generic) else x


def _compare(got, want, rtol: float, atol: float, what: str = "output") -> Optional[str]:
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, list) or w is None:  # a sequence (a list of arrays) or an empty optional
            if w is None or not isinstance(g, list):
                if g is None and w is None:
                    continue
                return f"{what} {k}: {type(g).__name__}, expected {type(w).__name__}"
            why = _compare(g, [_array(x) for x in w], rtol, atol, f"{what} {k} item")
            if why:
                return why
            continue
        if isinstance(g, list) or g is None:
            return f"{what} {k}: {type(g).__name__}, expected an array"
        g, w = np.asarray(g), np.asarray(w)
        if w.dtype == object:
            return "sequence/map outputs are not supported"
        if g.shape != w.shape:
            return f"{what} {k}: shape {g.shape}, expected {w.shape}"
        if g.dtype != w.dtype:
            return f"{what} {k}: dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.kind not in "biufc":  # ml_dtypes floats (bfloat16, float8): compare as float32
            g, w = g.astype(np.float32), w.astype(np.float32)
        if w.dtype.kind in "fc":
            ok = np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = np.array_equal(g, w)
        if not ok:
            return f"{what} {k}: values differ (max abs err {np.nanmax(np.abs(g.astype(float) - w.astype(float))):.3g})"
    return None


class _Timeout(Exception):
    pass


def run_case(case, run_model: Callable, timeout: float = 120.0) -> CaseResult:
    """One case through ``run_model(model, inputs) -> outputs``."""
    name, op = case.name, op_type(case)
    t0 = time.perf_counter()

    def alarm(*_):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        for inputs, outputs in case.data_sets:
            got = run_model(case.model, [_array(x) for x in inputs])
            why = _compare(list(got), [_array(x) for x in outputs], case.rtol, case.atol)
            if why:
                return CaseResult(name, op, False, "mismatch: " + why, time.perf_counter() - t0)
        return CaseResult(name, op, True, "", time.perf_counter() - t0)
    except _Timeout:
        return CaseResult(name, op, False, f"timeout after {timeout:.0f} s", time.perf_counter() - t0)
    except Exception as e:  # a report: every failure is recorded with its reason
        msg = " | ".join(line.strip() for line in str(e).splitlines() if line.strip())[:600]
        return CaseResult(name, op, False, f"{type(e).__name__}: {msg}", time.perf_counter() - t0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def ember_runner(**options) -> Callable:
    """Through the onnx Backend: it compiles again for each value of an input that decides a
    shape (binding it as a constant)."""
    from .backend import EmberBackend

    return lambda model, inputs: EmberBackend.run_model(model, inputs, **options)


def compile_runner(**options) -> Callable:
    """As users run a model: ``ember.compile(model)`` once, then ``exe.run(*inputs)``."""
    from ...compiler.compile import compile_model

    def run(model, inputs):
        names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        exe = compile_model(model, **options)
        return exe.run(**dict(zip(names, inputs)))
    return run


def onnxruntime_runner() -> Callable:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 4

    def run(model, inputs):
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        return sess.run(None, dict(zip(names, inputs)))
    return run


def run_cases(cases: Iterable, run_model: Callable, progress: Optional[Callable] = None) -> list:
    out = []
    for k, c in enumerate(cases):
        out.append(run_case(c, run_model))
        if progress:
            progress(k, out[-1])
    return out


STARTUP_SECONDS = 120.0  # a child's start, before it announces a case


def run_cases_in_processes(pattern: Optional[str] = None, runner: str = "ember_runner",
                           processes: Optional[int] = None, timeout: float = 120.0,
                           cases: str = "node_cases", progress: Optional[Callable] = None,
                           patience: Optional[float] = None) -> list:
    """:func:`run_cases` on ``node_cases(pattern)``, dealt round-robin to ``processes`` child
    processes (default: one per core) and returned in the cases' order. ``runner``: the name of
    a runner factory in this module (``"ember_runner"``, ``"compile_runner"``,
    ``"onnxruntime_runner"``) or ``"module:factory"``; ``cases`` likewise names the function
    that lists the cases (given ``pattern``). A child that dies (a segfault in native code)
    records ``crash: ...`` for the case it had announced, and a new child goes on with the rest.
    Each child compiles on its own core (``EMBER_COMPILE_JOBS=1``) when there are several.
    ``progress(k, result)`` is called (under a lock) as the k-th result comes in. A case stuck in
    native code, where its ``timeout`` (a SIGALRM) cannot reach it, is killed with its child
    after ``patience`` seconds without an answer (default: ``timeout`` + 60) and recorded as
    ``crash: the process hung``; a child not yet running a case has at least
    :data:`STARTUP_SECONDS`."""
    names = [c.name for c in _named(cases)(pattern)]
    n = max(1, min(processes or len(os.sched_getaffinity(0)), len(names)))
    results: dict = {}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    if n > 1:
        env["EMBER_COMPILE_JOBS"] = "1"
    job = {"pattern": pattern, "runner": runner, "cases": cases, "timeout": timeout,
           "patience": timeout + 60 if patience is None else patience}
    lock = threading.Lock()

    def record(r: CaseResult) -> None:
        with lock:
            results[r.name] = r
            if progress:
                progress(len(results) - 1, r)
    threads = [threading.Thread(target=_drive_children, args=(names[k::n], job, env, record))
               for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[name] for name in names]


def _named(spec: str) -> Callable:
    """A function of this module by name, or any by ``"module:function"``."""
    module, _, attr = spec.rpartition(":")
    return getattr(importlib.import_module(module or __name__), attr)


def _drive_children(names: list, job: dict, env: dict, record: Callable) -> None:
    """Run ``names`` in a child; after a crash or a hang, the rest in a new one."""
    import queue

    done: set = set()
    cmd = [sys.executable, "-c", "from ember.frontend.onnx.conformance import _child_main; _child_main()"]
    ops: dict = {}
    patience = job["patience"]
    while names:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, text=True)
        err: list = []
        lines: queue.Queue = queue.Queue()
        # (each reader bound to its own child's pipe, list and queue: a killed child's reader,
        # finishing late, put its end-of-output into the next child's queue when these were
        # looked up by name, and that child's results were lost -- recorded as an exit between
        # cases, its stderr holding the old child's)
        threading.Thread(target=lambda p=proc, e=err: e.append(p.stderr.read()), daemon=True).start()
        threading.Thread(target=lambda p=proc, q=lines: ([q.put(x) for x in p.stdout], q.put(None)),
                         daemon=True).start()
        proc.stdin.write(json.dumps(dict(job, names=names)))
        proc.stdin.close()
        current, hung = None, False
        while True:
            try:
                # patience is for a case: a child starting (Python, Ember, LLVM imported) on a
                # loaded machine can take longer than a case may, and killing it there lost
                # every case after it
                line = lines.get(timeout=patience if current is not None else max(patience, STARTUP_SECONDS))
            except queue.Empty:
                hung = True
                proc.kill()
                break
            if line is None:
                break
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "start":
                current, ops[current] = rest.split(" ")[:2]
            elif kind == "result":
                r = CaseResult(**json.loads(rest))
                done.add(r.name)
                record(r)
                current = None
        code = proc.wait()
        names = [m for m in names if m not in done]
        if current is not None:  # the child died (or hung) running this case
            if hung:
                why = f"crash: the process hung (no answer in {patience:.0f} s; killed)"
            else:
                tail = " | ".join(x.strip() for x in "".join(err).splitlines()[-3:] if x.strip())[:300]
                why = (f"crash: the process died ({f'signal {-code}' if code < 0 else f'exit status {code}'})"
                       + (f": {tail}" if tail else ""))
            record(CaseResult(current, ops.get(current, "?"), False, why))
            done.add(current)
            names.remove(current)
        elif names:  # died between cases (or would not start): nothing more to learn from retrying
            for m in names:
                record(CaseResult(m, "?", False, f"crash: the process exited ({code}): {''.join(err)[-300:]}"))
            return


def _child_main() -> None:
    import warnings

    warnings.simplefilter("ignore")
    # the answers go to the parent on the original stdout; anything else printed (by Python or
    # native code) goes to stderr, so it cannot break a line of theirs
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    job = json.loads(sys.stdin.read())
    run_model = _named(job["runner"])()
    wanted = set(job["names"])
    cases = {c.name: c for c in _named(job["cases"])(job["pattern"]) if c.name in wanted}
    for name in job["names"]:
        case = cases[name]
        print("start", name, op_type(case), file=answers, flush=True)
        r = run_case(case, run_model, job["timeout"])
        print("result", json.dumps(dataclasses.asdict(r)), file=answers, flush=True)


def per_op(results: list) -> dict:
    """op type -> (passed, total)."""
    table: dict = defaultdict(lambda: [0, 0])
    for r in results:
        table[r.op_type][1] += 1
        table[r.op_type][0] += r.passed
    return {k: tuple(v) for k, v in sorted(table.items())}


def reasons(results: list, top: int = 20) -> list:
    """The most common failure reasons (first 60 characters), with counts."""
    return Counter(r.reason[:60] for r in results if not r.passed).most_common(top)


__all__ = ["CaseResult", "compile_runner", "node_cases", "op_type", "per_op", "reasons", "run_case", "run_cases",
           "run_cases_in_processes", "ember_runner", "onnxruntime_runner"]
