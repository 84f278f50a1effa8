"""Vectorize: turn every ``For(kind="vectorized")`` into SIMD expressions over its lanes.

    for j in vectorized(0, 8):               C[i, ramp(0, 1, 8)] =
        C[i, j] = A[i, j] + B[j]      ->         A[i, ramp(0, 1, 8)] + B[ramp(0, 1, 8)]

The loop variable becomes ``ramp(min, 1, lanes)``; scalars it touches become broadcasts.
A condition that depends on the lane becomes a predicate on the stores (and loads) it
guards, so tails are masked rather than branched. Loops nested inside stay loops with a
vector body.
"""
from __future__ import annotations

from ...errors import LoweringError
from .. import dtype as dt
from ..arith.poly import vars_of
from ..expr import (BinaryOp, Broadcast, Call, Cast, Expr, IntImm, Let, Load, Not, Ramp, Select, Var,
                    And, Add, Sub, Mul)
from ..stmt import Allocate, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Store, seq
from ..visit import rewrite, substitute


def _lanes(e: Expr) -> int:
    return dt.lanes(e.dtype)


def _bcast(e: Expr, n: int) -> Expr:
    return e if _lanes(e) == n else Broadcast(e, n)


class _Vectorizer:
    def __init__(self, var: Var, lanes: int, base: Expr):
        self.var, self.lanes, self.base = var, lanes, base

    def expr(self, e: Expr, pred=None) -> Expr:
        n = self.lanes
        if e == self.var:
            return Ramp(self.base, IntImm(1), n)
        if isinstance(e, (Var, IntImm)) or not isinstance(e, Load) and self.var not in vars_of(e):
            return e
        if isinstance(e, BinaryOp):
            a, b = self.expr(e.a, pred), self.expr(e.b, pred)
            return _combine(type(e), a, b)
        if isinstance(e, Load):
            idx = tuple(self.expr(i, pred) for i in e.indices)
            p = e.predicate if e.predicate is None else self.expr(e.predicate, pred)
            if pred is not None and any(_lanes(i) > 1 for i in idx):
                p = pred if p is None else And(_bcast(p, n), pred)
            if any(_lanes(i) > 1 for i in idx):
                return Load(e.buffer, idx, p)
            if not idx:  # a 0-d buffer's one element is always in bounds: no mask needed
                return e.replace(predicate=None)
            if p is not None and _lanes(p) > 1:
                # a uniform address needed only by some lanes: a masked splat (gather) load
                return Load(e.buffer, idx[:-1] + (_bcast(idx[-1], _lanes(p)),), p)
            return e.replace(indices=idx, predicate=p)
        if isinstance(e, Not):
            return Not(self.expr(e.a, pred))
        if isinstance(e, Cast):
            v = self.expr(e.value, pred)
            return Cast(dt.with_lanes(e.type, _lanes(v)), v)
        if isinstance(e, Select):
            c, t, f = (self.expr(x, pred) for x in (e.condition, e.true_value, e.false_value))
            m = max(map(_lanes, (c, t, f)))
            return Select(_bcast(c, m), _bcast(t, m), _bcast(f, m))
        if isinstance(e, Call):
            args = [self.expr(a, pred) for a in e.args]
            m = max(map(_lanes, args))
            return Call(dt.with_lanes(e.type, m), e.name, tuple(_bcast(a, m) for a in args))
        if isinstance(e, Let):
            return self.expr(substitute(e.body, {e.var: e.value}), pred)
        if isinstance(e, (Ramp, Broadcast)):
            raise LoweringError(f"cannot vectorize loop {self.var.name}: its body is already vector code")
        raise LoweringError(f"cannot vectorize loop {self.var.name}: unsupported node {type(e).__name__}")

    def stmt(self, s, pred=None):
        n = self.lanes
        if isinstance(s, Store):
            idx = tuple(self.expr(i, pred) for i in s.indices)
            val = self.expr(s.value, pred)
            vec_idx = any(_lanes(i) > 1 for i in idx)
            if not vec_idx:
                if _lanes(val) > 1 or pred is not None:
                    raise LoweringError(
                        f"cannot vectorize loop {self.var.name}: every lane would store to the same "
                        f"element of {s.buffer.name} (a loop-carried dependence)")
                return s.replace(indices=idx, value=val)
            p = None if s.predicate is None else _bcast(self.expr(s.predicate, pred), n)
            if pred is not None:
                p = pred if p is None else And(p, pred)
            return Store(s.buffer, _bcast(val, n), idx, p)
        if isinstance(s, SeqStmt):
            return seq(*[self.stmt(x, pred) for x in s.stmts])
        if isinstance(s, IfThenElse):
            c = self.expr(s.condition, pred)
            if _lanes(c) == 1:
                return IfThenElse(c, self.stmt(s.then_case, pred),
                                  None if s.else_case is None else self.stmt(s.else_case, pred))
            c = _bcast(c, n)
            then = self.stmt(s.then_case, c if pred is None else And(pred, c))
            if s.else_case is None:
                return then
            nc = Not(c)
            return seq(then, self.stmt(s.else_case, nc if pred is None else And(pred, nc)))
        if isinstance(s, For):
            if self.var in vars_of(s.min) or self.var in vars_of(s.extent):
                raise LoweringError(f"cannot vectorize loop {self.var.name}: the range of inner loop "
                                    f"{s.var.name} depends on it")
            return s.replace(body=self.stmt(s.body, pred))
        if isinstance(s, LetStmt):
            v = self.expr(s.value, pred)
            if _lanes(v) == 1:
                return s.replace(value=v, body=self.stmt(s.body, pred))
            return self.stmt(substitute(s.body, {s.var: s.value}), pred)
        if isinstance(s, Evaluate):
            return Evaluate(self.expr(s.value, pred))
        if isinstance(s, Allocate):
            raise LoweringError(f"cannot vectorize loop {self.var.name}: it allocates "
                                f"{s.buffer.name} inside (compute it at an outer loop)")
        raise LoweringError(f"cannot vectorize loop {self.var.name}: unsupported {type(s).__name__}")


