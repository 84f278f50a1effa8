"""A GPU's products read their constant weights as (K, N).

``nn.dense`` multiplies by a weight stored (N, K). On a GPU the threads of a warp compute
neighbouring columns (N), so with that layout each reads a different row, K elements apart from
its neighbour: 32 memory transactions where one would do. For a ``cuda`` target a dense by a
constant weight becomes ``nn.matmul`` by its transpose, which constant folding makes once at
compile time; neighbouring threads then read neighbouring elements. Other targets keep the
dense (the CPU packs its weights into panels anyway).
"""
from __future__ import annotations

from ..ir import Call, Constant, Module
from .context import PassContext, graph_pass, rewrite_main, typed_call


def _rewrite(n):
    if not (isinstance(n, Call) and n.op == "nn.dense" and len(n.args) == 2 and isinstance(n.args[1], Constant)
            and n.args[1].type.ndim == 2):
        return None
    w_t = typed_call("transpose", [n.args[1]], {"axes": (1, 0)}, span=n.span)
    return typed_call("nn.matmul", [n.args[0], w_t], {}, span=n.span)


@graph_pass("gpu_weights", opt_level=1)
def gpu_weights(mod: Module, ctx: PassContext) -> Module:
    """Dense products by constant weights as products by their transpose, on a GPU (module doc)."""
    if getattr(ctx.config.get("target"), "kind", None) != "cuda":
        return mod
    return rewrite_main(mod, _rewrite)


__all__ = ["gpu_weights"]
