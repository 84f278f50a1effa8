"""Unswitch loops by ranges of their variable: a body that selects on where ``v`` lies runs
one branch per range, each with those selects decided.

A concat's element is a tree of selects on its index along the concat axis, and every arm's
load is predicated by its condition (:mod:`.guard_loads`): each output vector evaluates the
comparisons and issues every source's masked load. Fused into the kernel's loop ``v``, that
index is ``v // d`` (the product of the inner extents), so its conditions cut ``v``'s range
into intervals on which each is constant:

    for v in [0, E):  body          ->    for v in [0, E):
                                              if v < c1: body     (v // d < C1 known true)
                                              elif v < c2: body   ...
                                              else: body

and the simplifier, which takes a branch's condition as known, folds every select in each copy
to the one source it reads: a plain copy. The branch is taken once per iteration of ``v`` and
predicted; the loop stays one loop (one parallel region). Conditions of ``v`` alone
(``v < C``, ``v // d < C`` and the other orders) cut, at most :data:`MOST_CUTS` of them; a
loop inside one unswitched is left as it is.

So do conditions on a vector's lanes: ``k v + u < C``, ``u`` the variable of a vectorized loop
inside (a padded copy of unblocked input, whose vectors run along the padded row:
``8 v + u >= 1`` and ``8 v + u < 225``). Such a condition holds for every lane below one cut
and for none from another; between them is the one vector with a mask. Each range's copy then
loads and stores whole vectors, where every vector had masked loads and a mask built from
64-bit lane comparisons (measured: the padded copy took a third of EfficientNet's stem conv).
"""
from __future__ import annotations

from ..expr import GE, GT, LE, LT, FloorDiv, IntImm, Var
from ..stmt import For, IfThenElse, PrimFunc, SeqStmt, Stmt
from ..visit import walk

MOST_CUTS = 8  # (each cut is a copy of the body)
_FLIP = {LT: GT, LE: GE, GT: LT, GE: LE}


def _cut(e, v: Var):
    """The ``c`` at which comparison ``e`` of ``v`` alone changes truth (it holds for all
    ``v < c`` or for all ``v >= c``), or None."""
    t = type(e)
    if t not in _FLIP:
        return None
    a, b = e.a, e.b
    if isinstance(a, IntImm) and not isinstance(b, IntImm):  # C < x is x > C
        a, b, t = b, a, _FLIP[t]
    if not isinstance(b, IntImm):
        return None
    d = 1
    if isinstance(a, FloorDiv) and isinstance(a.b, IntImm) and a.b.value > 0:
        a, d = a.a, a.b.value
    if a != v:
        return None
    c = b.value + (1 if t in (LE, GT) else 0)  # x <= C is x < C + 1; x > C is not x < C + 1
    return c * d


def _lane_cuts(e, v: Var, lanes: dict) -> tuple:
    """The cuts of comparison ``e`` of ``k v + u + c`` (``k > 0``, ``u`` a combination of the
    vectorized loop variables in ``lanes``, ``{var: (lo, hi)}`` inclusive) against a constant:
    below the first every lane's truth is the same, from the second on too; ``()`` if none."""
    from ..arith import linear_form

    t = type(e)
    if t not in _FLIP or not lanes:
        return ()
    form = linear_form(e.a - e.b, [v, *lanes])
    if form is None or not isinstance(form[1], IntImm) or form[0].get(v, 0) <= 0 \
            or not (form[0].keys() - {v}):
        return ()
    coeffs, rest = form
    k = coeffs.pop(v)
    u_lo = sum(c * lanes[x][0 if c > 0 else 1] for x, c in coeffs.items())
    u_hi = sum(c * lanes[x][1 if c > 0 else 0] for x, c in coeffs.items())
    # the comparison is k v + w < 0 (or its negation), w = u + rest in [w_lo, w_hi] (x <= 0 is
    # x - 1 < 0): every lane has it below -w_hi / k, and none from -w_lo / k on
    shift = rest.value - (1 if t in (LE, GT) else 0)
    return (-((u_hi + shift) // k), -((u_lo + shift) // k))


def _cuts(f: For) -> list:
    if not (isinstance(f.min, IntImm) and isinstance(f.extent, IntImm)):
        return []
    lo, hi = f.min.value, f.min.value + f.extent.value
    lanes = {n.var: (n.min.value, n.min.value + n.extent.value - 1) for n in walk(f.body)
             if isinstance(n, For) and n.kind == "vectorized" and isinstance(n.min, IntImm)
             and isinstance(n.extent, IntImm)}
    found = set()
    for e in walk(f.body):
        c = _cut(e, f.var)
        found.update((c,) if c is not None else _lane_cuts(e, f.var, lanes))
    return sorted(c for c in found if lo < c < hi)


def _unswitch(s: Stmt) -> Stmt:
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_unswitch(x) for x in s.stmts))
    if isinstance(s, For):
        cuts = _cuts(s) if s.kind in ("serial", "parallel") else []
        if not cuts or len(cuts) > MOST_CUTS:
            return s.replace(body=_unswitch(s.body))
        body = s.body
        for c in reversed(cuts):
            body = IfThenElse(LT(s.var, IntImm(c, s.var.dtype)), s.body, body)
        return s.replace(body=body)
    for field in ("body", "then_case", "else_case"):  # Allocate, LetStmt, IfThenElse
        inner = getattr(s, field, None)
        if isinstance(inner, Stmt):
            s = s.replace(**{field: _unswitch(inner)})
    return s


def unswitch_ranges(func: PrimFunc) -> PrimFunc:
    """Split the body of each loop whose conditions cut its range (see the module docstring)
    into one branch per range; the simplifier then decides the conditions in each."""
    return func.replace(body=_unswitch(func.body))


__all__ = ["MOST_CUTS", "unswitch_ranges"]
