"""Timing helpers for benchmarks: warm-up first, then the median of repeated runs."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def median_time(fn: Callable[[], object], warmup: int = 3, repeat: int = 20, min_time: float = 0.0) -> float:
    """Median seconds of ``fn()`` after ``warmup`` untimed calls (the first is never steady)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < min_time:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if len(times) >= 10 * repeat:
            break
    return statistics.median(times)


def interleaved(fns: dict, warmup: int = 3, repeat: int = 20) -> dict:
    """Median seconds of each function, alternating between them so machine noise hits all alike."""
    for f in fns.values():
        for _ in range(warmup):
            f()
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}
