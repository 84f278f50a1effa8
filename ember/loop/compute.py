"""Tensor computations [te]: describe *what* a kernel computes, index by index.

    A = placeholder((n, k), "float32", "A")
    B = placeholder((k, m), "float32", "B")
    r = reduce_axis(k, "r")
    C = compute((n, m), lambda i, j: sum(A[i, r] * B[r, j], axis=r), "C")

A :class:`Schedule` then decides *how* (loop order, tiling, vectorization, threads), and
:func:`ember.loop.lower` turns both into a loop program.
"""
from __future__ import annotations

import inspect
import itertools
from typing import Callable, Optional, Sequence

from ..errors import DTypeError, LoweringError, ShapeError
from . import dtype as dt
from .expr import Expr, IntImm, Var, as_expr, cast, const
from .node import Node, node


@node
class IterVar(Node):
    """A loop axis of a computation: ``var`` ranges over ``[0, extent)``."""

    var: Var
    extent: Expr
    kind: str = "spatial"  # or "reduce"

    @property
    def name(self) -> str:
        return self.var.name

    def as_expr(self) -> Var:
        return self.var


def _forward(opname):
    def f(self, *args):
        return getattr(self.var, opname)(*args)
    return f


# An IterVar reads as its variable inside index arithmetic (``A[i, r * 2 + 1]``).
for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
            "__rfloordiv__", "__mod__", "__rmod__", "__neg__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(IterVar, _op, _forward(_op))


@node
class Reduce(Expr):
    """``combiner`` over ``axis`` of ``source`` where ``condition`` holds, starting at ``init``."""

    combiner: str  # sum | prod | max | min
    source: Expr
    axis: tuple
    init: Expr
    condition: Optional[Expr] = None

    @property
    def dtype(self) -> str:
        return self.source.dtype


class Operation:
    """Something that produces a tensor. Compared by identity: each op is one stage."""

    name: str
    shape: tuple
    dtype: str

    def output(self) -> "Tensor":
        return self._tensor


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype
        self._tensor = Tensor(self)

    def __repr__(self):
        return f"placeholder({self.name}, {self.shape}, {self.dtype})"


class ComputeOp(Operation):
    def __init__(self, name: str, axis: tuple, body: Expr, tag: str = "", attrs: Optional[dict] = None):
        self.name, self.axis, self.body, self.tag = name, axis, body, tag
        self.attrs = dict(attrs or {})
        self.shape = tuple(iv.extent for iv in axis)
        self.dtype = body.dtype
        self._tensor = Tensor(self)

    @property
    def reduce_axis(self) -> tuple:
        return self.body.axis if isinstance(self.body, Reduce) else ()

    def input_tensors(self) -> list:
        from .visit import walk

        out = []
        for n in walk(self.body):
            if isinstance(n, TensorLoad) and n.tensor not in out:
                out.append(n.tensor)
        return out

    def __repr__(self):
        return f"compute({self.name}, {self.shape})"


class Tensor:
    """The output of an operation; index it (``T[i, j]``) inside a compute to read it."""

    __slots__ = ("op",)

    def __init__(self, op: Operation):
        self.op = op

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def shape(self) -> tuple:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    def __getitem__(self, indices) -> "TensorLoad":
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise ShapeError(f"tensor {self.name} has {self.ndim} dims, indexed with {len(indices)}")
        return TensorLoad(self, tuple(as_expr(i, dt.INDEX) for i in indices))

    def __repr__(self):
        return f"Tensor({self.name}, {tuple(self.shape)}, {self.dtype})"

    def __hash__(self):
        return id(self.op)

    def __eq__(self, other):
        return isinstance(other, Tensor) and other.op is self.op


@node
class TensorLoad(Expr):
    """Read of a tensor element inside a computation (becomes a Load when lowered)."""

    tensor: Tensor
    indices: tuple

    @property
    def dtype(self) -> str:
        return self.tensor.dtype


_names = itertools.count()


