"""Definitions shared by the simplifier's modules."""
from __future__ import annotations

import math

from .. import dtype as dt
from ..expr import (EQ, Add, BinaryOp, Broadcast, CmpOp, Expr, FloatImm, GE, GT, IntImm, LE, LT, Mul, NE, Not,
                    Ramp, Var)

INDEX = "int64"
INT64_MAX = (1 << 63) - 1
FLIP = {LT: GT, GT: LT, LE: GE, GE: LE, EQ: EQ, NE: NE}  # a op b  <=>  b FLIP[op] a
NEGATE = {LT: GE, GE: LT, LE: GT, GT: LE, EQ: NE, NE: EQ}  # not (a op b)  <=>  a NEGATE[op] b


def uniform_const(e: Expr):
    """The value of a scalar constant or a broadcast of one, else None."""
    if type(e) is Broadcast:
        e = e.value
    if type(e) in (IntImm, FloatImm):
        return e.value
    return None


def is_true(e: Expr) -> bool:
    if type(e) is Broadcast:
        e = e.value
    return type(e) is IntImm and e.type == "bool" and e.value == 1


def is_false(e: Expr) -> bool:
    if type(e) is Broadcast:
        e = e.value
    return type(e) is IntImm and e.type == "bool" and e.value == 0


def is_index(dtype: str) -> bool:
    return dtype == INDEX


def same_block(iv: tuple, c: int):
    """The k with ``iv`` inside [k*c, k*c + c - 1], else None."""
    lo, hi = iv
    if math.isinf(lo) or math.isinf(hi):
        return None
    k = lo // c
    return k if hi // c == k else None


LANE = Var("%lane")  # one lane of a vector, when a vector op is analysed lane by lane


def lane_expr(x: Expr) -> Expr:
    """The scalar value of lane ``LANE`` of a ramp or broadcast."""
    if type(x) is Ramp:
        return Add(x.base, Mul(LANE, x.stride))
    return x.value


def rebuild(e: Expr, **fields) -> Expr:
    """``e`` with new fields, or ``e`` itself when nothing changed (keeps identity cheap)."""
    if all(getattr(e, k) is v for k, v in fields.items()):
        return e
    return e.replace(**fields)


def dtype_of(e: Expr) -> str:
    """``e.dtype``, cached on the node. The IR derives an operator's dtype from its left operand
    on every access, which costs the depth of a long left-nested chain each time."""
    d = e.__dict__.get("_arith_dtype")
    if d is not None:
        return d
    spine = []
    x = e
    while "_arith_dtype" not in x.__dict__ and (type(x) is Not or (isinstance(x, BinaryOp)
                                                                  and not isinstance(x, CmpOp))):
        spine.append(x)
        x = x.a
    d = x.__dict__.get("_arith_dtype")
    if d is None:
        d = dt.with_lanes("bool", dt.lanes(dtype_of(x.a))) if isinstance(x, CmpOp) else x.dtype
        x.__dict__["_arith_dtype"] = d
    for y in spine:
        y.__dict__["_arith_dtype"] = d
    return d
