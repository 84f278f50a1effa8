"""Narrow before moving: a narrowing cast after data movement is moved in front of it.

``cast(reshape(x), bfloat16)`` and ``cast(transpose(x), bfloat16)`` -- a bf16 product's input
(``pack_matmul_weights``, ``activation_products``) behind a Linear layer's flattening of its
rows or attention's merge of its heads -- are the same values as ``reshape(cast(x))`` and
``transpose(cast(x))``. In front, the cast is elementwise on ``x`` in ``x``'s shape, so it
joins ``x``'s producer as an epilogue (a layer norm, a product) instead of being a kernel of
its own over the float32 tensor; a reshape after it is a view, a transpose moves half the
bytes. ViT-B/16 in bf16 had two such casts a layer (its layer norms' outputs), and a transpose
and cast of attention's output.

Moved only through ops the chain alone reads, so nothing is computed twice, and only casts
that narrow (fewer bytes an element) -- a widening one belongs after the movement.
"""
from __future__ import annotations

from ..ir import Call, Module
from ..types import TensorType
from ..visit import use_counts
from ...loop.dtype import nbytes
from .context import PassContext, graph_pass, rewrite_main, typed_call

MOVES = frozenset({"reshape", "transpose", "squeeze", "unsqueeze", "flatten"})  # data movement, one operand


def _narrowing(n) -> bool:
    if not (isinstance(n, Call) and n.op == "cast" and isinstance(n.type, TensorType)):
        return False
    x = n.args[0].type
    return isinstance(x, TensorType) and nbytes(n.type.dtype) < nbytes(x.dtype)


@graph_pass("hoist_casts", opt_level=2)
def hoist_casts(mod: Module, ctx: PassContext) -> Module:
    """Move narrowing casts in front of the data movement they follow (see the module
    docstring)."""
    uses = use_counts(mod.main.body)

    def step(new, old, get):
        if not _narrowing(old):
            return None
        chain, x = [], old.args[0]
        while isinstance(x, Call) and x.op in MOVES and len(x.args) == 1 and uses.get(x, 0) == 1:
            chain.append(x)
            x = x.args[0]
        if not chain:
            return None
        out = typed_call("cast", [get(x)], dict(old.attrs), old.span)
        for m in reversed(chain):
            out = typed_call(m.op, [out], dict(m.attrs), m.span)
        return out if out.type == new.type else None

    return rewrite_main(mod, step, original=True)


__all__ = ["hoist_casts"]
