"""The simplifier's core: contexts, dispatch, constant intervals and proofs.

Expressions are simplified bottom-up and memoized per context; the rules themselves live in
``integer.py`` (index arithmetic), ``nodes.py`` (floats, logic, vectors, other nodes),
``stmts.py`` (statements) and ``bound.py`` (symbolic bounds). Every rule must preserve the value
of the expression for every input the context allows.
"""
from __future__ import annotations

import math

from .. import dtype as dt
from ..visit import expr_children
from ..expr import (And, BinaryOp, BitAnd, Broadcast, Call, Cast, CmpOp, Div, EQ, Expr, FloatImm, FloorDiv,
                    FloorMod, GE, GT, IntImm, LE, LT, Let, Load, Max, Min, Mod, Mul, Not, Or, Ramp, Select,
                    Shl, Shr, Sub, Add, Var, as_expr)  # noqa: F401 (Div, Mod, Min, Max: _IV_BINARY)
from . import interval as I
from . import poly as P
from .bound import BoundMixin
from .common import FLIP, INDEX, LANE, NEGATE, dtype_of, is_false, is_true
from .context import Ctx
from .fold import bool_const, fold_binary, imm, int_range, wrap
from .integer import IntegerMixin
from .nodes import NodeMixin
from .poly import poly_of, to_expr, vars_of
from .stmts import StmtMixin


class Param(tuple):
    """The range of a parameter (a kernel's symbolic size): ``Param((1, 2**40))``. Unlike a
    loop's range it is never substituted into bounds; it only tells the signs and sizes of the
    expressions over it (``(n + 5) // 6 >= 1``, so dividing by it is monotone)."""

    __slots__ = ()


