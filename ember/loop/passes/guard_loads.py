"""Guard loads under a select: a load that only one side of ``select`` needs gets that side's
condition as its predicate, so it never touches memory the condition rules out.

    select(i < n, A[i], 0.0)   ->   select(i < n, A.load((i,), predicate=i < n), 0.0)

Without this, both arms are evaluated and a padded read (``A[i]`` for ``i >= n``) would read
past the end of the buffer.
"""
from __future__ import annotations

from ..expr import And, Load, Not, Select
from ..stmt import PrimFunc
from ..visit import rewrite


def _predicate_loads(e, cond):
    def fn(n):
        if isinstance(n, Load):
            return n.replace(predicate=cond if n.predicate is None else And(n.predicate, cond))
        return None
    return rewrite(e, fn)


def guard_select_loads(func: PrimFunc) -> PrimFunc:
    """Predicate every load inside a select arm by the condition that selects that arm."""
    def fn(n):
        if isinstance(n, Select):
            c = n.condition
            return Select(c, _predicate_loads(n.true_value, c), _predicate_loads(n.false_value, Not(c)))
        return None
    return func.replace(body=rewrite(func.body, fn))
