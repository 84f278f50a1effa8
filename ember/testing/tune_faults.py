"""A tuning task whose candidates fail on purpose, for the tuner's isolation tests.

Its knob ``fault`` picks the failure, each a real one of native code or of a schedule:
``crash`` (the kernel reads 2^36 elements past its input: a segmentation fault), ``hang``
(a reduction of 2^40 steps), ``wrong`` (another answer than the default's), ``error`` (the
schedule raises) and ``exit`` (the worker exits). ``split`` is an ordinary knob.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ScheduleError
from ..loop import compute as te
from ..loop.schedule import Schedule
from ..tune.space import knob

FAULTS = ("none", "crash", "hang", "wrong", "error", "exit")


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