class Analyzer(IntegerMixin, NodeMixin, StmtMixin, BoundMixin):
    """Simplifies, proves and bounds, sharing caches for the duration of one top-level call."""

    def __init__(self):
        self.bare = Ctx({}, {}, (), symbolic=False)

    # --- contexts ------------------------------------------------------------------------------

    def context(self, ranges) -> Ctx:
        """The context of a user's ``ranges`` (var -> inclusive (lo, hi), ints or exprs)."""
        if not ranges:
            return Ctx({}, {}, (), True)
        sym, params = {}, {}
        for v, r in ranges.items():
            if isinstance(r, Param):  # a parameter: a constant range, never substituted
                params[v] = (int(r[0]), int(r[1]))
                continue
            lo, hi = r
            lo, hi = as_expr(lo, v.dtype), as_expr(hi, v.dtype)
            sym[v] = (self.expr(lo, self.bare), self.expr(hi, self.bare))
        # Bounds may mention other ranged vars: settle the constant ranges by iteration. Every
        # round is sound given the previous one, so stopping early is safe.
        civ: dict = dict(params)
        for _ in range(len(sym) + 1):
            tmp = Ctx(sym, dict(civ), (), False)
            new = {**params, **{v: (self.iv(lo, tmp)[0], self.iv(hi, tmp)[1]) for v, (lo, hi) in sym.items()}}
            if new == civ:
                break
            civ = new
        return Ctx(sym, civ, (), True)

    def bind(self, ctx: Ctx, var: Var, lo: Expr, hi: Expr) -> Ctx:
        """``ctx`` plus ``var`` in [lo, hi] (a loop variable or let binding; shadows ``var``)."""
        sym = {v: r for v, r in ctx.sym.items()
               if v != var and var not in vars_of(r[0]) and var not in vars_of(r[1])}
        if var not in vars_of(lo) and var not in vars_of(hi):
            sym[var] = (lo, hi)
        # else the bounds speak of the variable being shadowed: only the constant range is kept
        civ = dict(ctx.civ)
        civ[var] = (self.iv(lo, ctx)[0], self.iv(hi, ctx)[1])
        facts = tuple(f for f in ctx.facts if not _mentions(f, var))
        return Ctx(sym, civ, facts, ctx.symbolic)

    def lane_ctx(self, ctx: Ctx, n: int) -> Ctx:
        c = ctx.lanes.get(n)
        if c is None:
            c = ctx.lanes[n] = self.bind(ctx, LANE, imm(0, INDEX), imm(n - 1, INDEX))
        return c

    def assume(self, ctx: Ctx, cond: Expr) -> Ctx:
        """``ctx`` where ``cond`` is known to hold (the then-branch of an if)."""
        facts: list = []
        self._facts_of(cond, facts)
        if not facts:
            return ctx
        new = Ctx(ctx.sym, dict(ctx.civ), ctx.facts + tuple(facts), ctx.symbolic)
        for f in facts:
            self._tighten(new, f)
        return new

    def _facts_of(self, c: Expr, out: list, negated: bool = False) -> None:
        t = type(c)
        if t is Not:
            self._facts_of(c.a, out, not negated)
        elif (t is And and not negated) or (t is Or and negated):
            self._facts_of(c.a, out, negated)
            self._facts_of(c.b, out, negated)
        elif t in FLIP and dtype_of(c.a) == INDEX and _pure(c.a) and _pure(c.b):
            # Facts about loads would go stale once the buffer is written: only pure ones.
            op = NEGATE[t] if negated else t
            d = P.add(poly_of(c.a), poly_of(c.b), -1)
            one = P.constant(1, INDEX)
            if op is LT:
                out.append(P.add(d, one))
            elif op is LE:
                out.append(d)
            elif op is GT:
                out.append(P.add(P.scale(d, -1), one))
            elif op is GE:
                out.append(P.scale(d, -1))
            elif op is EQ:
                out.extend((d, P.scale(d, -1)))

    def _tighten(self, ctx: Ctx, f: P.Poly) -> None:
        """Narrow the constant range of each variable that ``f <= 0`` bounds linearly."""
        for m, k in f.terms.items():
            if len(m) != 1 or type(m[0]) is not Var:
                continue
            v = m[0]
            rest = P.add(f, P.Poly({m: k}, 0, INDEX), -1)
            lo_rest = self.iv_poly(rest, ctx)[0]
            if math.isinf(lo_rest):
                continue
            # k*v <= -rest <= -lo_rest =: x, so v <= floor(x / k) (k > 0), v >= ceil(x / k) (k < 0)
            x = -lo_rest
            lo, hi = ctx.civ.get(v, I.type_range(v.dtype))
            if k > 0:
                hi = min(hi, x // k)
            else:
                lo = max(lo, -(-x // k))
            ctx.civ[v] = (lo, hi)

    # --- expressions ---------------------------------------------------------------------------

    def expr(self, e: Expr, ctx: Ctx) -> Expr:
        """``e`` simplified under ``ctx`` (memoized per context)."""
        memo = ctx.memo
        r = memo.get(e)
        if r is None:
            r = self._visit(e, ctx)
            memo[e] = r
        return r

    def _visit(self, e: Expr, ctx: Ctx) -> Expr:
        t = type(e)
        if t is IntImm:
            if dt.is_int(e.type):
                v = wrap(e.value, e.type)
                return e if v == e.value else IntImm(v, e.type)
            return e
        if t is FloatImm or t is Var:
            return e
        if (t is Add or t is Sub or t is Mul) and P.is_int_scalar(dtype_of(e)) and dtype_of(e.b) == dtype_of(e):
            # A whole chain of + - * at once: one canonical sum, not one per level (a sum of n
            # terms would otherwise be rebuilt n times).
            r = self._arith_chain(e, ctx)
            return e if r == e else r
        if isinstance(e, BinaryOp):
            a, b = self.expr(e.a, ctx), self.expr(e.b, ctx)
            r = self.binary(t, a, b, ctx)
            return e if r == e else r
        h = _HANDLERS.get(t)
        return h(self, e, ctx) if h is not None else e

    def binary(self, cls, a: Expr, b: Expr, ctx: Ctx) -> Expr:
        """``cls(a, b)`` simplified, for already simplified ``a`` and ``b``."""
        if dtype_of(a) != dtype_of(b):
            return cls(a, b)
        if type(a) in (IntImm, FloatImm) and type(b) in (IntImm, FloatImm):
            r = fold_binary(cls, a, b)
            return cls(a, b) if r is None else r
        n = dt.lanes(dtype_of(a))
        if n > 1:
            return self._vector(cls, a, b, ctx, n)
        if cls is And or cls is Or:
            return self._logic(cls, a, b)
        elem = dtype_of(a)
        if dt.is_int(elem):
            return self._int(cls, a, b, ctx)
        if dt.is_float(elem):
            return self._float(cls, a, b)
        if issubclass(cls, CmpOp) and a == b:
            return bool_const(cls in (EQ, LE, GE))
        return cls(a, b)

    # --- intervals and proofs ------------------------------------------------------------------

    def iv(self, e: Expr, ctx: Ctx) -> tuple:
        """Constant inclusive interval of ``e`` (of every lane, for vectors) under ``ctx``."""
        m = ctx.ivmemo
        r = m.get(e)
        if r is None:
            r = m[e] = self._iv(e, ctx)
        return r

    def _iv(self, e: Expr, ctx: Ctx) -> tuple:
        t = type(e)
        dtype = dtype_of(e)
        if t is IntImm:
            v = wrap(e.value, dtype) if dt.is_int(dtype) else e.value
            return (v, v)
        if t is Var:
            return ctx.civ.get(e) or I.type_range(dtype)
        if not (dt.is_int(dtype) or dt.is_bool(dtype)):
            return I.UNBOUNDED
        if dt.is_bool(dtype):
            return (0, 1)
        r = None
        if isinstance(e, BinaryOp):
            ia, ib = self.iv(e.a, ctx), self.iv(e.b, ctx)
            r = _IV_BINARY.get(t, lambda x, y, d: None)(ia, ib, dtype)
        elif t is Select:
            c = e.condition
            r = (self.iv(e.true_value, ctx) if is_true(c) else self.iv(e.false_value, ctx) if is_false(c)
                 else I.union(self.iv(e.true_value, ctx), self.iv(e.false_value, ctx)))
        elif t is Cast:
            src = dtype_of(e.value)
            if dt.is_int(src) or dt.is_bool(src):
                r = self.iv(e.value, ctx)
        elif t is Broadcast:
            r = self.iv(e.value, ctx)
        elif t is Ramp:
            r = I.add(self.iv(e.base, ctx), I.mul(self.iv(e.stride, ctx), (0, e.lanes - 1)))
        return I.type_range(dtype) if r is None else I.clamp(r, dtype)

    def iv_poly(self, p: P.Poly, ctx: Ctx) -> tuple:
        """Constant interval of a polynomial (each term bounded separately)."""
        r = (p.const, p.const)
        for m, k in p.terms.items():
            a = self.iv(m[0], ctx)
            for x in m[1:]:
                a = I.mul(a, self.iv(x, ctx))
            r = I.add(r, I.scale(a, k))
            if math.isinf(r[0]) and math.isinf(r[1]):
                break
        return r

    def prove_le0(self, p: P.Poly, ctx: Ctx) -> bool:
        """Whether the int64 polynomial ``p`` is ``<= 0`` everywhere ``ctx`` allows."""
        if not p.terms:
            return p.const <= 0
        if self.iv_poly(p, ctx)[1] <= 0:
            return True
        for f in ctx.facts:  # p = (p - f) + f <= p - f
            if self.iv_poly(P.add(p, f, -1), ctx)[1] <= 0:
                return True
        if ctx.symbolic and ctx.has_sym and _mentions_any(p, ctx.sym):
            hi = self.sym_bounds(to_expr(p), ctx)[1]
            if hi is not None and (self.iv(hi, ctx)[1] <= 0 or self._prove_le0_by_quotients(poly_of(hi), ctx)):
                return True
        return self._prove_le0_by_sides(p, ctx) or self._prove_le0_by_quotients(p, ctx)

    _quotient_depth = 0

    def _prove_le0_by_quotients(self, p: P.Poly, ctx: Ctx) -> bool:
        """``p <= 0`` from ``c*(a // c) <= a`` and ``>= a - c + 1`` (``c`` a positive constant
        dividing the term's coefficient): each such term replaced by the bound on its side. A
        conv's last block of columns over a symbolic width reads up to ``((ow + 6) // 7)*14``
        of a row padded to that plus ``w + 2 - ((w + 1) // 2)*2``: in bounds only by these."""
        if self._quotient_depth >= 3:
            return False
        q, changed = p, False
        for m, k in p.terms.items():
            a = m[0]
            if len(m) == 1 and type(a) is FloorDiv and type(a.b) is IntImm and a.b.value > 0 \
                    and k % a.b.value == 0 and P.is_int_scalar(dtype_of(a)):
                c, x = a.b.value, poly_of(a.a)
                bound = P.scale(x, k // c) if k > 0 else P.scale(P.add(x, P.constant(1 - c, p.dtype)), k // c)
                q, changed = P.add(P.add(q, P.Poly({m: k}, 0, p.dtype), -1), bound), True
        if not changed:
            return False
        self._quotient_depth += 1
        try:
            return self.prove_le0(q, ctx)
        finally:
            self._quotient_depth -= 1

    def _prove_le0_by_sides(self, p: P.Poly, ctx: Ctx) -> bool:
        """``k*min(a, b) + r <= 0`` (k > 0) holds where ``k*a + r <= 0`` or ``k*b + r <= 0`` does
        (and so for ``max`` with k < 0): a clamped row, ``min(i, M - 1) < M``, with ``i`` past
        ``M`` and ``M`` symbolic, where bounds of the min as a whole prove nothing."""
        for m, k in p.terms.items():
            if len(m) == 1 and ((type(m[0]) is Min and k > 0) or (type(m[0]) is Max and k < 0)):
                rest = P.add(p, P.Poly({m: k}, 0, p.dtype), -1)
                return any(self.prove_le0(P.add(rest, P.scale(poly_of(side), k)), ctx)
                           for side in (m[0].a, m[0].b))
        return False


# --- helpers ---------------------------------------------------------------------------------

def _mentions(p: P.Poly, var: Var) -> bool:
    return any(var in vars_of(a) for m in p.terms for a in m)


def _mentions_any(p: P.Poly, vs: dict) -> bool:
    return any(not vars_of(a).isdisjoint(vs) for m in p.terms for a in m)


def _pure(e: Expr) -> bool:
    """No loads inside (their values change when memory is written)."""
    d = e.__dict__
    r = d.get("_arith_pure")
    if r is None:
        if type(e) is Load:
            r = False
        elif type(e) in (Var, IntImm, FloatImm):
            r = True
        else:
            r = all(_pure(c) for c in expr_children(e))
        d["_arith_pure"] = r
    return r


def _iv_shift(ia, ib, dtype, left):
    if ib[0] != ib[1] or not 0 <= ib[0] < dt.bits(dtype):
        return None
    f = 1 << ib[0]
    if not left:
        return I.floordiv(ia, (f, f))
    r = I.scale(ia, f)
    lo, hi = int_range(dtype)
    # Shifts are bit manipulation, not index arithmetic: no overflow assumption, even for int64.
    return r if lo <= r[0] and r[1] <= hi else (-math.inf, math.inf) if dtype == INDEX else None


def _iv_bitand(ia, ib, dtype):
    his = [x[1] for x in (ia, ib) if x[0] >= 0]
    return (0, min(his)) if his else None


_IV_BINARY = {
    Add: lambda a, b, d: I.add(a, b),
    Sub: lambda a, b, d: I.add(a, I.neg(b)),
    Mul: lambda a, b, d: I.mul(a, b),
    FloorDiv: lambda a, b, d: I.floordiv(a, b),
    FloorMod: lambda a, b, d: I.floormod(a, b),
    Div: lambda a, b, d: I.truncdiv(a, b),
    Mod: lambda a, b, d: I.truncmod(a, b),
    Min: lambda a, b, d: I.minimum(a, b),
    Max: lambda a, b, d: I.maximum(a, b),
    BitAnd: _iv_bitand,
    Shl: lambda a, b, d: _iv_shift(a, b, d, True),
    Shr: lambda a, b, d: _iv_shift(a, b, d, False),
}

_HANDLERS = {
    Not: Analyzer._v_not, Cast: Analyzer._v_cast, Select: Analyzer._v_select, Call: Analyzer._v_call,
    Ramp: Analyzer._v_ramp, Broadcast: Analyzer._v_broadcast, Let: Analyzer._v_let, Load: Analyzer._v_load,
}
