"""Rules for floats, logic, vectors and the remaining expression nodes."""
from __future__ import annotations

import math

from .. import dtype as dt
from ..expr import (Add, And, Broadcast, Cast, Div, Expr, FloatImm, IntImm, Max, Min, Mul, Not, Or, Ramp,
                    Select, Sub)
from . import poly as P
from .common import INDEX, LANE, NEGATE, dtype_of, is_false, is_true, lane_expr, rebuild, uniform_const
from .fold import bool_const, fold_cast, imm, int_range
from .poly import poly_of, to_expr, vars_of

# float rounding intrinsics folded on constants (``round`` is round-half-even, as generated)
_ROUNDING = {"floor": math.floor, "ceil": math.ceil, "trunc": math.trunc, "round": round}


class NodeMixin:
    """Mixed into the Analyzer (uses ``expr``, ``binary``, ``bind``, ``lane_ctx``, ``iv``)."""

    def _float(self, cls, a, b):
        r = _float_identity(cls, a, b, uniform_const(a), uniform_const(b))
        return r if r is not None else cls(a, b)

    def _logic(self, cls, a, b):
        n = dt.lanes(dtype_of(a))
        absorbing = is_false if cls is And else is_true
        neutral = is_true if cls is And else is_false
        if absorbing(a) or absorbing(b):
            return bool_const(cls is Or, n)
        if neutral(a):
            return b
        if neutral(b) or a == b:
            return a
        if (type(a) is Not and a.a == b) or (type(b) is Not and b.a == a):
            return bool_const(cls is Or, n)
        return cls(a, b)

    def _vector(self, cls, a, b, ctx, n):
        if type(a) is Broadcast and type(b) is Broadcast:
            return Broadcast(self.binary(cls, a.value, b.value, ctx), n)
        if cls is And or cls is Or:
            return self._logic(cls, a, b)
        elem = dt.element(dtype_of(a))
        ca, cb = uniform_const(a), uniform_const(b)
        if dt.is_float(elem):
            r = _float_identity(cls, a, b, ca, cb)
            return r if r is not None else cls(a, b)
        if dt.is_int(elem):
            r = _int_vector_identity(cls, a, b, ca, cb, elem, n)
            if r is not None:
                return r
        if elem == INDEX and Ramp in (type(a), type(b)) and {type(a), type(b)} <= {Ramp, Broadcast}:
            r = self._ramp_arith(cls, a, b, ctx, n)
            if r is None:
                r = self._lanewise(cls, a, b, ctx, n)
            if r is not None:
                return r
        return cls(a, b)

    def _ramp_arith(self, cls, a, b, ctx, n):
        def parts(x):
            return (x.base, x.stride) if type(x) is Ramp else (x.value, imm(0, INDEX))

        (ba, sa), (bb, sb) = parts(a), parts(b)
        if cls is Add or cls is Sub:
            base, stride = self.binary(cls, ba, bb, ctx), self.binary(cls, sa, sb, ctx)
        elif cls is Mul and (type(a) is Broadcast or type(b) is Broadcast):
            x = ba if type(a) is Broadcast else bb
            r = b if type(a) is Broadcast else a
            base, stride = self.binary(Mul, r.base, x, ctx), self.binary(Mul, r.stride, x, ctx)
        else:
            return None
        if type(stride) is IntImm and stride.value == 0:
            return Broadcast(base, n)
        return Ramp(base, stride, n)

    def _lanewise(self, cls, a, b, ctx, n):
        """Analyse ``cls(a, b)`` for one symbolic lane; vectorize the result back if it is a
        broadcast or a ramp (``ramp(8i, 1, 8) // 8 -> broadcast(i)``)."""
        lctx = self.lane_ctx(ctx, n)
        la, lb = (self.expr(lane_expr(x), lctx) for x in (a, b))
        return self._revectorize(self.binary(cls, la, lb, lctx), n)

    def _revectorize(self, r: Expr, n: int):
        if LANE not in vars_of(r):
            return Broadcast(r, n)
        if dtype_of(r) == INDEX:
            p = poly_of(r)
            k = p.terms.get((LANE,))
            if k is not None:
                rest = P.Poly({m: kk for m, kk in p.terms.items() if m != (LANE,)}, p.const, INDEX)
                if not any(LANE in vars_of(x) for m in rest.terms for x in m):
                    return Ramp(to_expr(rest), imm(k, INDEX), n)
        return None

    # --- other expression nodes ----------------------------------------------------------------

    def _not(self, a: Expr, ctx) -> Expr:
        if type(a) is IntImm:
            return bool_const(not a.value)
        if type(a) is Broadcast:
            return Broadcast(self._not(a.value, ctx), a.lanes)
        if type(a) is Not:
            return a.a
        if type(a) in NEGATE and dt.is_int(dtype_of(a.a)):  # not on floats: NaN compares false both ways
            return self.binary(NEGATE[type(a)], a.a, a.b, ctx)
        return Not(a)

    def _v_not(self, e, ctx):
        return self._not(self.expr(e.a, ctx), ctx)

    def _v_cast(self, e, ctx):
        return self.cast(e.type, self.expr(e.value, ctx), ctx)

    def cast(self, dtype: str, v: Expr, ctx) -> Expr:
        if dtype_of(v) == dtype:
            return v
        if type(v) in (IntImm, FloatImm):
            r = fold_cast(dtype, v)
            return r if r is not None else Cast(dtype, v)
        if type(v) is Broadcast:
            return Broadcast(self.cast(dt.element(dtype), v.value, ctx), v.lanes)
        if (type(v) is Cast and dtype_of(v.value) == dtype and dt.is_int(dtype)
                and dt.is_int(v.type) and dt.lanes(dtype) == 1):
            lo, hi = int_range(v.type)
            ia = self.iv(v.value, ctx)
            if lo <= ia[0] and ia[1] <= hi:  # the round trip through v.type loses nothing
                return v.value
        return Cast(dtype, v)

    def _v_select(self, e, ctx):
        c = self.expr(e.condition, ctx)
        if is_true(c):
            return self.expr(e.true_value, ctx)
        if is_false(c):
            return self.expr(e.false_value, ctx)
        t, f = self.expr(e.true_value, ctx), self.expr(e.false_value, ctx)
        if t == f:
            return t
        if dtype_of(t) == "bool" and dtype_of(c) == "bool":
            if is_true(t) and is_false(f):
                return c
            if is_false(t) and is_true(f):
                return self._not(c, ctx)
        if type(c) is Broadcast and type(t) is Broadcast and type(f) is Broadcast:
            return Broadcast(self.expr(Select(c.value, t.value, f.value), ctx), t.lanes)
        return rebuild(e, condition=c, true_value=t, false_value=f)

    def _v_call(self, e, ctx):
        args = tuple(self.expr(a, ctx) for a in e.args)
        rounding = _ROUNDING.get(e.name)
        if rounding is not None and len(args) == 1 and type(args[0]) is FloatImm and math.isfinite(args[0].value):
            # exact: an integral float is representable in the argument's type; the result keeps
            # the argument's sign where it is zero (ceil(-0.25) is -0.0)
            r = float(rounding(args[0].value))
            return FloatImm(math.copysign(r, args[0].value) if r == 0 else r, e.type)
        return rebuild(e, args=args)

    def _v_ramp(self, e, ctx):
        base, stride = self.expr(e.base, ctx), self.expr(e.stride, ctx)
        if type(stride) is IntImm and stride.value == 0:
            return Broadcast(base, e.lanes)
        return rebuild(e, base=base, stride=stride)

    def _v_broadcast(self, e, ctx):
        return rebuild(e, value=self.expr(e.value, ctx))

    def _v_let(self, e, ctx):
        value = self.expr(e.value, ctx)
        if e.var not in vars_of(e.body):
            return self.expr(e.body, ctx)
        inner = self.bind(ctx, e.var, value, value) if dt.is_int(dtype_of(value)) else ctx
        body = self.expr(e.body, inner)
        return rebuild(e, value=value, body=body)

    def _v_load(self, e, ctx):
        idx = tuple(self.expr(i, ctx) for i in e.indices)
        pred = None if e.predicate is None else self.expr(e.predicate, ctx)
        if pred is not None and is_true(pred):
            pred = None
        return rebuild(e, indices=idx, predicate=pred)


def _float_identity(cls, a, b, ca, cb):
    """Float identities that hold for every value, NaN, infinities and signed zeros included."""
    if cls is Mul:
        if cb == 1.0:
            return a
        if ca == 1.0:
            return b
    elif cls is Div and cb == 1.0:
        return a
    elif cls is Sub and cb == 0.0 and math.copysign(1.0, cb) > 0:  # x - (+0) == x, even for -0
        return a
    elif cls is Add:  # x + (-0) == x; x + (+0) is not (-0 + +0 == +0)
        if cb == 0.0 and math.copysign(1.0, cb) < 0:
            return a
        if ca == 0.0 and math.copysign(1.0, ca) < 0:
            return b
    elif cls in (Min, Max) and a == b:
        return a
    return None


def _int_vector_identity(cls, a, b, ca, cb, elem, n):
    if cls is Add:
        if cb == 0:
            return a
        if ca == 0:
            return b
    elif cls is Sub and cb == 0:
        return a
    elif cls is Mul:
        if cb == 1:
            return a
        if ca == 1:
            return b
        if cb == 0 or ca == 0:
            return Broadcast(imm(0, elem), n)
    return None
