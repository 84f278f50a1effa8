"""Arithmetic simplification and bound analysis of the loop IR.

    simplify(x, ranges)      an Expr, Stmt or PrimFunc, simplified
    can_prove(cond, ranges)  cond is true for every value in the ranges (conservative)
    bounds(expr, ranges)     inclusive symbolic (lo, hi) as the ranged variables vary
    const_bounds(expr, ranges)  the same as ints (None: unbounded)
    linear_form(expr, vars)  ({var: coeff}, rest) when expr is affine in vars

``ranges`` maps a Var to an inclusive ``(min, max)`` pair of expressions or ints, or to a
:class:`Param` (a parameter's constant range, which bounds use but never substitute).

Semantics the rules rely on (see ``fold.py`` for constants):

* int64 is the index type and its arithmetic is assumed not to overflow; the rules that reason
  about magnitude (floordiv/floormod of sums, comparisons, min/max) use it only for int64.
  Other integer types wrap, and get only rules that are exact under wraparound.
* Expressions are pure; loads are never moved or duplicated, and facts about loads are not
  kept (memory changes).
* Float expressions are only constant-folded (exactly as the machine rounds) and stripped of
  identities that hold for every float (``x*1``, ``x/1``, ``x - 0.0``, ``x + -0.0``).
"""
from __future__ import annotations

import contextlib
import sys
from typing import Optional

from .. import dtype as dt
from ..expr import Expr, FloatImm, IntImm, as_expr
from ..stmt import PrimFunc, Stmt
from . import interval as I
from . import poly as P
from .analyzer import Analyzer, Param, is_true
from .fold import imm, int_range

__all__ = ["simplify", "can_prove", "bounds", "const_bounds", "linear_form", "Analyzer", "Param"]

Ranges = Optional[dict]
_MAX_PASSES = 4


@contextlib.contextmanager
def _deep_recursion(limit: int = 100_000):
    """Long chains (an unrolled sum of thousands of terms) recurse deeply; pure-Python frames
    are cheap in CPython 3.11+, so lift the limit for the duration of one call."""
    old = sys.getrecursionlimit()
    if old < limit:
        sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        if old < limit:
            sys.setrecursionlimit(old)


def simplify(x, ranges: Ranges = None, passes: int = _MAX_PASSES):
    """Simplify an expression, statement or PrimFunc, never changing what it computes.

    ``ranges`` gives inclusive (min, max) ranges of free variables. Inside statements, loop
    variables get their loop's range and if-conditions hold in their then-branch. The result is
    re-simplified until it stops changing (``passes`` at most).
    """
    with _deep_recursion():
        an = Analyzer()
        ctx = an.context(ranges)
        if isinstance(x, PrimFunc):
            return _fixpoint(x, lambda f: f.replace(body=an.stmt(f.body, ctx)), passes)
        if isinstance(x, Stmt):
            return _fixpoint(x, lambda s: an.stmt(s, ctx), passes)
        x = as_expr(x)
        return _fixpoint(x, lambda e: an.expr(e, ctx), passes)


def _fixpoint(x, step, passes: int = _MAX_PASSES):
    for _ in range(passes):
        y = step(x)
        if y == x:
            return y
        x = y
    return x


def can_prove(cond, ranges: Ranges = None, given: tuple = ()) -> bool:
    """True only if ``cond`` holds for every assignment of the ranged variables (and every
    value of the others) where the conditions ``given`` hold. False means "not proven", not
    "false"."""
    if not given:
        return is_true(simplify(as_expr(cond), ranges))
    with _deep_recursion():
        an = Analyzer()
        ctx = an.context(ranges)
        for g in given:
            ctx = an.assume(ctx, an.expr(as_expr(g), ctx))
        return is_true(_fixpoint(as_expr(cond), lambda e: an.expr(e, ctx)))


def _extreme(dtype: str, hi: bool) -> Expr:
    if dt.is_int(dtype):
        lo_, hi_ = int_range(dtype)
        return imm(hi_ if hi else lo_, dtype)
    if dt.is_bool(dtype):
        return IntImm(1 if hi else 0, "bool")
    return FloatImm(float("inf") if hi else float("-inf"), dtype)


def bounds(expr, ranges: Ranges) -> tuple[Expr, Expr]:
    """Inclusive symbolic ``(lo, hi)`` of ``expr`` as each variable in ``ranges`` varies.

    Variables not in ``ranges`` stay symbolic. Exact for affine expressions
    (``io*8 + ii``, ``ii`` in [0, 7] -> ``(io*8, io*8 + 7)``); sound for the rest. A side that
    cannot be bounded is the extreme value of the dtype. For a vector, the bounds of all lanes.
    """
    with _deep_recursion():
        an = Analyzer()
        ctx = an.context(ranges)
        e = an.expr(as_expr(expr), ctx)
        elem = dt.element(e.dtype)
        if not dt.is_int(elem):
            return (e, e) if not (ctx.sym.keys() & P.vars_of(e)) else (_extreme(elem, False), _extreme(elem, True))
        lo, hi = an.sym_bounds(e, ctx)
        return (lo if lo is not None else _extreme(elem, False),
                hi if hi is not None else _extreme(elem, True))


def const_bounds(expr, ranges: Ranges) -> tuple[Optional[int], Optional[int]]:
    """Inclusive constant ``(lo, hi)`` of an integer ``expr`` over ``ranges``; None where
    unbounded (or where the bound depends on a variable not in ``ranges``)."""
    with _deep_recursion():
        an = Analyzer()
        ctx = an.context(ranges)
        e = an.expr(as_expr(expr), ctx)
        if not dt.is_int(e.dtype) and not dt.is_bool(e.dtype):
            return (None, None)
        lo, hi = an.iv(e, ctx)
        if dt.element(e.dtype) == "int64":
            slo, shi = an.sym_bounds(e, ctx)
            if slo is not None:
                lo = max(lo, an.iv(slo, ctx)[0])
            if shi is not None:
                hi = min(hi, an.iv(shi, ctx)[1])
        return I.finite(lo), I.finite(hi)


def linear_form(expr, vars) -> Optional[tuple[dict, Expr]]:
    """``({v: c}, rest)`` with ``expr == sum(c*v) + rest`` and ``rest`` free of ``vars``.

    Only nonzero coefficients appear. None if ``expr`` is not affine in ``vars`` (a var inside a
    floordiv, a product of two vars, ...) or not an integer scalar.
    """
    vs = frozenset(vars)
    with _deep_recursion():
        an = Analyzer()
        e = an.expr(as_expr(expr), an.bare)
    if not P.is_int_scalar(e.dtype):
        return ({}, e) if not (vs & P.vars_of(e)) else None
    p = P.poly_of(e)
    coeffs, rest = {}, {}
    for m, k in p.terms.items():
        if len(m) == 1 and m[0] in vs:
            coeffs[m[0]] = k
        elif any(vs & P.vars_of(a) for a in m):
            return None
        else:
            rest[m] = k
    return coeffs, P.to_expr(P.Poly(rest, p.const, p.dtype))
