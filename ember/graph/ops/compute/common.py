"""Helpers the op computes share."""
from __future__ import annotations

import functools

from ....loop import compute as te
from ....loop import dtype as dt
from ....loop.expr import Expr, IntImm, as_expr, const
from ...types import Dim
from ..registry import get_op, set_compute


def te_shape(out_type) -> tuple:
    """A graph type's shape in ``te.compute`` terms (a symbolic Dim is its int64 expression)."""
    return tuple(d.expr if isinstance(d, Dim) else d for d in out_type.shape)


def stage_name(op: str) -> str:
    return op.replace(".", "_")


def static_size(d):
    """A dimension's static size, or None when it is symbolic."""
    if isinstance(d, int):
        return d
    return d.value if isinstance(d, IntImm) else None


def index_dims(out_type) -> tuple:
    """``out_type``'s shape as index expressions."""
    return tuple(as_expr(d, dt.INDEX) for d in te_shape(out_type))


def out_stage(op: str, out_type, body) -> te.Tensor:
    """The one stage of ``op``'s result: ``body`` over ``out_type``'s shape."""
    return te.compute(te_shape(out_type), body, stage_name(op))


def register_compute(name: str, fn) -> None:
    """``set_compute(name, ...)`` with the attributes checked and defaults filled first, so a
    compute may be called with a call's raw attributes (``{}`` for all defaults)."""
    op = get_op(name)

    @functools.wraps(fn)
    def compute(attrs, inputs, out_type):
        return fn(op.check_attrs(attrs or {}), list(inputs), out_type)

    set_compute(name, compute)


def const_of(value, dtype: str) -> Expr:
    """The Python number ``value`` as a constant of ``dtype`` (ints truncate, bools test != 0)."""
    if dt.is_float(dtype):
        return const(float(value), dtype)
    if dt.is_bool(dtype):
        return const(bool(value), dtype)
    return const(int(value), dtype)
