"""Hoist a loop-invariant condition out of the loops it guards.

A reduction with a condition (``te.sum(..., where=c)``) guards its update innermost: inside the
register block's unrolled columns and vectorized lanes, under every reduction loop. Where ``c``
does not change across the loops around the update (a dilated conv's condition that a tap's row
lies inside the plane depends on the output row and the tap's row, not on its columns or channel
lanes), it is hoisted:

    for rx: for x: for fi: if c: S      ->      if c: for rx: for x: for fi: S

so the whole block of FMAs is skipped where ``c`` fails and runs unguarded where it holds (a
guarded update of a register block is no longer registers).
"""
from __future__ import annotations

from ..arith.poly import vars_of
from ..expr import Load
from ..stmt import For, IfThenElse, PrimFunc, Store
from ..visit import rewrite, walk


def _updates_registers(s) -> bool:
    """Whether every store in ``s`` is to a local (register) buffer: a guarded accumulator
    update, not a write-back (whose guards the vectorizer turns into masks)."""
    stores = [n for n in walk(s) if isinstance(n, Store)]
    return bool(stores) and all(n.buffer.scope == "local" for n in stores)


def _writes_what_it_reads(cond, body) -> bool:
    """Whether ``body`` stores to a buffer ``cond`` loads: the condition then changes across the
    loop (a scan's ``if not found: ... found = ...``), however it uses the loop's variable."""
    read = {n.buffer for n in walk(cond) if isinstance(n, Load)}
    return bool(read) and any(isinstance(n, Store) and n.buffer in read for n in walk(body))


def _hoist(n):
    if not isinstance(n, For):
        return None
    b = n.body
    if isinstance(b, IfThenElse) and b.else_case is None and n.var not in vars_of(b.condition) \
            and _updates_registers(b.then_case) and not _writes_what_it_reads(b.condition, b.then_case):
        return IfThenElse(b.condition, n.replace(body=b.then_case), None)
    return None


def hoist_invariant_ifs(func: PrimFunc) -> PrimFunc:
    """Move each ``if`` (without ``else``) over accumulator updates that is a loop's whole body
    and does not use the loop's variable, nor read what the loop writes, outside that loop,
    innermost loops first."""
    return func.replace(body=rewrite(func.body, _hoist))


__all__ = ["hoist_invariant_ifs"]
