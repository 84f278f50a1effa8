"""Expressions of the loop IR (and of tensor computations, which share them).

Every expression has a ``dtype``. Index arithmetic is ``int64`` throughout. Python operators
build nodes: ``+ - * / // % < <= > >= & | ^ ~ << >>`` and unary ``-``; ``==`` is *structural*
equality (nodes are values), so equality comparisons are built with :func:`eq` and :func:`ne`.
"""
from __future__ import annotations

import struct
from typing import Any, Optional

from ..errors import DTypeError
from . import dtype as dt
from .node import Node, node

ExprLike = Any  # Expr | int | float | bool


class Expr(Node):
    """Base class of expressions."""

    __slots__ = ()

    @property
    def dtype(self) -> str:  # overridden by every subclass
        raise NotImplementedError

    # -- arithmetic -------------------------------------------------------------------------
    def __add__(self, o): return _binary(Add, self, o)
    def __radd__(self, o): return _binary(Add, o, self)
    def __sub__(self, o): return _binary(Sub, self, o)
    def __rsub__(self, o): return _binary(Sub, o, self)
    def __mul__(self, o): return _binary(Mul, self, o)
    def __rmul__(self, o): return _binary(Mul, o, self)
    def __truediv__(self, o): return _binary(Div, self, o)
    def __rtruediv__(self, o): return _binary(Div, o, self)
    def __floordiv__(self, o): return _binary(FloorDiv, self, o)
    def __rfloordiv__(self, o): return _binary(FloorDiv, o, self)
    def __mod__(self, o): return _binary(FloorMod, self, o)
    def __rmod__(self, o): return _binary(FloorMod, o, self)
    def __neg__(self): return _binary(Sub, const(0, self.dtype), self)
    def __lt__(self, o): return _binary(LT, self, o)
    def __le__(self, o): return _binary(LE, self, o)
    def __gt__(self, o): return _binary(GT, self, o)
    def __ge__(self, o): return _binary(GE, self, o)
    def __and__(self, o): return _binary(And if dt.is_bool(self.dtype) else BitAnd, self, o)
    def __rand__(self, o): return _binary(And if dt.is_bool(self.dtype) else BitAnd, o, self)
    def __or__(self, o): return _binary(Or if dt.is_bool(self.dtype) else BitOr, self, o)
    def __ror__(self, o): return _binary(Or if dt.is_bool(self.dtype) else BitOr, o, self)
    def __xor__(self, o): return _binary(BitXor if not dt.is_bool(self.dtype) else NE, self, o)
    def __lshift__(self, o): return _binary(Shl, self, o)
    def __rshift__(self, o): return _binary(Shr, self, o)

    def __invert__(self):
        if dt.is_bool(self.dtype):
            return Not(self)
        return _binary(BitXor, self, const(-1, self.dtype))

    def __bool__(self):
        raise TypeError(
            "an Ember expression has no truth value: use ember.loop.if_then_else/select, "
            "and eq()/ne() to build comparisons")

    def astype(self, dtype: str) -> "Expr":
        return cast(dtype, self)


# --- leaves --------------------------------------------------------------------------------

@node
class IntImm(Expr):
    value: int
    type: str = dt.INDEX

    @property
    def dtype(self) -> str:
        return self.type


@node
class FloatImm(Expr):
    value: float
    type: str = "float32"

    @property
    def dtype(self) -> str:
        return self.type

    def _key(self) -> tuple:
        # Compare constants by their bits: in Python -0.0 == 0.0 and nan != nan, but as
        # constants -0.0 and 0.0 differ (1/x) and a NaN is the same value as itself.
        return (struct.pack("<d", float(self.value)), self.type)


@node
class Var(Expr):
    """A named scalar: a loop variable, a let binding or a symbolic shape dimension."""

    name: str
    type: str = dt.INDEX

    @property
    def dtype(self) -> str:
        return self.type


# --- operators -----------------------------------------------------------------------------

@node
class BinaryOp(Expr):
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:
        return self.a.dtype


class Add(BinaryOp): pass
class Sub(BinaryOp): pass
class Mul(BinaryOp): pass
class Div(BinaryOp):
    """True division (floats) or C division truncating toward zero (integers)."""