def _shape(shape) -> tuple:
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    out = []
    for s in shape:
        s = Var(s) if isinstance(s, str) else as_expr(s)
        if isinstance(s, IntImm) and s.value < 0:
            raise ShapeError(f"negative dimension {s.value} in shape {tuple(shape)}")
        out.append(s)
    return tuple(out)


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor. A ``str`` dimension (``("batch", 3)``) is a symbolic size."""
    return PlaceholderOp(name, _shape(shape), dt.check(dtype)).output()


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "",
            attrs: Optional[dict] = None) -> Tensor:
    """A tensor whose element at index ``(i, j, ...)`` is ``fcompute(i, j, ...)``."""
    shape = _shape(shape)
    sig = inspect.signature(fcompute).parameters.values()
    params = [p.name for p in sig if p.default is inspect.Parameter.empty
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) != len(shape) and not any(p.kind == p.VAR_POSITIONAL for p in sig):
        raise ShapeError(f"compute {name}: shape has {len(shape)} dims but fcompute takes {len(params)}")
    names = params if len(params) == len(shape) else [f"i{k}" for k in range(len(shape))]
    axis = tuple(IterVar(Var(f"{nm}"), ext, "spatial") for nm, ext in zip(names, shape))
    body = as_expr(fcompute(*[iv.var for iv in axis]))
    if isinstance(body, Reduce) is False and _contains_reduce(body):
        raise LoweringError(f"compute {name}: a reduction must be the whole body, not part of it "
                            f"(compute it in its own stage)")
    return ComputeOp(name, axis, body, tag, attrs).output()


def _contains_reduce(e) -> bool:
    from .visit import walk

    return any(isinstance(n, Reduce) for n in walk(e))


def reduce_axis(extent, name: str = "r") -> IterVar:
    """An axis to reduce over, ``[0, extent)``."""
    return IterVar(Var(name), as_expr(extent), "reduce")


def _axes(axis) -> tuple:
    if isinstance(axis, IterVar):
        axis = (axis,)
    axis = tuple(axis)
    for a in axis:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise LoweringError(f"reduction axis must come from reduce_axis(), got {a!r}")
    return axis


def _identity(combiner: str, dtype: str) -> Expr:
    import numpy as np

    if combiner == "sum":
        return const(0, dtype)
    if combiner == "prod":
        return const(1, dtype)
    if dt.is_float(dtype):
        return const(float("-inf") if combiner == "max" else float("inf"), dtype)
    if dt.is_bool(dtype):
        return const(combiner == "min", dtype)
    info = np.iinfo(dt.numpy_dtype(dtype))
    return const(int(info.min if combiner == "max" else info.max), dtype)


def _reducer(combiner: str):
    def reduce(expr, axis, where=None, init=None) -> Reduce:
        expr = as_expr(expr)
        init = _identity(combiner, expr.dtype) if init is None else as_expr(init, expr.dtype)
        if init.dtype != expr.dtype:
            init = cast(expr.dtype, init)
        cond = None if where is None else as_expr(where)
        if cond is not None and not dt.is_bool(cond.dtype):
            raise DTypeError(f"reduction condition must be bool, got {cond.dtype}")
        return Reduce(combiner, expr, _axes(axis), init, cond)

    reduce.__name__ = combiner
    reduce.__doc__ = f"The {combiner} of ``expr`` over ``axis`` (optionally only ``where`` true)."
    return reduce


sum = _reducer("sum")
prod = _reducer("prod")
max = _reducer("max")
min = _reducer("min")


def combine(combiner: str, acc: Expr, value: Expr) -> Expr:
    """One step of a reduction: fold ``value`` into ``acc``."""
    from .expr import Add, Max, Min, Mul, Or, And

    if combiner == "sum":
        return Add(acc, value)
    if combiner == "prod":
        return Mul(acc, value)
    if dt.is_bool(acc.dtype):
        return Or(acc, value) if combiner == "max" else And(acc, value)
    return Max(acc, value) if combiner == "max" else Min(acc, value)


def topo_order(outputs: Sequence[Tensor]) -> list:
    """Operations reachable from ``outputs``, producers before consumers."""
    order, seen = [], set()

    def visit(op):
        if id(op) in seen:
            return
        seen.add(id(op))
        if isinstance(op, ComputeOp):
            for t in op.input_tensors():
                visit(t.op)
        order.append(op)

    for t in outputs:
        visit(t.op)
    return order
