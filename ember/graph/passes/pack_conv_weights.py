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

A 1x1 convolution of a 1x1 image (a squeeze-excitation's reduction, of a few channels no
block divides, which the layout left plain) is a matrix product: ``dense`` of the image's
channels, whose weights ``pack_matmul_weights`` packs. Its kernel is then the products' of
every width, where each such conv -- 4, 6, 8, 10, 12 channels in EfficientNet-B0 and
RegNetY -- was a kernel of its own, at tier 0 too.
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


def _as_product(n: Call):
    """``conv2d(x, W)`` of ``x`` (N, C, 1, 1) and constant 1x1 ``W`` (F, C, 1, 1), one group, no
    padding, as ``reshape(dense(reshape(x), reshape(W)))``; None for any other conv."""
    from ..ops import infer_type

    x, w = n.args[:2]
    if n.op != "nn.conv2d" or len(n.args) != 2 or n.attr("groups", 1) != 1 or any(n.attr("padding", None) or ()):
        return None
    if not all(isinstance(t, TensorType) and t.is_static for t in (x.type, w.type, n.type)) or not _constant_valued(w):
        return None
    (N, C, H, W), (F, Cw, KH, KW) = x.type.shape, w.type.shape
    if (H, W, KH, KW) != (1, 1, 1, 1) or Cw != C or tuple(n.type.shape) != (N, F, 1, 1):
        return None

    def call(op, args, attrs):
        return Call(op, args, attrs, infer_type(op, [a.type for a in args], attrs), span=n.span)
    rows = call("reshape", [x], {"newshape": (N, C)})
    weight = call("reshape", [w], {"newshape": (F, C)})
    return call("reshape", [call("nn.dense", [rows, weight], {})], {"newshape": (N, F, 1, 1)})


@graph_pass("pack_conv_weights", opt_level=2)
def pack_conv_weights(mod: Module, ctx: PassContext) -> Module:
    """Give every convolution with constant weights weights packed for its micro-kernel (see
    the module docstring)."""
    target = ctx.config.get("target")
    return rewrite_main(mod, lambda n: (_as_product(n) or _packed(n, target)) if isinstance(n, Call) and n.op in _CONVS
                        else None)


__all__ = ["pack_conv_weights"]
