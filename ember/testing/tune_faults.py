"""A tuning task whose candidates fail on purpose, for the tuner's isolation tests.

Its knob ``fault`` picks the failure, each a real one of native code or of a schedule:
``crash`` (the kernel reads 2^36 elements past its input: a segmentation fault), ``hang``
(a reduction of 2^40 steps), ``wrong`` (another answer than the default's), ``error`` (the
schedule raises), ``exit`` (the worker exits) and ``crash_in_place`` (right on the check's
inputs, a segmentation fault on the "model's": those of :class:`FaultyPlace`, its first
element over 100). ``split`` is an ordinary knob.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ScheduleError
from ..loop import compute as te
from ..loop import select
from ..loop.schedule import Schedule
from ..loop.knobs import knob

FAULTS = ("none", "crash", "hang", "wrong", "error", "exit", "crash_in_place")


@dataclasses.dataclass
class FaultyBuilder:
    n: int = 4096

    def schedule(self, target):
        n = self.n
        A = te.placeholder((n,), "float32", "A")
        fault = knob("fault", FAULTS, "none")
        if fault == "exit":
            import os

            os._exit(3)
        if fault == "crash":
            B = te.compute((n,), lambda i: A[i + (1 << 36)] * 2.0, "B")
        elif fault == "crash_in_place":
            B = te.compute((n,), lambda i: A[i + select(A[0] > 100.0, 1 << 36, 0)] * 2.0, "B")
        elif fault == "hang":
            k = te.reduce_axis(1 << 40, "k")
            B = te.compute((n,), lambda i: te.sum(A[(i + k.var) % n], axis=k), "B")
        else:
            B = te.compute((n,), lambda i: A[i] * (3.0 if fault == "wrong" else 2.0), "B")
        if fault == "error":
            raise ScheduleError("stage B: this schedule fails on purpose")
        s = Schedule(B)
        _, inner = s[B].split(B.op.axis[0], factor=knob("split", (4, 8, 16), 8))
        s[B].vectorize(inner) if fault != "hang" else None
        return s, [A, B], "faulty"

    def arrays(self, seed: int = 0) -> list:
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(self.n).astype(np.float32), np.zeros(self.n, np.float32)]


@dataclasses.dataclass(frozen=True)
class FaultyPlace:
    """A stand-in for :class:`~ember.tune.in_place.InPlace` for :class:`FaultyBuilder`'s task:
    its "model" runs the kernel on inputs whose first element is 1000."""

    n: int = 4096

    def available(self) -> bool:
        return True

    def timer(self):
        return _FaultyTimer(self.n)


class _FaultyTimer:
    def __init__(self, n: int):
        self.arrays = [np.full(n, 1000.0, np.float32), np.zeros(n, np.float32)]

    def fits(self, kernel) -> bool:
        return True

    def time(self, kernel) -> float:
        import time

        t0 = time.perf_counter()
        kernel(*self.arrays)
        return time.perf_counter() - t0
