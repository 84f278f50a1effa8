"""Pack constant convolution weights at compile time.

The convolution micro-kernel reads its weights as ``Wp[fo, rc, rk..., fi]``: the ``FB``
output channels of a register block adjacent (``ember.kernels.conv``). When the weights are
an input, the kernel packs them on every call; when they are constants -- a trained model's
-- that copy is pure overhead (up to half of a late ResNet layer, whose weights outweigh its
activations). This pass rewrites ``conv(x, W)`` with constant-valued ``W`` into
``conv(x, nn.pack_conv_weight(W, block=FB), weight_block=FB, channels=F)``; ``fold_constant``
(run next) computes the packed array once, and the kernel reads it as is.

``FB`` is the register block the kernel would choose for this convolution on the target
(``kernels.conv.conv_blocks``). Depthwise convolutions (``FB == 1``) and transposed ones are
left alone: their packing is the identity or needs the flip.
"""
from __future__ import annotations

from ..ir import Call, Module, Var
from ..types import TensorType
from ..visit import post_order
from .context import PassContext, graph_pass, rewrite_main

_CONVS = ("nn.conv1d", "nn.conv2d", "nn.conv3d")


def _constant_valued(e) -> bool:
    """True when ``e`` reads no variable: fold_constant will compute it."""
    return not any(isinstance(n, Var) for n in post_order(e))


def _packed(n: Call, target):
    from ...kernels.conv import conv_blocks
    from ..ops import infer_type

    x, w = n.args
    if n.attr("weight_block", 0) or not (isinstance(w.type, TensorType) and w.type.is_static):
        return None
    if not isinstance(n.type, TensorType) or not _constant_valued(w):
        return None
    F, Cg = w.type.shape[0], w.type.shape[1]
    fb, _ = conv_blocks(F, Cg, n.type.shape[-1], w.type.dtype, target, n.attr("groups", 1))
    if fb <= 1:
        return None
    attrs = {"block": fb}
    pw = Call("nn.pack_conv_weight", [w], attrs, infer_type("nn.pack_conv_weight", [w.type], attrs), span=n.span)
    cattrs = {**n.attrs, "weight_block": fb, "channels": F}
    return Call(n.op, [x, pw], cattrs, infer_type(n.op, [x.type, pw.type], cattrs), span=n.span)


@graph_pass("pack_conv_weights", opt_level=2)
def pack_conv_weights(mod: Module, ctx: PassContext) -> Module:
    """Give every convolution with constant weights weights packed for its micro-kernel (see
    the module docstring)."""
    target = ctx.config.get("target")
    return rewrite_main(mod, lambda n: _packed(n, target) if isinstance(n, Call) and n.op in _CONVS else None)


__all__ = ["pack_conv_weights"]
