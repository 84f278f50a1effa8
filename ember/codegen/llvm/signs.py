"""Lower bounds of integer index expressions, read off the loop IR while it is emitted.

A floor division or remainder of signed integers is a dozen instructions (the quotient
rounded toward minus infinity, a divisor of 0 or -1 made harmless); of a dividend known
non-negative by a divisor known positive it is one ``udiv`` or ``urem``. Shape-generic
kernels divide by their sizes in every index (a collapsed loop's ``i // s1``, ``i % s1``),
and the sizes are positive: the runtime binds each in [1, SIZE_MAX] (a size named ``?...``
in [0, SIZE_MAX]), the contract the loop simplifier already proves with
(:func:`ember.loop.lower.size_ranges`). Loop variables from a non-negative start are
non-negative. The rest follows by structure, without the simplifier's analysis: this runs per
expression emitted, and where it cannot tell it says None and the signed form is kept.
"""
from __future__ import annotations

from typing import Optional

from ...loop.expr import Add, Broadcast, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Ramp, Var
from ...loop.stmt import PrimFunc
from ...loop.visit import walk


def size_bounds(func: PrimFunc) -> dict:
    """The lower bounds of ``func``'s symbolic sizes (the variables in its buffers' shapes)."""
    return {v: 0 if v.name.startswith("?") else 1 for b in func.buffers for d in b.shape for v in walk(d)
            if isinstance(v, Var)}


def lower_bound(e, known: dict) -> Optional[int]:
    """A lower bound of integer expression ``e`` (every lane of a vector) given the variables'
    in ``known``, or None where none follows by structure."""
    t = type(e)
    if t is IntImm:
        return e.value
    if t is int:  # (hand-built IR's loop bounds)
        return e
    if t is Var:
        return known.get(e)
    if t is Broadcast:
        return lower_bound(e.value, known)
    if t is Ramp:
        base, stride = lower_bound(e.base, known), lower_bound(e.stride, known)
        return base if base is not None and stride is not None and stride >= 0 else None
    if t in (Add, Mul, Min):
        a, b = lower_bound(e.a, known), lower_bound(e.b, known)
        if a is None or b is None or (t is Mul and min(a, b) < 0):
            return None
        return a + b if t is Add else a * b if t is Mul else min(a, b)
    if t is Max:
        a, b = lower_bound(e.a, known), lower_bound(e.b, known)
        return max(x for x in (a, b) if x is not None) if (a, b) != (None, None) else None
    if t in (FloorDiv, FloorMod):
        d = lower_bound(e.b, known)
        if d is None or d < 1:
            return None
        if t is FloorMod:  # (in [0, d) whatever the dividend)
            return 0
        a = lower_bound(e.a, known)
        return 0 if a is not None and a >= 0 else None
    return None


def unsigned_divides(e, known: dict) -> bool:
    """Whether floor division or remainder ``e`` may be emitted unsigned: its dividend known
    non-negative, its divisor positive."""
    a, d = lower_bound(e.a, known), lower_bound(e.b, known)
    return a is not None and a >= 0 and d is not None and d >= 1
