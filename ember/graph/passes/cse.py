"""Common subexpression elimination.

Graph nodes are hash-consed (``ember.graph.ir``), so two equal calls built the usual way are
already one node. This pass merges the equal nodes that interning cannot: those built while it
was off, or unpickled into a process that already holds an equal node under another identity.
Equality is structural (op, attributes, operands, type; constants by value).
"""
from __future__ import annotations

from ..ir import Module
from ..visit import rewrite
from .context import PassContext, graph_pass


@graph_pass("cse", opt_level=1)
def cse(mod: Module, ctx: PassContext) -> Module:
    """Merge structurally equal subexpressions into one node."""
    first: dict = {}

    def visit(n):
        found = first.setdefault(n, n)
        return None if found is n else found
    return rewrite(mod, visit)


__all__ = ["cse"]
