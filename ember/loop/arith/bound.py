"""Symbolic bounds: the inclusive range of an index expression as its ranged variables vary.

The affine part is bounded exactly: each ranged variable is replaced by the end of its range that
its coefficient's sign calls for, so ``io*8 + ii`` with ``ii`` in [0, 7] gives ``(io*8, io*8 + 7)``.
Everything else (floordiv, floormod, min, max, select, products) is bounded soundly from the
bounds of its parts, falling back to constant intervals. A bound of ``None`` means unbounded.

Substituted bounds may themselves mention ranged variables (an inner loop whose extent depends on
an outer one); those are bounded in turn, innermost first, a limited number of times, so a cyclic
range falls back to constant bounds instead of looping.
"""
from __future__ import annotations

from typing import Optional

from .. import dtype as dt
from ..expr import Broadcast, Expr, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Ramp, Select, Var
from . import interval as I
from . import poly as P
from .common import dtype_of, lane_expr
from .fold import imm
from .poly import poly_of, to_expr, vars_of

INDEX = "int64"
Bound = Optional[Expr]


class BoundMixin:
    """Symbolic bound analysis; mixed into the Analyzer (uses ``expr``, ``iv``, ``bare``)."""

    def facts_only(self, ctx):
        """``ctx``'s constant ranges without its substitutions: what simplifies a bound (the
        signs of parameters such as symbolic sizes) without recursing into bounds."""
        c = ctx.civ_ctx
        if c is None:
            from .context import Ctx

            c = ctx.civ_ctx = Ctx({}, ctx.civ, (), False) if ctx.civ else self.bare
        return c

    def sym_bounds(self, e: Expr, ctx, depth: int = 0) -> tuple[Bound, Bound]:
        """(lo, hi) of the simplified int64 expression ``e`` over the variables ranged in ``ctx``."""
        if dt.lanes(dtype_of(e)) > 1:
            return self._sym_vector(e, ctx, depth)
        ranged = ctx.sym.keys() & vars_of(e)
        if not ranged:
            return e, e
        if depth > len(ctx.sym) + 1:
            return self._const_bounds(e, ctx)
        if dtype_of(e) != INDEX:
            return self._const_bounds(e, ctx)
        # Substitute first the variables no other range mentions (j in [0, n - 1] before n), so
        # that j - n + 1 is bounded by 0 rather than by the extremes of j and n taken apart.
        later = set()
        for v in ranged:
            lo_v, hi_v = ctx.sym[v]
            later |= vars_of(lo_v) | vars_of(hi_v)
        ranged = (ranged - later) or ranged
        p = poly_of(e)
        lo = hi = P.constant(p.const, INDEX)
        for m, k in p.terms.items():
            if not any(ranged & vars_of(a) for a in m):
                t = P.Poly({m: k}, 0, INDEX)
                lo, hi = (None if lo is None else P.add(lo, t)), (None if hi is None else P.add(hi, t))
                continue
            if len(m) == 1 and type(m[0]) is Var:
                a_lo, a_hi = self._var_bounds(m[0], ctx)
            else:
                a_lo, a_hi = self._sym_mono(m, ctx, depth, ranged)
            if k < 0:
                a_lo, a_hi = a_hi, a_lo
            lo = None if lo is None or a_lo is None else P.add(lo, P.scale(poly_of(a_lo), k))
            hi = None if hi is None or a_hi is None else P.add(hi, P.scale(poly_of(a_hi), k))
        out = []
        for side, q in ((0, lo), (1, hi)):
            if q is None:
                out.append(None)
                continue
            b = self.expr(to_expr(q), self.facts_only(ctx))
            if ctx.sym.keys() & vars_of(b):  # a substituted bound mentions a ranged variable
                b = self.sym_bounds(b, ctx, depth + 1)[side]
            out.append(b)
        return out[0], out[1]

    def _var_bounds(self, v: Var, ctx) -> tuple[Expr, Expr]:
        """The symbolic range of ``v``, narrowed where an enclosing condition narrowed it."""
        lo, hi = ctx.sym[v]
        clo, chi = ctx.civ.get(v, I.UNBOUNDED)
        if type(lo) is IntImm and I.finite(clo) is not None and clo > lo.value:
            lo = imm(clo, v.dtype)
        if type(hi) is IntImm and I.finite(chi) is not None and chi < hi.value:
            hi = imm(chi, v.dtype)
        return lo, hi

    def _const_bounds(self, e: Expr, ctx) -> tuple[Bound, Bound]:
        lo, hi = self.iv(e, ctx)
        dtype = e.dtype if dt.lanes(e.dtype) == 1 else dt.element(e.dtype)
        tlo, thi = I.int_range(dtype) if dt.is_int(dtype) else (-I.INF, I.INF)
        # a bound the type cannot hold is no bound (as a constant it would wrap around)
        return (None if I.finite(lo) is None or lo < tlo else imm(lo, dtype),
                None if I.finite(hi) is None or hi > thi else imm(hi, dtype))

    def _sym_mono(self, m: tuple, ctx, depth: int, ranged) -> tuple[Bound, Bound]:
        if len(m) == 1:
            return self._sym_atom(m[0], ctx, depth)
        dep = [a for a in m if ranged & vars_of(a)]
        if len(dep) != 1:
            return self._const_bounds(to_expr(P.Poly({m: 1}, 0, INDEX)), ctx)
        free = [a for a in m if a is not dep[0]]
        f = free[0]
        for a in free[1:]:
            f = Mul(f, a)
        lo, hi = self._sym_atom(dep[0], ctx, depth)
        return self._times(f, lo, hi, ctx)

    def _times(self, f: Expr, lo: Bound, hi: Bound, ctx) -> tuple[Bound, Bound]:
        """Bounds of ``f * x`` for ``x`` in [lo, hi] and ``f`` free of ranged variables."""
        sf = self.iv(f, ctx)
        if sf[0] >= 0:
            return (None if lo is None else Mul(f, lo)), (None if hi is None else Mul(f, hi))
        if sf[1] <= 0:
            return (None if hi is None else Mul(f, hi)), (None if lo is None else Mul(f, lo))
        if lo is None or hi is None:
            return None, None
        a, b = Mul(f, lo), Mul(f, hi)
        return Min(a, b), Max(a, b)

    def _sym_atom(self, a: Expr, ctx, depth: int) -> tuple[Bound, Bound]:
        t = type(a)
        if t is Var:
            return self._var_bounds(a, ctx)
        if t is FloorDiv and type(a.b) is IntImm and a.b.value != 0:
            lo, hi = self.sym_bounds(a.a, ctx, depth)
            c = a.b
            if c.value < 0:
                lo, hi = hi, lo
            return (None if lo is None else FloorDiv(lo, c)), (None if hi is None else FloorDiv(hi, c))
        if t is FloorDiv and not (ctx.sym.keys() & vars_of(a.b)) and self.iv(a.b, ctx)[0] >= 1:
            # a positive divisor the ranged variables leave alone: floor division by it is
            # monotone in the dividend
            lo, hi = self.sym_bounds(a.a, ctx, depth)
            return (None if lo is None else FloorDiv(lo, a.b)), (None if hi is None else FloorDiv(hi, a.b))
        if t is FloorMod and type(a.b) is not IntImm and not (ctx.sym.keys() & vars_of(a.b)) \
                and self.iv(a.b, ctx)[0] >= 1:
            return imm(0, INDEX), self.expr(a.b - 1, self.facts_only(ctx))  # in [0, d - 1]
        if t is FloorMod and type(a.b) is IntImm and a.b.value > 0:
            lo, hi = self.sym_bounds(a.a, ctx, depth)
            if lo is not None and hi is not None:
                c = a.b
                # One period only: the remainder then grows with the operand.
                if self.expr(FloorDiv(lo, c), self.bare) == self.expr(FloorDiv(hi, c), self.bare):
                    return FloorMod(lo, c), FloorMod(hi, c)
            return self._const_bounds(a, ctx)
        if t is Min or t is Max:
            (la, ha), (lb, hb) = self.sym_bounds(a.a, ctx, depth), self.sym_bounds(a.b, ctx, depth)
            if t is Min:  # a missing lower bound is -inf, a missing upper bound +inf
                return (None if la is None or lb is None else Min(la, lb)), \
                    (hb if ha is None else ha if hb is None else Min(ha, hb))
            return (lb if la is None else la if lb is None else Max(la, lb)), \
                (None if ha is None or hb is None else Max(ha, hb))
        if t is Select:
            (lt, ht), (lf, hf) = (self.sym_bounds(x, ctx, depth) for x in (a.true_value, a.false_value))
            return (None if lt is None or lf is None else Min(lt, lf)), \
                (None if ht is None or hf is None else Max(ht, hf))
        if t is Mul:  # a product of two sums, kept whole
            ranged = ctx.sym.keys()
            for x, y in ((a.a, a.b), (a.b, a.a)):
                if not (ranged & vars_of(x)):
                    lo, hi = self.sym_bounds(y, ctx, depth)
                    return self._times(x, lo, hi, ctx)
        return self._const_bounds(a, ctx)

    def _sym_vector(self, e: Expr, ctx, depth: int) -> tuple[Bound, Bound]:
        """Bounds over every lane."""
        if type(e) is Broadcast:
            return self.sym_bounds(e.value, ctx, depth)
        if type(e) is Ramp and e.base.dtype == INDEX:
            lctx = self.lane_ctx(ctx, e.lanes)
            return self.sym_bounds(self.expr(lane_expr(e), lctx), lctx, depth)
        return self._const_bounds(e, ctx)
