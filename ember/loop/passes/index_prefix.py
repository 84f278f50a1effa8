"""Fold an access's leading scalar indices into one where that undoes a fused loop's split.

A loop fused over a tensor's outer axes indexes it by splitting the fused variable back:

    for i in parallel(batch * 4 * seq):
        y[i // (seq * 4), i // seq % 4, i % seq, ramp(j, 1, 16)] = ...

With constant sizes LLVM turns those divisions into multiplies and shifts. With symbolic ones
(a dynamic batch or sequence, a kernel shared by several shapes) each is a 64-bit ``idiv``, and
LLVM computes them again in every loop of the body they are not hoisted out of: a softmax row
over a symbolic length ran 1.7x slower than over a constant one, most of it in ten divisions a
row. The address only needs the flat offset, ``((i // (seq*4) * 4 + i // seq % 4) * seq + i % seq)
* seq + j``, which the simplifier folds back to ``i * seq + j``. So the leading scalar indices
(those before the first vector index) become one, in the last of them, the others zero; the
offset the code computes is the same, and the access keeps its vector indices as they were.
Kept only where that leaves fewer divisions by symbolic values than before.
"""
from __future__ import annotations

import dataclasses

from .. import dtype as dt
from ..expr import Div, FloorDiv, FloorMod, IntImm, Load, Mod, Var, as_expr
from ..stmt import Allocate, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Store
from ..visit import rewrite, walk

_DIVS = (FloorDiv, FloorMod, Div, Mod)


def _symbolic_divs(exprs) -> int:
    """Divisions and remainders by a value that is not a constant, in ``exprs``."""
    return sum(1 for e in exprs for n in walk(e) if isinstance(n, _DIVS) and not isinstance(n.b, IntImm))


class _Folder:
    def __init__(self):
        self.memo: dict = {}

    def fold(self, buffer, indices: tuple, ranges: dict):
        """``indices`` with the leading scalar ones folded into one, or None."""
        if buffer.strides is not None:
            return None
        n = 0
        while n < len(indices) and dt.lanes(indices[n].dtype) == 1 and indices[n].dtype == dt.INDEX:
            n += 1
        if n < 2:
            return None
        prefix = indices[:n]
        before = _symbolic_divs(prefix)
        if not before:
            return None
        used = {v for e in prefix for v in walk(e) if isinstance(v, Var)}
        key = (prefix, tuple(buffer.shape[1:n]),
               tuple(sorted(((v.name, v, ranges[v]) for v in used if v in ranges), key=lambda t: t[0])))
        if key not in self.memo:
            from ..arith import simplify

            flat = prefix[0]
            for size, i in zip(buffer.shape[1:n], prefix[1:]):
                flat = flat * size + i
            flat = simplify(flat, ranges)
            self.memo[key] = flat if _symbolic_divs((flat,)) < before else None
        flat = self.memo[key]
        if flat is None:
            return None
        return (IntImm(0),) * (n - 1) + (flat,) + tuple(indices[n:])

    def expr(self, e, ranges: dict):
        def fn(x):
            if isinstance(x, Load):
                idx = self.fold(x.buffer, x.indices, ranges)
                return None if idx is None else x.replace(indices=idx)
            return None
        return rewrite(e, fn)

    def stmt(self, s, ranges: dict):
        if isinstance(s, For):
            lo = as_expr(s.min)
            inner = {**ranges, s.var: (lo, lo + as_expr(s.extent) - 1)}
            return dataclasses.replace(s, body=self.stmt(s.body, inner))
        if isinstance(s, LetStmt):
            inner = {**ranges, s.var: (s.value, s.value)} if s.value.dtype == dt.INDEX else ranges
            return dataclasses.replace(s, value=self.expr(s.value, ranges), body=self.stmt(s.body, inner))
        if isinstance(s, SeqStmt):
            return SeqStmt(tuple(self.stmt(x, ranges) for x in s.stmts))
        if isinstance(s, Allocate):
            return dataclasses.replace(s, body=self.stmt(s.body, ranges))
        if isinstance(s, IfThenElse):
            return dataclasses.replace(s, condition=self.expr(s.condition, ranges),
                                       then_case=self.stmt(s.then_case, ranges),
                                       else_case=None if s.else_case is None else self.stmt(s.else_case, ranges))
        if isinstance(s, Store):
            idx = self.fold(s.buffer, s.indices, ranges)
            return dataclasses.replace(s, value=self.expr(s.value, ranges),
                                       indices=s.indices if idx is None else idx,
                                       predicate=None if s.predicate is None else self.expr(s.predicate, ranges))
        if isinstance(s, Evaluate):
            return dataclasses.replace(s, value=self.expr(s.value, ranges))
        return s


def fold_index_prefix(func: PrimFunc) -> PrimFunc:
    """Fold the leading scalar indices of every access to a buffer of symbolic shape into one
    where that removes divisions by symbolic sizes (see the module docstring)."""
    sizes = {v for b in func.buffers for e in b.shape for v in walk(e) if isinstance(v, Var)}
    if not sizes:
        return func  # constant divisors: LLVM strength-reduces them
    from ..lower import size_ranges

    return func.replace(body=_Folder().stmt(func.body, size_ranges(sizes)))


__all__ = ["fold_index_prefix"]
