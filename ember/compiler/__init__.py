"""From a graph module to an Executable: the passes, kernel lowering per fused group, the
program and its memory plan. ``ember.compile`` is the front door."""
from .compile import compile_model

__all__ = ["compile_model"]
