"""Pack constant matrix-product weights at compile time.

The packed GEMM (``ember.kernels.matmul``) reads its right operand as panels of ``NR``
columns, ``Bp[jo, k, ji]``. When that operand is a trained model's weight -- a Gemm or a
Linear layer, exported as ``nn.dense`` or ``nn.matmul`` by a constant -- packing it on every
call reads and writes the whole matrix once more: for a transformer's 768x3072 MLP weight at
a few dozen rows that is most of the product's time. This pass rewrites such a product into
``nn.matmul_packed(a, nn.pack_matmul_weight(B, nr=NR), units=N)``; ``fold_constant`` (run
next) packs ``B`` once. Products the compute runs without packing (a few static rows: dot
products or an unpacked micro-kernel) are left alone.
"""
from __future__ import annotations

from ..ir import Call, Module
from ..types import TensorType
from .context import PassContext, graph_pass, rewrite_main
from .pack_conv_weights import _constant_valued


def _packed(n: Call, target):
    from ...kernels.matmul import micro_tile
    from ..ops import infer_type
    from ..ops.compute.conv import DOT_ROWS

    a, b = n.args
    if not (isinstance(a.type, TensorType) and isinstance(b.type, TensorType)) or a.type.ndim < 2:
        return None
    if b.type.ndim != 2 or not b.type.is_static or not _constant_valued(b):
        return None
    mr, nr = micro_tile(target, a.type.dtype)
    rows = a.type.shape[-2]
    few = mr if n.op == "nn.matmul" else DOT_ROWS
    if isinstance(rows, int) and rows <= few:
        return None
    trans = n.op == "nn.dense"
    units = b.type.shape[0] if trans else b.type.shape[1]
    pattrs = {"nr": nr, "trans": trans}
    bp = Call("nn.pack_matmul_weight", [b], pattrs, infer_type("nn.pack_matmul_weight", [b.type], pattrs),
              span=n.span)
    attrs = {"units": units}
    out = Call("nn.matmul_packed", [a, bp], attrs, infer_type("nn.matmul_packed", [a.type, bp.type], attrs),
               span=n.span)
    return out if out.type == n.type else None


@graph_pass("pack_matmul_weights", opt_level=2)
def pack_matmul_weights(mod: Module, ctx: PassContext) -> Module:
    """Give every matrix product by a constant weight that weight packed in panels (see the
    module docstring)."""
    target = ctx.config.get("target")
    return rewrite_main(mod, lambda n: _packed(n, target) if isinstance(n, Call)
                        and n.op in ("nn.dense", "nn.matmul") else None)


__all__ = ["pack_matmul_weights"]
