"""Statement simplification: contexts flow down loops, lets and branches.

``For(v, min, extent)`` puts ``v`` in [min, min + extent - 1] for its body; an ``IfThenElse``
condition is known true in the then-branch and false in the else-branch. Dead code goes:
empty loops, branches decided by the context, stores whose predicate is all-false. The empty
``SeqStmt(())`` is the no-op.
"""
from __future__ import annotations

from .. import dtype as dt
from ..expr import GE, Add, FloatImm, IntImm, Let, Not, Sub
from ..stmt import Allocate, Buffer, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt, Store
from ..visit import substitute, walk
from .common import is_false, is_true, rebuild
from .fold import imm
from .poly import vars_of

NOP = SeqStmt(())


def is_nop(s: Stmt) -> bool:
    return type(s) is SeqStmt and not s.stmts


def _substitutable(body: Stmt, var, value) -> bool:
    """Whether ``var := value`` may be substituted throughout ``body``: nothing in it rebinds
    ``var`` or a variable of ``value`` (which would capture it), and no buffer shape uses ``var``."""
    names = {var} | set(vars_of(value))
    for n in walk(body):
        if isinstance(n, (For, LetStmt, Let)) and n.var in names:
            return False
        if isinstance(n, Buffer) and var in vars_of(n.shape + (n.strides or ())):
            return False
    return True


def _uses(body: Stmt, var) -> bool:
    """Whether ``body`` mentions ``var``, buffer shapes (of allocations) included."""
    if var in vars_of(body):
        return True
    return any(isinstance(n, Buffer) and var in vars_of(n.shape + (n.strides or ())) for n in walk(body))


class StmtMixin:
    """Statement rules; mixed into the Analyzer (uses ``expr``, ``bind``, ``assume``)."""

    def stmt(self, s: Stmt, ctx) -> Stmt:
        h = _STMT.get(type(s))
        return h(self, s, ctx) if h is not None else s

    def _s_for(self, s: For, ctx) -> Stmt:
        mn, ext = self.expr(s.min, ctx), self.expr(s.extent, ctx)
        if type(ext) is IntImm:
            if ext.value <= 0:
                return NOP
            if ext.value == 1 and _substitutable(s.body, s.var, mn):
                return self.stmt(substitute(s.body, {s.var: mn}), ctx)
        hi = self.binary(Sub, self.binary(Add, mn, ext, ctx), imm(1, ext.dtype), ctx)
        inner = self.bind(ctx, s.var, mn, hi)
        # the body runs only if the loop is not empty -- a fact about the enclosing scope, so
        # not when the extent names the loop variable (inside, that name is the loop's own)
        if type(ext) is not IntImm and s.var not in vars_of(ext):
            inner = self.assume(inner, GE(ext, imm(1, ext.dtype)))
        body = self.stmt(s.body, inner)
        if is_nop(body):
            return NOP
        return rebuild(s, min=mn, extent=ext, body=body)

    def _s_if(self, s: IfThenElse, ctx) -> Stmt:
        c = self.expr(s.condition, ctx)
        if type(c) is IntImm:
            if c.value:
                return self.stmt(s.then_case, ctx)
            return NOP if s.else_case is None else self.stmt(s.else_case, ctx)
        then = self.stmt(s.then_case, self.assume(ctx, c))
        els = None if s.else_case is None else self.stmt(s.else_case, self.assume(ctx, Not(c)))
        if els is not None and is_nop(els):
            els = None
        if is_nop(then):
            return NOP if els is None else IfThenElse(self._not(c, ctx), els, None)
        return rebuild(s, condition=c, then_case=then, else_case=els)

    def _s_store(self, s: Store, ctx) -> Stmt:
        value = self.expr(s.value, ctx)
        idx = tuple(self.expr(i, ctx) for i in s.indices)
        pred = None if s.predicate is None else self.expr(s.predicate, ctx)
        if pred is not None and is_true(pred):
            pred = None  # every lane is stored anyway
        elif pred is not None and is_false(pred):
            return NOP
        return rebuild(s, value=value, indices=idx, predicate=pred)

    def _s_let(self, s: LetStmt, ctx) -> Stmt:
        value = self.expr(s.value, ctx)
        if not _uses(s.body, s.var):
            return self.stmt(s.body, ctx)
        inner = self.bind(ctx, s.var, value, value) if dt.is_int(value.dtype) else ctx
        body = self.stmt(s.body, inner)
        if is_nop(body):
            return NOP
        return rebuild(s, value=value, body=body)

    def _s_seq(self, s: SeqStmt, ctx) -> Stmt:
        out = []
        for x in s.stmts:
            y = self.stmt(x, ctx)
            if type(y) is SeqStmt:
                out.extend(y.stmts)
            else:
                out.append(y)
        if len(out) == 1:
            return out[0]
        if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)):
            return s
        return SeqStmt(tuple(out))

    def _s_allocate(self, s: Allocate, ctx) -> Stmt:
        body = self.stmt(s.body, ctx)
        return NOP if is_nop(body) else rebuild(s, body=body)

    def _s_evaluate(self, s: Evaluate, ctx) -> Stmt:
        v = self.expr(s.value, ctx)
        if type(v) in (IntImm, FloatImm):
            return NOP  # a constant evaluated for nothing
        return rebuild(s, value=v)


_STMT = {For: StmtMixin._s_for, IfThenElse: StmtMixin._s_if, Store: StmtMixin._s_store,
         LetStmt: StmtMixin._s_let, SeqStmt: StmtMixin._s_seq, Allocate: StmtMixin._s_allocate,
         Evaluate: StmtMixin._s_evaluate}
