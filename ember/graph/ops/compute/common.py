"""Helpers the op computes share."""
from __future__ import annotations

from ...types import Dim


def te_shape(out_type) -> tuple:
    """A graph type's shape in ``te.compute`` terms (a symbolic Dim becomes a named size)."""
    return tuple(d.name if isinstance(d, Dim) else d for d in out_type.shape)


def stage_name(op: str) -> str:
    return op.replace(".", "_")
