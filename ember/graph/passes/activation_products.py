"""Products of two activations (attention's) as packed dots, one operand packed at run time.

A transformer's attention multiplies activations by activations: ``Q @ K^T`` and ``P @ V``.
``pack_matmul_weights`` and ``integer_products`` leave them in float32, since neither operand
is a weight to pack at compile time. On a CPU with ``vdpbf16ps`` (AVX512-BF16) this pass runs
them as packed dots over bfloat16 pairs, twice the multiply-adds of an FMA per instruction:
the right operand is packed into the GEMM's column panels by a kernel of its own
(``nn.pack_matmul_weight`` of an activation: the head split and the key's transpose are read
there, ``K^T`` is never written), the left one read as words in place, the sums in float32.

Two cases qualify:

* ``precision="bf16"`` (``ember.options``): a float32 product, its operands rounded to
  bfloat16 as the products by weights are (OpenVINO's bf16 mode does the same).
* A quantized product (QDQ: ``(cast(qa) - za) * sa @ (cast(qb) - zb) * sb``, 8-bit codes, one
  scale and zero point a tensor), in any precision: a code minus its zero point is an integer
  of at most 255 in magnitude, which bfloat16's 8 bits hold exactly, and so is each product in
  float32: the dot of the offset codes times ``sa * sb`` is the float32 product as written,
  without its rounding of each dequantized value. Half the bytes of the float operands.

On a CPU without AVX512-BF16 but with AVX2, the quantized case runs its offset codes as int16
pairs on ``dot_i16x2`` (``pmaddwd``: twice an FMA's multiply-adds per instruction), the sums
exact in int32 and then scaled (BERT QDQ on a Zen 3: its attention products 1.6-1.7x faster,
the model's kernels 7%); float products stay float there.

An odd contraction (ViT's 197 tokens in ``P @ V``) gets one zero more at the end of the left
operand's rows (the packing of the right one fills its last pairs with zeros).

Left alone: products whose right operand is a constant (the passes above pack those), a
symbolic contraction, a symbolic column count (the packed panels are static), a few static
rows (a decoding step: packing the operand would cost more than the product), and everything
on a CPU without AVX2.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Call, Module
from ..types import TensorType
from ...loop.intrinsics import PACKED_DOTS
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call
from .integer_products import _activation, _is, _scalar
from .pack_conv_weights import _constant_valued

DOT = "dot_bf16x2"
FEATURE = "avx512bf16"
INTEGER_DOT = "dot_i16x2"  # offset codes as int16 pairs on pmaddwd, where the CPU has no bf16 dot
INTEGER_FEATURE = "avx2"


def _swapped(e) -> Optional[Call]:
    """``x`` where ``e`` is ``x`` with its last two axes swapped (a transpose, maybe behind
    reshapes of the batch axes alone), in ``e``'s batch shape; else None."""
    shape, inner = tuple(e.type.shape), e
    while _is(inner, "reshape") and tuple(inner.args[0].type.shape[-2:]) == shape[-2:]:
        inner = inner.args[0]
    if not _is(inner, "transpose") or inner.attr("axes") is None:
        return None
    axes = tuple(inner.attr("axes"))
    nd = len(axes)
    if nd < 2 or axes != tuple(range(nd - 2)) + (nd - 1, nd - 2):
        return None
    x, want = inner.args[0], shape[:-2] + (shape[-1], shape[-2])
    if tuple(x.type.shape) == want:
        return x
    if not all(isinstance(d, int) for d in want):
        return None
    return _call("reshape", [x], {"newshape": want}, e.span)


def _offset_codes(e) -> Optional[tuple]:
    """``(q - z, s)`` of ``e = (cast(q) - z) * s`` (8-bit codes ``q``, a scalar zero point and
    scale; through reshapes of the dequantized tensor): the offset codes in float32 and the
    scale; else None."""
    got = _activation(e, "float32")
    if got is None:
        return None
    q, z, s = got
    if s is None or not _scalar(s):
        return None
    return q, z, s


