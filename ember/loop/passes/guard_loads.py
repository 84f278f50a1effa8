"""Guard loads under a select: a load that only one side of ``select`` needs gets that side's
condition as its predicate, so it never touches memory the condition rules out.

    select(i < n, A[i], 0.0)   ->   select(i < n, A.load((i,), predicate=i < n), 0.0)

Without this, both arms are evaluated and a padded read (``A[i]`` for ``i >= n``) would read
past the end of the buffer.

A condition on data alone (``where(isnan(x), 0, x)``: no variable outside its loads) rules out
no index, so its arms' loads are in bounds either way and stay unguarded: a predicated load is
a masked one, and it keeps the arm from sharing its subexpressions with the condition (a
quantized softmax's epilogue computed its value twice).
"""
from __future__ import annotations

from ..expr import And, Load, Not, Select, Var
from ..stmt import PrimFunc
from ..visit import expr_children, rewrite


def _predicate_loads(e, cond):
    def fn(n):
        if isinstance(n, Load):
            return n.replace(predicate=cond if n.predicate is None else And(n.predicate, cond))
        return None
    return rewrite(e, fn)


def _on_indices(e) -> bool:
    """Whether ``e`` reads a variable (a loop index, a size) other than through its loads."""
    if isinstance(e, Var):
        return True
    return not isinstance(e, Load) and any(_on_indices(c) for c in expr_children(e))


def guard_select_loads(func: PrimFunc) -> PrimFunc:
    """Predicate every load inside a select arm by the condition that selects that arm, where
    the condition depends on an index."""
    def fn(n):
        if isinstance(n, Select) and _on_indices(n.condition):
            c = n.condition
            return Select(c, _predicate_loads(n.true_value, c), _predicate_loads(n.false_value, Not(c)))
        return None
    return func.replace(body=rewrite(func.body, fn))
