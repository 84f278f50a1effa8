"""Profiling what Ember built: per kernel (with warm-up), per loop (cycle counters from an
instrumentation pass) and per compile phase; tables, CSV, JSON, Chrome traces and plots."""
from .kernels import KernelProfile, KernelRow, profile_kernels

__all__ = ["KernelProfile", "KernelRow", "profile_kernels"]
