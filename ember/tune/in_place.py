"""Candidates timed in place: inside the model, where the kernel will run.

Timed alone, a kernel's inputs come from wherever the measurement puts them (hot in the caches,
or cold copies from memory). In the model they come from the kernel before it, which has just
written them -- each half from one core -- and that changes which schedule wins. Measured on
EfficientNet-B0's 1x1 convs at 7x7 (candidate over default, paired, one process, two runs
each): 1152->320 channels with the whole reduction in one pass, 0.99x and 1.00x alone, 0.80x
and 0.77x in the model; 1152->192 in row chunks, weight group 6, 1.02x and 1.05x alone, 0.94x
and 0.87x in the model. (Elsewhere the two agree: a 56x56 conv's 14 columns, 1.3x both ways.)

So where the untuned model can be loaded by the measuring process (this machine's child
processes, a LocalCluster's workers), the tuner exports it once as one shared library
(:func:`export_untuned`), and each batch's candidates are timed in it (:class:`PlaceTimer`):
the task's calls run the candidate's kernel, every other call its default, and the task's
calls are timed as the profiler times them, one run of the model per candidate and per round,
the default's run beside them in the same round (the pair's ratio is what the tuner compares,
as alone). Where the library is not there (a remote cluster), candidates are timed alone.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os

from ..errors import TuneError

__all__ = ["InPlace", "PlaceTimer", "export_untuned"]


@dataclasses.dataclass(frozen=True)
class InPlace:
    """Where a task's candidates are timed in place: the untuned model as one shared library
    (``path``, :func:`export_untuned`) and the name of the task's kernel in it."""

    path: str
    kernel: str

    def available(self) -> bool:
        """Whether the library is on this machine (a remote worker's may lack it)."""
        return os.path.exists(self.path)

    def timer(self) -> "PlaceTimer":
        """The model loaded here, to time candidates in (in the measuring child)."""
        return PlaceTimer(self)


def export_untuned(exe, directory: str) -> str:
    """Export the tuner's untuned executable (static kernels) into ``directory``; its path."""
    name = hashlib.sha1(repr(exe.program["calls"]).encode()).hexdigest()[:16]
    path = os.path.join(directory, f"untuned-{name}.so")
    exe.export(path)
    return path


class PlaceTimer:
    """The untuned model loaded, with random inputs bound, ready to time one task's calls with
    a candidate kernel in their place."""

    def __init__(self, where: InPlace):
        from ..runtime.load import load
        from .tasks import random_inputs

        self.exe = exe = load(where.path)
        if not exe._single:
            raise TuneError(f"{where.path}: a program run in phases is not timed in place")
        self.index = [i for i, c in enumerate(exe.program["calls"]) if c["kernel"] == where.kernel]
        if not self.index:
            raise TuneError(f"{where.path} has no call of kernel {where.kernel!r}")
        self.bound = exe._inputs(tuple(random_inputs(exe)), {})
        self.layout = exe._layout(self.bound)
        self._params = _params(exe._calls[self.index[0]][0])

    def fits(self, kernel) -> bool:
        """Whether ``kernel`` takes the same arguments as the model's kernel it would replace."""
        return _params(kernel) == self._params

    def time(self, kernel) -> float:
        """One run of the model with ``kernel`` in the task's calls: their mean seconds per call."""
        from ..profile.kernels import time_calls

        calls = list(self.exe._calls)
        for i in self.index:
            calls[i] = (kernel, calls[i][1])
        times = time_calls(self.exe, self.bound, self.layout, calls)
        return sum(times[i][1] for i in self.index) / len(self.index)


def _params(kernel) -> list:
    return [(p["kind"], p.get("dtype"), str(p.get("shape"))) for p in kernel.meta["params"]]
