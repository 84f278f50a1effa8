"""Profiles as files: CSV and JSON for scripts, Chrome trace events for Perfetto and
chrome://tracing (the JSON trace format: complete events ``ph: "X"`` with microsecond times)."""
from __future__ import annotations

import csv
import io
import json
from typing import Optional

_COLUMNS = ["index", "kernel", "nodes", "ops", "op_type", "calls", "total", "mean", "median", "min", "max",
            "percent", "flops", "bytes", "gflops", "gbps", "percent_of_peak"]


def _write(text: str, path: Optional[str]) -> str:
    if path:
        with open(path, "w") as f:
            f.write(text)
    return text


def kernels_csv(prof, path: Optional[str] = None, group_by: str = "call") -> str:
    """One row per kernel call (or group); times in seconds."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=_COLUMNS, extrasaction="ignore")
    w.writeheader()
    for r in prof.select(sort="order" if group_by == "call" else "time", group_by=group_by):
        w.writerow(r.as_dict())
    return _write(buf.getvalue(), path)


def kernels_json(prof, path: Optional[str] = None) -> str:
    """The summary and every row (times in seconds)."""
    doc = {"model": prof.model, "warmup": prof.warmup, "repeat": prof.repeat, "cold": prof.cold,
           "latency_s": prof.latency, "kernel_sum_s": prof.kernel_sum, "overhead": prof.overhead,
           "peak_gflops": prof.peak_gflops, "peak_gbps": prof.peak_gbps, "flop_bound_s": prof.flop_bound,
           "kernels": [{k: r.as_dict()[k] for k in _COLUMNS} for r in prof.rows]}
    return _write(json.dumps(doc, indent=1), path)


def chrome_trace(prof, path: Optional[str] = None) -> str:
    """Every timed kernel call as a complete event on one thread, each run as an enclosing
    event, so Perfetto shows the runs with their kernels nested inside."""
    us = 1e6
    events = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": f"ember: {prof.model}"}},
              {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "run"}}]
    runs: dict = {}
    for run, i, start, dur in prof.events:
        lo, hi = runs.get(run, (start, start + dur))
        runs[run] = (min(lo, start), max(hi, start + dur))
        r = prof.rows[i]
        events.append({"name": r.kernel, "cat": r.op_type, "ph": "X", "pid": 1, "tid": 1,
                       "ts": round(start * us, 3), "dur": round(dur * us, 3),
                       "args": {"nodes": r.nodes, "ops": r.ops, "index": i, "flops": r.flops,
                                "bytes": r.bytes}})
    for run, (lo, hi) in runs.items():
        events.append({"name": f"run {run}", "cat": "run", "ph": "X", "pid": 1, "tid": 1,
                       "ts": round(lo * us, 3), "dur": round((hi - lo) * us, 3), "args": {}})
    return _write(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}), path)


__all__ = ["chrome_trace", "kernels_csv", "kernels_json"]
