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


def interleaved(fns: dict, warmup: int = 3, repeat: int = 20, settle: float = 0.12) -> dict:
    """Median seconds of each function, alternating between them so machine noise hits all alike.

    Each turn runs one function a few times back to back after a short pause: thread pools of
    different runtimes (OpenMP's, OpenBLAS's, ONNX Runtime's) keep spinning for a while after
    their last call (OpenBLAS's for about 0.1 s), and would otherwise steal the cores of
    whichever runs next.
    """
    number = {}
    for k, f in fns.items():
        for _ in range(warmup):
            f()
        t = time.perf_counter()
        f()
        one = time.perf_counter() - t
        number[k] = max(1, min(20, int(0.02 / max(one, 1e-7))))
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            time.sleep(settle)
            f()  # wakes this runtime's threads
            t = time.perf_counter()
            for _ in range(number[k]):
                f()
            times[k].append((time.perf_counter() - t) / number[k])
    return {k: statistics.median(v) for k, v in times.items()}
