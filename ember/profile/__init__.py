"""Profiling what Ember built: per kernel with warm-up (:func:`profile_kernels`, also
``exe.profile``), per loop with cycle counters from an instrumentation pass
(:func:`profile_loops`), and exports (table, CSV, JSON, Chrome trace, plot)."""
from .kernels import KernelProfile, KernelRow, profile_kernels
from .loop_report import LoopProfile, LoopRow
from .loops import build_instrumented, profile_loops

__all__ = ["KernelProfile", "KernelRow", "LoopProfile", "LoopRow", "build_instrumented", "profile_kernels",
           "profile_loops"]
