"""Pack constant matrix-product weights at compile time.

The packed GEMM (``ember.kernels.matmul``) reads its right operand as panels of ``NR``
columns, ``Bp[jo, k, ji]``. When that operand is a trained model's weight -- a Gemm or a
Linear layer, exported as ``nn.dense`` or ``nn.matmul`` by a constant -- packing it on every
call reads and writes the whole matrix once more: for a transformer's 768x3072 MLP weight at
a few dozen rows that is most of the product's time. This pass rewrites such a product into
``nn.matmul_packed(a, nn.pack_matmul_weight(B, nr=NR), units=N)``; ``fold_constant`` (run
next) packs ``B`` once. Products the compute runs without packing (a few static rows: dot
products or an unpacked micro-kernel) are left alone.

With ``precision="bf16"`` (``ember.options``) a float32 product becomes a packed dot over
bfloat16 pairs: ``A`` is cast to bfloat16 (an epilogue of its producer where it fuses) and read
as int32 words, two values of a row each (a view, no kernel); ``B`` is cast, packed with its
pairs together and read as words, all at compile time; the product (``dot_bf16x2``:
``vdpbf16ps``) accumulates in float32. Twice the multiply-adds per instruction, half the bytes.

Weights quantized in blocks (``nn.matmul_nbits``) keep their codes: the codes, scales and
offsets are laid out in the same panels, and the micro-kernel decodes B as it loads it.
"""
from __future__ import annotations

from ..ir import Call, Module
from ..types import TensorType
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call
from .pack_conv_weights import _constant_valued


def _bf16_words(n: Call, a, b, trans: bool, units: int, nr: int) -> Call | None:
    """``n`` as a packed dot over bfloat16 pairs (see the module docstring); None when its
    operands are not float32 or its contraction is odd (a row would not fill its words)."""
    k = b.type.shape[1] if trans else b.type.shape[0]
    if a.type.dtype != "float32" or b.type.dtype != "float32" or k % 2:
        return None
    aw = _call("bitcast", [_call("cast", [a], {"dtype": "bfloat16"}, n.span)], {"dtype": "int32"}, n.span)
    bp = _call("nn.pack_matmul_weight", [_call("cast", [b], {"dtype": "bfloat16"}, n.span)],
               {"nr": nr, "trans": trans, "group": 2}, n.span)
    bw = _call("bitcast", [bp], {"dtype": "int32"}, n.span)
    bw = _call("reshape", [bw], {"newshape": bw.type.shape[:-1]}, n.span)
    return _call("nn.matmul_packed", [aw, bw], {"units": units, "dot": "dot_bf16x2"}, n.span)


def _packed(n: Call, target, precision: str = "fp32"):
    from ...kernels.matmul import micro_tile
    from ..ops.compute.conv import DOT_ROWS

    a, b = n.args
    if not (isinstance(a.type, TensorType) and isinstance(b.type, TensorType)) or a.type.ndim < 2:
        return None
    if b.type.ndim != 2 or not b.type.is_static or not _constant_valued(b):
        return None
    mr, nr = micro_tile(target, a.type.dtype)
    rows = a.type.shape[-2]
    few = mr if n.op == "nn.matmul" else DOT_ROWS
    # (a few rows -- a GEMV -- read each weight once: packing buys nothing in float32, but in
    # bf16 the words are half the bytes: ResNet-50's classifier 179 -> 89 us)
    few_rows = isinstance(rows, int) and rows <= few
    if few_rows and precision != "bf16":
        return None
    trans = n.op == "nn.dense"
    units = b.type.shape[0] if trans else b.type.shape[1]
    if precision == "bf16":
        out = _bf16_words(n, a, b, trans, units, micro_tile(target, "int32")[1])
        if out is not None and out.type == n.type:
            return out
    if few_rows:
        return None
    bp = _call("nn.pack_matmul_weight", [b], {"nr": nr, "trans": trans}, n.span)
    out = _call("nn.matmul_packed", [a, bp], {"units": units}, n.span)
    return out if out.type == n.type else None


def _nbits_packed(n: Call, target) -> Call | None:
    """``nn.matmul_nbits`` by constant codes as ``nn.matmul_nbits_packed``: codes, scales and
    offsets (``-zero * scale``) in the GEMM's column panels, made by folding, so that the
    micro-kernel decodes B as it reads it (``ember.kernels.weight_only``). At any row count: a
    decoding step's one row reads the codes, a quarter or an eighth of the float weights."""
    from ...kernels.matmul import micro_tile

    a, codes, scales, zeros = n.args
    if not all(_constant_valued(e) for e in (codes, scales, zeros)):
        return None
    nr = micro_tile(target, a.type.dtype)[1]
    units, span = n.attr("units"), n.span
    rows = _call("reshape", [codes], {"newshape": (units, codes.type.shape[1] * codes.type.shape[2])}, span)

    def panels(e):
        return _call("nn.pack_matmul_weight", [e], {"nr": nr, "trans": True}, span)
    offsets = _call("negative", [_call("multiply", [zeros, scales], {}, span)], {}, span)
    out = _call("nn.matmul_nbits_packed", [a, panels(rows), panels(scales), panels(offsets)], dict(n.attrs), span)
    return out if out.type == n.type else None


@graph_pass("pack_matmul_weights", opt_level=2)
def pack_matmul_weights(mod: Module, ctx: PassContext) -> Module:
    """Give every matrix product by a constant weight that weight packed in panels (see the
    module docstring)."""
    target = ctx.config.get("target")
    options = ctx.config.get("options")
    precision = getattr(options, "precision", "fp32")

    def rewrite(n):
        if isinstance(n, Call) and n.op in ("nn.dense", "nn.matmul"):
            return _packed(n, target, precision)
        if isinstance(n, Call) and n.op == "nn.matmul_nbits":
            return _nbits_packed(n, target)
        return None
    return rewrite_main(mod, rewrite)


__all__ = ["pack_matmul_weights"]