def _halves(q, z, span, dtype: str = "bfloat16"):
    """``cast(q) - z`` (or ``q`` itself, float32, without ``z`` and not codes) in ``dtype``
    (bfloat16, or int16 for offset codes)."""
    v = q if q.type.dtype == "float32" else _call("cast", [q], {"dtype": "float32"}, span)
    if z is not None:
        v = _call("subtract", [v, z], {}, span)
    return _call("cast", [v], {"dtype": dtype}, span)


def _pad_last(v, span):
    """``v`` with one zero appended to its last axis (an odd contraction made even: each
    row's last pair then holds a zero, against the packing's zero)."""
    nd = v.type.ndim
    width = [0] * (2 * nd)
    width[-1] = 1
    return _call("pad", [v], {"pad_width": tuple(width), "mode": "constant", "pad_value": 0.0}, span)


def _words(v, span):
    """``v`` (..., 2n) of 16-bit values read as (..., n) int32 words (a view)."""
    return _call("bitcast", [v], {"dtype": "int32"}, span)


def _packed_dot(n: Call, target, precision: str, dot: str = DOT) -> Optional[Call]:
    from ...kernels.matmul import micro_tile

    a, b = n.args
    ta, tb = a.type, b.type
    if not (isinstance(ta, TensorType) and isinstance(tb, TensorType) and isinstance(n.type, TensorType)):
        return None
    if ta.ndim < 2 or tb.ndim < 2 or n.type.dtype != "float32" or _constant_valued(b):
        return None
    k, rows, units = ta.shape[-1], ta.shape[-2], tb.shape[-1]
    mr, nr = micro_tile(target, "int32")
    if not isinstance(k, int) or not isinstance(units, int) or (isinstance(rows, int) and rows < mr):
        return None  # (a symbolic column count -- the keys of a dynamic sequence -- has no static panels)
    span = n.span
    da, db = _offset_codes(a), _offset_codes(b)
    if da is not None and db is not None:
        (qa, za, sa), (qb, zb, sb) = da, db
        scale = _call("multiply", [sa, sb], {}, span)
    elif dot == DOT and precision == "bf16" and ta.dtype == "float32" and tb.dtype == "float32":
        (qa, za), (qb, zb), scale = (a, None), (b, None), None
    else:
        return None
    # the right operand read transposed where it is a transpose (K^T: the keys as they are)
    x = _swapped(qb)
    trans = x is not None
    half = PACKED_DOTS[dot][0]
    left, right = _halves(qa, za, span, half), _halves(x if trans else qb, zb, span, half)
    if k % 2:  # (an odd contraction, ViT's 197 tokens in P @ V: the rows' words end in a zero;
        left = _pad_last(left, span)  # the packing zero-fills its last pairs itself)
    packed = _call("nn.pack_matmul_weight", [right], {"nr": nr, "trans": trans, "group": 2}, span)
    bw = _words(packed, span)
    bw = _call("reshape", [bw], {"newshape": bw.type.shape[:-1]}, span)
    out = _call("nn.matmul_packed", [_words(left, span), bw],
                {"units": units, "dot": dot, "runtime": True}, span)
    if out.type.dtype != "float32":  # (integer sums: exact, as int32)
        out = _call("cast", [out], {"dtype": "float32"}, span)
    if scale is not None:
        out = _call("multiply", [out, scale], {}, span)
    return out if out.type == n.type else None


@graph_pass("activation_products", opt_level=2)
def activation_products(mod: Module, ctx: PassContext) -> Module:
    """Run products of two activations as packed bfloat16 dots where exact (quantized codes) or
    asked for (``precision="bf16"``), or quantized ones as int16 dots without a bf16 dot; see
    the module docstring."""
    target = ctx.config.get("target")
    if target is None or not (target.has_feature(FEATURE) or target.has_feature(INTEGER_FEATURE)):
        return mod
    precision = getattr(ctx.config.get("options"), "precision", "fp32")
    # (without AVX512-BF16, quantized products alone, as int16 offset codes on pmaddwd)
    dot = DOT if target.has_feature(FEATURE) else INTEGER_DOT

    def rewrite(n):
        if isinstance(n, Call) and n.op == "nn.matmul" and len(n.args) == 2:
            return _packed_dot(n, target, precision, dot)
        return None
    return rewrite_main(mod, rewrite)


__all__ = ["activation_products"]