def _combine(cls, a: Expr, b: Expr) -> Expr:
    la, lb = _lanes(a), _lanes(b)
    if la == lb == 1:
        return cls(a, b)
    n = max(la, lb)
    # keep affine lane indices as ramps, so the code generator sees contiguous accesses
    if cls in (Add, Sub) and isinstance(a, Ramp) and lb == 1:
        return Ramp(cls(a.base, b), a.stride, n)
    if cls is Add and isinstance(b, Ramp) and la == 1:
        return Ramp(Add(a, b.base), b.stride, n)
    if cls is Mul and isinstance(a, Ramp) and lb == 1:
        return Ramp(Mul(a.base, b), Mul(a.stride, b), n)
    if cls is Mul and isinstance(b, Ramp) and la == 1:
        return Ramp(Mul(a, b.base), Mul(a, b.stride), n)
    if cls is Add and isinstance(a, Ramp) and isinstance(b, Ramp):
        return Ramp(Add(a.base, b.base), Add(a.stride, b.stride), n)
    return cls(_bcast(a, n), _bcast(b, n))


def vectorize_loops(func: PrimFunc) -> PrimFunc:
    """Replace vectorized loops (constant extent) by vector code."""
    def fn(n):
        if isinstance(n, For) and n.kind == "vectorized":
            if not isinstance(n.extent, IntImm):
                raise LoweringError(f"{func.name}: vectorized loop {n.var.name} has non-constant "
                                    f"extent {n.extent}")
            if n.extent.value > 64:
                raise LoweringError(f"{func.name}: vectorized loop {n.var.name} has {n.extent.value} "
                                    f"lanes, over 64; split it by the vector width first")
            if n.extent.value == 1:
                return substitute(n.body, {n.var: n.min})
            return _Vectorizer(n.var, n.extent.value, n.min).stmt(n.body)
        return None
    return func.replace(body=rewrite(func.body, fn))