class FloorDiv(BinaryOp): pass
class FloorMod(BinaryOp): pass
class Mod(BinaryOp):
    """Remainder with the sign of the dividend (C ``%`` / ``fmod``)."""
class Min(BinaryOp): pass
class Max(BinaryOp): pass
class BitAnd(BinaryOp): pass
class BitOr(BinaryOp): pass
class BitXor(BinaryOp): pass
class Shl(BinaryOp): pass
class Shr(BinaryOp):
    """Shift right: arithmetic for signed, logical for unsigned integers."""


class CmpOp(BinaryOp):
    @property
    def dtype(self) -> str:
        return dt.with_lanes("bool", dt.lanes(self.a.dtype))


class EQ(CmpOp): pass
class NE(CmpOp): pass
class LT(CmpOp): pass
class LE(CmpOp): pass
class GT(CmpOp): pass
class GE(CmpOp): pass


class And(BinaryOp): pass
class Or(BinaryOp): pass


for _c in (Add, Sub, Mul, Div, FloorDiv, FloorMod, Mod, Min, Max, BitAnd, BitOr, BitXor, Shl, Shr,
           EQ, NE, LT, LE, GT, GE, And, Or):
    node(_c)

BINARY_OPS = {c.__name__: c for c in (Add, Sub, Mul, Div, FloorDiv, FloorMod, Mod, Min, Max, BitAnd,
                                      BitOr, BitXor, Shl, Shr, EQ, NE, LT, LE, GT, GE, And, Or)}


@node
class Not(Expr):
    a: Expr

    @property
    def dtype(self) -> str:
        return self.a.dtype


@node
class Cast(Expr):
    type: str
    value: Expr

    @property
    def dtype(self) -> str:
        return self.type


@node
class Select(Expr):
    """``true_value if condition else false_value``; both sides may be evaluated."""

    condition: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self) -> str:
        return self.true_value.dtype


@node
class Call(Expr):
    """A call of a pure intrinsic (``exp``, ``sqrt``, ``fma``, ...); see ``intrinsics.py``."""

    type: str
    name: str
    args: tuple

    @property
    def dtype(self) -> str:
        return self.type


@node
class Ramp(Expr):
    """The vector ``[base, base + stride, ..., base + (lanes - 1) * stride]``."""

    base: Expr
    stride: Expr
    lanes: int

    @property
    def dtype(self) -> str:
        return dt.with_lanes(self.base.dtype, self.lanes)


@node
class Broadcast(Expr):
    value: Expr
    lanes: int

    @property
    def dtype(self) -> str:
        return dt.with_lanes(self.value.dtype, self.lanes)


@node
class Let(Expr):
    var: Var
    value: Expr
    body: Expr

    @property
    def dtype(self) -> str:
        return self.body.dtype


@node
class Load(Expr):
    """Read ``buffer[indices]``; a vector index (a Ramp) loads a vector, a predicate masks lanes."""

    buffer: Any  # Buffer
    indices: tuple
    predicate: Optional[Expr] = None

    @property
    def dtype(self) -> str:
        n = max((dt.lanes(i.dtype) for i in self.indices), default=1)
        return dt.with_lanes(self.buffer.dtype, n)


# --- construction helpers ------------------------------------------------------------------

def unflatten(flat, shape) -> tuple:
    """The row-major indices of element ``flat`` of an array of ``shape`` (the first index
    is what remains after the others: no modulo on it)."""
    if not len(shape):
        return ()
    out = []
    for d in reversed(tuple(shape)[1:]):
        out.append(flat % d)
        flat = flat // d
    return (flat, *reversed(out))


