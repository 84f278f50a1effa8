"""Run onnx's node test cases (``onnx.backend.test.case.node.collect_testcases``) through a
backend and count passes per op type: Ember's conformance report, with ONNX Runtime on the
same cases for comparison (``python bench/onnx_node_cases.py``).

A case passes when the backend's outputs match the reference outputs at the case's tolerances
(``rtol``/``atol``, onnx's defaults 1e-3/1e-7 like onnx's own runner). Anything else is a
failure, recorded with its reason: an ``EmberError`` (unsupported op or dtype: the error
names it) or a wrong result. A crash of the process is the one thing this cannot record.
"""
from __future__ import annotations

import dataclasses
import signal
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


def _compare(got, want, rtol: float, atol: float) -> Optional[str]:
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if w.dtype == object:
            return "sequence/map outputs are not supported"
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape}, expected {w.shape}"
        if g.dtype != w.dtype:
            return f"output {k}: dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.kind not in "biufc":  # ml_dtypes floats (bfloat16, float8): compare as float32
            g, w = g.astype(np.float32), w.astype(np.float32)
        if w.dtype.kind in "fc":
            ok = np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = np.array_equal(g, w)
        if not ok:
            return f"output {k}: values differ (max abs err {np.nanmax(np.abs(g.astype(float) - w.astype(float))):.3g})"
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
           "ember_runner", "onnxruntime_runner"]
