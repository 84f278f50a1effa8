"""Constant intervals: inclusive (lo, hi) pairs of Python ints, with ``-inf``/``inf`` for unbounded.

Python compares ints and floats exactly, so ``math.inf`` can stand for "no bound" next to ints of
any size; the helpers below keep ``0 * inf`` at 0 and never produce NaN.
"""
from __future__ import annotations

import math

from .. import dtype as dt
from .fold import int_range

INF = math.inf
UNBOUNDED = (-INF, INF)


def type_range(dtype: str) -> tuple:
    """What a value of ``dtype`` can be when nothing else is known.

    int64 is the index type and index arithmetic is assumed not to overflow, so it is treated as
    the unbounded integers; narrower types are bounded by their range.
    """
    if dt.is_bool(dtype):
        return (0, 1)
    if not dt.is_int(dtype):
        return UNBOUNDED
    if dt.element(dtype) == "int64":
        return UNBOUNDED
    return int_range(dtype)


def clamp(iv: tuple, dtype: str) -> tuple:
    """A mathematical interval as the machine sees it: a value outside the type wrapped, so
    anything in the type is possible then (int64 is assumed not to overflow)."""
    lo, hi = type_range(dtype)
    if iv[0] < lo or iv[1] > hi:
        return (lo, hi)
    return iv


def add(a: tuple, b: tuple) -> tuple:
    return (a[0] + b[0], a[1] + b[1])


def neg(a: tuple) -> tuple:
    return (-a[1], -a[0])


def _m(x, y):
    return 0 if x == 0 or y == 0 else x * y


def mul(a: tuple, b: tuple) -> tuple:
    cs = (_m(a[0], b[0]), _m(a[0], b[1]), _m(a[1], b[0]), _m(a[1], b[1]))
    return (min(cs), max(cs))


def scale(a: tuple, k: int) -> tuple:
    return (_m(a[0], k), _m(a[1], k)) if k >= 0 else (_m(a[1], k), _m(a[0], k))


def _fdiv(x, c: int):
    return x if math.isinf(x) else x // c


def floordiv(a: tuple, b: tuple) -> tuple:
    """``a // b``; the divisor must not straddle zero (else unbounded), nor be empty (a loop
    variable of no iterations, ``(0, -1)``: its bounds are no divisors, one of them zero)."""
    if b[0] <= b[1] and (b[0] > 0 or b[1] < 0):
        cs = []
        for x in a:
            for y in b:
                if math.isinf(y):
                    cs.append(0 if not math.isinf(x) else (x if y > 0 else -x))
                elif math.isinf(x):
                    cs.append(x if y > 0 else -x)
                else:
                    cs.append(x // y)
        lo, hi = min(cs), max(cs)
        # x // y with |y| unbounded and x finite can be 0 or -1 (floor of a tiny negative).
        if any(math.isinf(y) for y in b) and a[0] < 0:
            lo = min(lo, -1)
        if any(math.isinf(y) for y in b) and a[1] > 0 and b[1] < 0:
            lo = min(lo, -1)
        return (lo, hi)
    return UNBOUNDED


def floormod(a: tuple, b: tuple) -> tuple:
    """``a % b`` (sign of the divisor)."""
    if b[0] > 0:
        if b[0] == b[1] and not math.isinf(a[0]) and not math.isinf(a[1]):
            c = b[0]
            if a[0] // c == a[1] // c:  # one period: the identity shifted
                k = a[0] // c * c
                return (a[0] - k, a[1] - k)
        hi = b[1] - 1
        if a[0] >= 0:
            hi = min(hi, a[1])
        return (0, hi)
    if b[1] < 0:
        return (b[0] + 1, 0)
    return UNBOUNDED


def _tdiv(x, c):
    if math.isinf(x):
        return x if c > 0 else -x
    q = abs(x) // abs(c)
    return q if (x >= 0) == (c > 0) else -q


def truncdiv(a: tuple, b: tuple) -> tuple:
    """C division by a constant-sign divisor."""
    if b[0] == b[1] and b[0] != 0 and not math.isinf(b[0]):
        c = b[0]
        x, y = _tdiv(a[0], c), _tdiv(a[1], c)
        return (min(x, y), max(x, y))
    if b[0] > 0 or b[1] < 0:
        m = max(abs(a[0]), abs(a[1]))
        return (-m, m)
    return UNBOUNDED


def truncmod(a: tuple, b: tuple) -> tuple:
    """C remainder: the sign of the dividend, smaller than the divisor in magnitude."""
    if b[0] > 0 or b[1] < 0:
        m = max(abs(b[0]), abs(b[1])) - 1
        lo = 0 if a[0] >= 0 else max(-m, a[0])
        hi = 0 if a[1] <= 0 else min(m, a[1])
        return (lo, hi)
    lo = 0 if a[0] >= 0 else a[0]
    hi = 0 if a[1] <= 0 else a[1]
    return (lo, hi)


def minimum(a: tuple, b: tuple) -> tuple:
    return (min(a[0], b[0]), min(a[1], b[1]))


def maximum(a: tuple, b: tuple) -> tuple:
    return (max(a[0], b[0]), max(a[1], b[1]))


def union(a: tuple, b: tuple) -> tuple:
    return (min(a[0], b[0]), max(a[1], b[1]))


def const(v: int) -> tuple:
    return (v, v)


def finite(x):
    """``x`` as an int, or None for an infinite bound."""
    return None if isinstance(x, float) and math.isinf(x) else int(x)
