"""The Executable users get: the runtime's (:class:`ember.runtime.executable.Executable`, which
needs only ctypes and numpy) with what the layers above the runtime add, ``profile`` (the
profiler) and ``export`` (the compiler's exporter). ``ember.compile`` makes one, and
``ember.load`` loads an export as one."""
from __future__ import annotations

from typing import Any

from ..runtime.executable import Executable as RuntimeExecutable

__all__ = ["Executable"]


class Executable(RuntimeExecutable):
    """Kernels, a program and its constants (see the runtime's class), which can also be
    profiled and exported."""

    def profile(self, *arrays: Any, warmup: int = 3, repeat: int = 10, **named: Any):
        """Time every kernel call over ``repeat`` runs after ``warmup`` untimed ones; returns an
        :class:`ember.profile.KernelProfile` (table, CSV, JSON, Chrome trace, plot)."""
        from ..profile.kernels import profile_kernels  # (the profiler's reports: loaded when asked)

        return profile_kernels(self, list(arrays), warmup=warmup, repeat=repeat, named=named)

    def export(self, path: str) -> str:
        """Write one shared library holding the kernels, the program and the weights
        (``ember.load(path)`` brings it back)."""
        from .export import export

        return export(self, path)