def const(value, dtype: Optional[str] = None) -> Expr:
    """A constant of ``dtype`` (inferred from the Python type when not given)."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = dt.INDEX
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise DTypeError(f"cannot make a constant from {value!r}")
    dt.check(dtype)
    n = dt.lanes(dtype)
    if n > 1:
        return Broadcast(const(value, dt.element(dtype)), n)
    if dt.is_float(dtype):
        return FloatImm(float(value), dtype)
    if dt.is_bool(dtype):
        return IntImm(int(bool(value)), dtype)
    return IntImm(int(value), dtype)


def as_expr(value: ExprLike, like: Optional[str] = None) -> Expr:
    """Turn a Python scalar into a constant (of dtype ``like`` when given)."""
    if isinstance(value, Expr):
        return value
    if hasattr(value, "as_expr"):
        return value.as_expr()
    if isinstance(value, (bool, int, float)) or hasattr(value, "dtype"):
        if like is not None:
            if isinstance(value, float) and not dt.is_float(like):
                raise DTypeError(f"float constant {value} used with an expression of dtype {like}")
            return const(value.item() if hasattr(value, "item") else value, like)
        return const(value.item() if hasattr(value, "item") else value)
    raise DTypeError(f"cannot use {value!r} ({type(value).__name__}) as an expression")


def _binary(cls, a: ExprLike, b: ExprLike) -> Expr:
    if not isinstance(a, Expr) and isinstance(b, Expr):
        a = as_expr(a, dt.element(b.dtype))
    elif not isinstance(b, Expr) and isinstance(a, Expr):
        b = as_expr(b, dt.element(a.dtype))
    else:
        a, b = as_expr(a), as_expr(b)
    la, lb = dt.lanes(a.dtype), dt.lanes(b.dtype)
    if la != lb:
        if la == 1:
            a = Broadcast(a, lb)
        elif lb == 1:
            b = Broadcast(b, la)
    if dt.element(a.dtype) != dt.element(b.dtype):
        raise DTypeError(
            f"{cls.__name__} of mismatched dtypes {a.dtype} and {b.dtype}: cast one side "
            f"(expr.astype('{a.dtype}'))")
    if cls is Div and not dt.is_float(a.dtype):
        raise DTypeError("'/' on integers is ambiguous: use '//' (floor division) or truncdiv()")
    return cls(a, b)


def cast(dtype: str, value: ExprLike) -> Expr:
    value = as_expr(value)
    n = dt.lanes(value.dtype)
    dtype = dt.with_lanes(dtype, n) if dt.lanes(dtype) == 1 else dtype
    if value.dtype == dtype:
        return value
    return Cast(dt.check(dtype), value)


def eq(a: ExprLike, b: ExprLike) -> Expr:
    return _binary(EQ, a, b)


def ne(a: ExprLike, b: ExprLike) -> Expr:
    return _binary(NE, a, b)


def min_(a: ExprLike, b: ExprLike) -> Expr:
    return _binary(Min, a, b)


def max_(a: ExprLike, b: ExprLike) -> Expr:
    return _binary(Max, a, b)


def truncdiv(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if dt.is_float(a.dtype):
        return _binary(Div, a, b)
    return Div(*_coerce(a, b))


def truncmod(a: ExprLike, b: ExprLike) -> Expr:
    return _binary(Mod, a, b)


def _coerce(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    c = _binary(Add, a, b)
    return c.a, c.b


def select(condition: ExprLike, true_value: ExprLike, false_value: ExprLike) -> Expr:
    """Pick ``true_value`` where ``condition`` holds (both sides may be evaluated)."""
    condition = as_expr(condition)
    if not dt.is_bool(condition.dtype):
        raise DTypeError(f"select condition must be bool, got {condition.dtype}")
    if isinstance(true_value, Expr) or not isinstance(false_value, Expr):
        t = as_expr(true_value)
        f = as_expr(false_value, dt.element(t.dtype))
    else:
        f = false_value
        t = as_expr(true_value, dt.element(f.dtype))
    t, f = _coerce(t, f)
    lanes = max(dt.lanes(t.dtype), dt.lanes(condition.dtype))
    if dt.lanes(t.dtype) < lanes:
        t, f = Broadcast(t, lanes), Broadcast(f, lanes)
    if dt.lanes(condition.dtype) < lanes:
        condition = Broadcast(condition, lanes)
    return Select(condition, t, f)


if_then_else = select


def logical_and(*conds: ExprLike) -> Expr:
    out = None
    for c in conds:
        c = as_expr(c)
        out = c if out is None else And(out, c)
    return out if out is not None else const(True)
