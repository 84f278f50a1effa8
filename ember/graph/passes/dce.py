"""Dead code elimination.

A function body is a dataflow DAG reached from its result, so a value nothing reads is not in
the graph at all. What remains to remove is indirection whose result is partly unused: a
``TupleGetItem`` of a literal ``Tuple`` is that field (the other fields are dropped).
"""
from __future__ import annotations

from ..ir import Module, Tuple, TupleGetItem
from ..visit import rewrite
from .context import PassContext, graph_pass


@graph_pass("dce", opt_level=0)
def dce(mod: Module, ctx: PassContext) -> Module:
    """Drop values nothing reads (tuple fields picked out of literal tuples)."""
    def visit(n):
        if isinstance(n, TupleGetItem) and isinstance(n.tuple, Tuple):
            return n.tuple.fields[n.index]
        return None
    return rewrite(mod, visit)


__all__ = ["dce"]
