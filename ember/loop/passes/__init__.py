"""Loop-IR passes, one file each; :func:`default_pipeline` is what a build runs."""
from __future__ import annotations

from ..stmt import PrimFunc
from .guard_loads import guard_select_loads
from .instrument import LoopSite, instrument_loops, mark_sites
from .unroll import unroll_loops
from .vectorize import vectorize_loops


def default_pipeline(func: PrimFunc) -> PrimFunc:
    """simplify -> guard select loads -> unroll -> simplify -> vectorize -> simplify."""
    from ..arith import simplify

    func = guard_select_loads(simplify(func))
    func = simplify(unroll_loops(func))
    func = simplify(vectorize_loops(func))
    return func


__all__ = ["LoopSite", "default_pipeline", "guard_select_loads", "instrument_loops", "mark_sites",
           "unroll_loops", "vectorize_loops"]
