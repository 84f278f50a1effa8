"""Constant folding with exactly the semantics the generated code has.

Integers wrap at their bit width (two's complement). ``FloorDiv``/``FloorMod`` round toward
negative infinity (Python), ``Div``/``Mod`` truncate toward zero (C). What the machine treats
specially (division by zero, ``INT_MIN // -1``, shifts by the bit width or more) is never folded:
the code generator keeps whatever behaviour it defines for those.

Floats are folded through numpy the way the code generator computes them: float16 and bfloat16
arithmetic happens in float32 and is rounded back after every operation; constants are rounded to
their dtype first. A float fold is skipped when the result would be NaN (payloads and signs are
not worth guessing), when a divisor is zero, and when an input or the result is subnormal (a
kernel may run with denormals flushed to zero).
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np

from .. import dtype as dt
from ..expr import (Add, And, BitAnd, BitOr, BitXor, Broadcast, Div, EQ, Expr, FloatImm, FloorDiv, FloorMod,
                    GE, GT, IntImm, LE, LT, Max, Min, Mod, Mul, NE, Or, Shl, Shr, Sub)

_CMP = {EQ: lambda x, y: x == y, NE: lambda x, y: x != y, LT: lambda x, y: x < y,
        LE: lambda x, y: x <= y, GT: lambda x, y: x > y, GE: lambda x, y: x >= y}
_SMALLEST_NORMAL = {"float16": 2.0 ** -14, "bfloat16": 2.0 ** -126, "float32": 2.0 ** -126,
                    "float64": 2.0 ** -1022}
_NARROW = ("float16", "bfloat16")  # floats whose arithmetic the machine does in float32


# --- integers --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def int_range(dtype: str) -> tuple[int, int]:
    """Inclusive (min, max) of the integer (or bool) element type of ``dtype``."""
    e = dt.element(dtype)
    if e == "bool":
        return 0, 1
    n = dt.bits(e)
    if dt.is_uint(e):
        return 0, (1 << n) - 1
    return -(1 << (n - 1)), (1 << (n - 1)) - 1


def wrap(v: int, dtype: str) -> int:
    """``v`` reduced modulo 2**bits into the range of ``dtype`` (what the machine holds)."""
    lo, hi = int_range(dtype)
    if lo <= v <= hi:
        return v
    return (v - lo) % (hi - lo + 1) + lo


def wrap_signed(v: int, dtype: str) -> int:
    """``v`` modulo 2**bits as a signed number (coefficients of polynomials use this form)."""
    n = dt.bits(dtype)
    v &= (1 << n) - 1
    return v - (1 << n) if v >> (n - 1) else v


def imm(v: int, dtype: str) -> IntImm:
    """An integer constant of ``dtype`` holding ``v`` wrapped to the type."""
    return IntImm(wrap(int(v), dtype), dt.element(dtype))


def bool_const(value: bool, lanes: int = 1) -> Expr:
    c = IntImm(1 if value else 0, "bool")
    return c if lanes == 1 else Broadcast(c, lanes)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def fold_int(cls, a: int, b: int, dtype: str):
    """``a <cls> b`` on integers of ``dtype``; an int (bool for comparisons) or None."""
    a, b = wrap(a, dtype), wrap(b, dtype)
    lo, hi = int_range(dtype)
    if cls is Add:
        return wrap(a + b, dtype)
    if cls is Sub:
        return wrap(a - b, dtype)
    if cls is Mul:
        return wrap(a * b, dtype)
    if cls in (FloorDiv, FloorMod, Div, Mod):
        if b == 0:
            return None
        q = a // b if cls in (FloorDiv, FloorMod) else _trunc_div(a, b)
        if not lo <= q <= hi:  # INT_MIN / -1
            return None
        return q if cls in (FloorDiv, Div) else a - b * q
    if cls is Min:
        return min(a, b)
    if cls is Max:
        return max(a, b)
    if cls is BitAnd:
        return wrap(a & b, dtype)
    if cls is BitOr:
        return wrap(a | b, dtype)
    if cls is BitXor:
        return wrap(a ^ b, dtype)
    if cls in (Shl, Shr):
        if not 0 <= b < dt.bits(dtype):
            return None
        return wrap(a << b, dtype) if cls is Shl else a >> b  # a >> b is arithmetic for a < 0
    if cls in _CMP:
        return _CMP[cls](a, b)
    if cls is And:
        return bool(a) and bool(b)
    if cls is Or:
        return bool(a) or bool(b)
    return None


# --- floats ----------------------------------------------------------------------------------

def _normal_or_zero(f: float, dtype: str) -> bool:
    return f == 0.0 or math.isinf(f) or abs(f) >= _SMALLEST_NORMAL[dt.element(dtype)]


def _np(value, dtype: str):
    """``value`` as the numpy scalar the code generator would make of the constant."""
    with np.errstate(all="ignore"):  # overflow to inf is what the machine does too
        return np.array(value, dtype=dt.numpy_dtype(dtype))[()]


def float_value(value: float, dtype: str):
    """The constant rounded to ``dtype`` as a numpy scalar, or None if it is NaN or subnormal."""
    x = _np(value, dtype)
    f = float(x)
    if math.isnan(f) or not _normal_or_zero(f, dtype):
        return None
    return x


def _narrow(r32, dtype: str):
    """A float32 result rounded to a float16/bfloat16 ``dtype`` the way the machine does."""
    return np.array(r32, dtype=np.float32).astype(dt.numpy_dtype(dtype))[()]


def fold_float(cls, a: float, b: float, dtype: str):
    """``a <cls> b`` on floats of ``dtype``; a float (bool for comparisons) or None."""
    x, y = float_value(a, dtype), float_value(b, dtype)
    if x is None or y is None:
        return None
    if cls in _CMP:
        return bool(_CMP[cls](float(x), float(y)))
    e = dt.element(dtype)
    if e in _NARROW:
        x, y = np.float32(x), np.float32(y)  # exact widening
    with np.errstate(all="ignore"):
        if cls is Add:
            r = x + y
        elif cls is Sub:
            r = x - y
        elif cls is Mul:
            r = x * y
        elif cls is Div:
            if y == 0:
                return None
            r = x / y
        elif cls in (Min, Max):
            if x == y and math.copysign(1.0, float(x)) != math.copysign(1.0, float(y)):
                return None  # min(-0.0, +0.0): leave the signed-zero choice to the machine
            r = min(x, y) if cls is Min else max(x, y)
        else:
            return None  # FloorDiv/FloorMod/Mod use numpy's fmod-based formulas: not worth it
    if e in _NARROW:
        r = _narrow(r, e)
    f = float(r)
    if math.isnan(f) or not _normal_or_zero(f, e):
        return None
    return f


# --- casts -----------------------------------------------------------------------------------

def _int_to_float(v: int, dtype: str) -> Optional[float]:
    # Only exact conversions: they cannot depend on the rounding route the machine takes.
    f = float(v)
    if f != v:
        return None
    r = float(_np(f, dtype))
    return r if r == v else None


def _float_to_float(x, src: str, dst: str) -> Optional[float]:
    de = dt.element(dst)
    if de == "bfloat16":  # the machine goes through float32, then rounds to nearest-even
        r = _narrow(np.array(x).astype(np.float32), de)
    else:
        r = np.array(x).astype(dt.numpy_dtype(de))[()]
    f = float(r)
    if math.isnan(f) or not _normal_or_zero(f, de):
        return None
    return f


def fold_cast(dtype: str, c: Expr) -> Optional[Expr]:
    """``Cast(dtype, c)`` of a scalar constant ``c`` folded, or None."""
    src = c.dtype
    if isinstance(c, IntImm):
        v = (1 if c.value else 0) if dt.is_bool(src) else wrap(c.value, src)
        if dt.is_bool(dtype):
            return bool_const(v != 0)
        if dt.is_int(dtype):
            return imm(v, dtype)
        if dt.is_float(dtype):
            f = _int_to_float(v, dtype)
            return None if f is None else FloatImm(f, dtype)
        return None
    if isinstance(c, FloatImm):
        x = float_value(c.value, src)
        if x is None:
            return None
        f = float(x)
        if dt.is_float(dtype):
            r = _float_to_float(x, src, dtype)
            return None if r is None else FloatImm(r, dtype)
        if dt.is_bool(dtype):
            return bool_const(f != 0.0)
        if dt.is_int(dtype) and math.isfinite(f):
            t = math.trunc(f)
            # The machine converts through int64 (uint64 directly); outside that it is poison.
            if dt.element(dtype) == "uint64":
                return imm(t, dtype) if 0 <= t < 1 << 64 else None
            if -(1 << 63) <= t < 1 << 63:
                return imm(t, dtype)
        return None
    return None


def fold_binary(cls, a: Expr, b: Expr) -> Optional[Expr]:
    """Fold ``cls(a, b)`` for scalar constants ``a`` and ``b``; None when not foldable."""
    dtype = a.dtype
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        if dt.is_bool(dtype) and cls not in _CMP and cls not in (And, Or):
            return None  # the machine reads bool Add/Mul/... as or/and/xor: leave them alone
        r = fold_int(cls, a.value, b.value, dtype)
        if r is None:
            return None
        if isinstance(r, bool):
            return bool_const(r)
        return imm(r, dtype)
    if isinstance(a, FloatImm) and isinstance(b, FloatImm):
        r = fold_float(cls, a.value, b.value, dtype)
        if r is None:
            return None
        if isinstance(r, bool):
            return bool_const(r)
        return FloatImm(r, dtype)
    return None
