"""Loop-IR passes, one file each; :func:`default_pipeline` is what a build runs."""
from __future__ import annotations

from ..stmt import PrimFunc
from .guard_loads import guard_select_loads
from .hoist_if import hoist_invariant_ifs
from .index_prefix import fold_index_prefix
from .instrument import LoopSite, instrument_loops, mark_sites
from .partition import partition_tails
from .unroll import unroll_loops
from .unswitch import unswitch_ranges
from .vectorize import vectorize_loops


def default_pipeline(func: PrimFunc) -> PrimFunc:
    """simplify -> guard select loads -> unswitch by ranges -> unroll -> simplify -> vectorize
    -> partition tails (symbolic extents) -> simplify -> fold index prefixes (symbolic shapes)."""
    from ..arith import simplify

    func = unswitch_ranges(guard_select_loads(hoist_invariant_ifs(simplify(func))))
    func = simplify(unroll_loops(func))
    func = simplify(partition_tails(vectorize_loops(func)))
    return fold_index_prefix(func)


def quick_pipeline(func: PrimFunc) -> PrimFunc:
    """What a kernel needs to run, cheaply (tier 0): one simplification round -> guard select
    loads -> unroll -> vectorize -> one round; no unswitching, hoisting or tail partitions."""
    from ..arith import simplify

    func = unroll_loops(guard_select_loads(simplify(func, passes=1)))
    return simplify(vectorize_loops(func), passes=1)


__all__ = ["LoopSite", "default_pipeline", "quick_pipeline", "fold_index_prefix", "guard_select_loads", "instrument_loops", "mark_sites",
           "partition_tails", "unroll_loops", "unswitch_ranges", "vectorize_loops"]
