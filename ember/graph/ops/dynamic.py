"""Ops whose output sizes are known only when the model runs.

A size a kernel computes (how many elements of a tensor are nonzero) becomes a *data size*:
a symbolic :class:`~ember.graph.types.Dim` named with :data:`~.dims.DATA_PREFIX`, at least 0.
``bind_size(c, symbols=(n,))`` passes the integer tensor ``c`` through and declares that ``n``
is its first element: the program binds ``n`` from ``c`` once the kernel that makes ``c`` has
run, and only then lays out the values whose shapes mention ``n``. An op that produces such a
shape takes the bound tensor as an argument, so the dataflow orders it after the bind:

    c = sum(cast(not_equal(x, 0), int64))            # a kernel: the count
    c = bind_size(c, symbols=(?nz,))                 # the program binds ?nz := c[0]
    y = nonzero(x, c, size=?nz)                      # Tensor[(rank, ?nz), int64]
"""
from __future__ import annotations

from ...errors import ShapeError
from ..types import Dim, TensorType
from .dims import is_data_symbol
from .registry import Pattern, attr, register_op, tensor


def _infer_bind_size(args, attrs):
    c = tensor(args[0])
    if c.dtype not in ("int32", "int64"):
        raise ShapeError(f"bind_size: the sizes must be integers, got {c}")
    syms = attrs["symbols"]
    if not syms or any(not (isinstance(s, Dim) and s.is_symbol and is_data_symbol(s.expr.name)) for s in syms):
        raise ShapeError(f"bind_size: symbols must be data sizes (Dims named '?...'), got {syms}")
    if not c.is_static or len(syms) > max(1, _numel(c)):
        raise ShapeError(f"bind_size: {len(syms)} symbol(s) from {c}")
    return c


def _numel(t: TensorType) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


def _infer_nonzero(args, attrs):
    x, c = tensor(args[0], "input 0"), tensor(args[1], "input 1")
    if c.shape != () or c.dtype != "int64":
        raise ShapeError(f"nonzero: the count must be an int64 scalar, got {c}")
    return TensorType((x.ndim, attrs["size"]), "int64")


register_op("bind_size", infer=_infer_bind_size, pattern=Pattern.OPAQUE, attrs_schema={"symbols": attr("dims")},
            doc="the integer tensor itself; the program binds each data size in symbols to one of its "
                "elements (in order) once it is computed")
register_op("nonzero", infer=_infer_nonzero, pattern=Pattern.OPAQUE, num_args=2,
            attrs_schema={"size": attr("dim")},
            doc="the indices of the nonzero elements of x (rank x size, row-major order); the count "
                "(bound to size) comes first")

def _infer_unique_classes(args, attrs):
    rows = tensor(args[0], "input 0")
    if rows.ndim != 2:
        raise ShapeError(f"unique_classes: the rows must be 2-D, got {rows}")
    return TensorType((2, rows.shape[0]), "int64")


def _infer_unique_tally(args, attrs):
    cls, c = tensor(args[0], "input 0"), tensor(args[1], "input 1")
    if cls.ndim != 2 or cls.shape[0] != 2 or cls.dtype != "int64" or c.shape != () or c.dtype != "int64":
        raise ShapeError(f"unique_tally: classes (2, n) and an int64 count, got {cls} and {c}")
    return TensorType((2, attrs["size"]), "int64")


register_op("unique_classes", infer=_infer_unique_classes, pattern=Pattern.OPAQUE,
            attrs_schema={"sorted": attr("bool", True)},
            doc="for each row of a matrix: the first row equal to it, and its class's place among the "
                "distinct rows (ascending, lexicographic, when sorted; else by first occurrence)")
register_op("unique_tally", infer=_infer_unique_tally, pattern=Pattern.OPAQUE, num_args=2,
            attrs_schema={"size": attr("dim")},
            doc="per class (size of them, the count bound to it): the row of its first occurrence "
                "and how many rows it has")

__all__: list = []
