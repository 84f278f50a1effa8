"""Partition tail loops: run the full vectors of a loop over a symbolic extent unmasked.

Vectorizing a loop whose extent is a symbol (a dynamic sequence length) splits it by the
vector width and masks every iteration with ``ramp(k * L, 1, L) < n``, since the last one may
be partial. Masked loads and stores (and the selects that keep masked lanes out of
reductions) cost every iteration. A loop over ``k`` in ``[0, (n + L - 1) // L)`` whose only
conditions on ``k`` are that mask is split here into

    for k in [0, n // L):             the body with the mask known true (no masks)
    for k in [n // L, (n + L - 1) // L):   the body as it was (at most one iteration)

Loops over a constant extent are left alone: their tails are known when they are compiled.
"""
from __future__ import annotations

from ..arith.poly import vars_of
from ..expr import LT, Broadcast, IntImm, Load, Mul, Ramp, Select, Var, const
from ..stmt import For, PrimFunc, SeqStmt, Store
from ..visit import rewrite, substitute, walk


def _mask_of(e, var: Var):
    """``(L, n)`` when ``e`` is ``ramp(var * L, 1, L) < broadcast(n, L)``, else None."""
    if not (isinstance(e, LT) and isinstance(e.a, Ramp) and isinstance(e.b, Broadcast)):
        return None
    from ..arith import simplify

    r, b = e.a, e.b
    lanes = r.lanes
    base = simplify(r.base)  # (vectorizing leaves k * L + 0 and the like)
    if not (isinstance(r.stride, IntImm) and r.stride.value == 1 and b.lanes == lanes and isinstance(base, Mul)):
        return None
    if not (base.a == var and isinstance(base.b, IntImm) and base.b.value == lanes):
        return None
    return lanes, b.value


def _plan(loop: For):
    """``(L, n, masks)`` when every condition on the loop's variable is the tail mask and the
    extent is ``(n + L - 1) // L`` over a symbolic ``n``, else None."""
    if isinstance(loop.extent, IntImm) or not (isinstance(loop.min, IntImm) and loop.min.value == 0):
        return None  # (a constant extent's tail is known: before walking the body, for every loop)
    var = loop.var
    found, masks = None, []
    for n in walk(loop.body):
        if isinstance(n, LT) and isinstance(n.a, Ramp) and var in vars_of(n.a.base):
            m = _mask_of(n, var)
            if m is None or (found is not None and m != found):
                return None
            found = m
            masks.append(n)
    if found is None or isinstance(found[1], IntImm):
        return None
    lanes, n = found
    from ..arith import simplify

    if simplify(loop.extent) != simplify((n + (lanes - 1)) // lanes):
        return None
    return lanes, n, masks


def _unmask(body, masks: list, lanes: int):
    """``body`` with the tail masks known true: no predicates, selects take their true arm."""
    true = Broadcast(const(True), lanes)

    def fn(node):
        if any(node == m for m in masks):
            return true
        if isinstance(node, (Load, Store)) and node.predicate is not None and node.predicate == true:
            return node.replace(predicate=None)
        if isinstance(node, Select) and node.condition == true:
            return node.true_value
        return None
    return rewrite(body, fn)


def partition_tails(func: PrimFunc) -> PrimFunc:
    """Split each serial loop over a symbolic extent whose iterations are masked only by the
    vector tail into an unmasked main loop and a masked tail (see the module docstring)."""
    def fn(node):
        if not (isinstance(node, For) and node.kind == "serial"):
            return None
        plan = _plan(node)
        if plan is None:
            return None
        lanes, n, masks = plan
        full = n // lanes
        main = For(node.var, IntImm(0), full, "serial", _unmask(node.body, masks, lanes))
        tail_var = Var(node.var.name + "_tail", node.var.dtype)
        tail = For(tail_var, full, node.extent - full, "serial", substitute(node.body, {node.var: tail_var}))
        return SeqStmt((main, tail))
    return func.replace(body=rewrite(func.body, fn))


__all__ = ["partition_tails"]
