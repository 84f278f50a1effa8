"""Quantized matrix products on integer kernels.

A quantized model says what it computes in float ops: ONNX's ``DequantizeLinear`` is
``(q - zp) * scale``, so a QDQ product (ORT's ``quantize_static``) imports as
``matmul((cast(a_q) - za) * sa, (cast(w_q) - zw) * sw)``, and ``MatMulInteger``
(``quantize_dynamic``) as ``matmul(cast(a_q, int32) - za, cast(w_q, int32))``. Done as written,
the product runs in float32 (or int32) at float speed. But with ``w`` symmetric (``zw = 0``,
ORT's default for int8 weights) it is

    sum_k (a_q - za) w_q = sum_k a_q w_q - za * colsum(w_q)

and ``sum_k a_q w_q`` is a product of uint8 by int8 with exact int32 sums: ``vpdpbusd``, four
products per lane per instruction (``ember.loop.intrinsics.PACKED_DOTS``: ``dot_u8i8x4``).
This pass rewrites such a product, per row of the result, into

    (cast(nn.matmul_packed(words(a_q), words(pack(w_q))), float32) - za * colsum) * (sa * sw)

(the integer one without the float step): ``a_q`` read as int32 words of four values along K
(a view; int8 activations are moved to uint8 by +128, and their zero point with them), the
weights packed at compile time with each lane's four values in one word, ``colsum`` and
``sa * sw`` (per tensor or per output column) constants or scalars of the run, all of it an
epilogue of the product. The quantizing of ``a`` that feeds it (``QuantizeLinear``: divide,
round, clip, cast) fuses into its producer, so between layers only the uint8 bytes are
written: the QDQ pair is gone.

A QDQ conv (groups 1, constant activation zero point) becomes ``nn.conv2d_integer``, exact
sums of ``(a_q - za) * w_q`` (its padding at the zero point), times the scales; the blocked
layout (``block_layout``) runs it as packed dots over four channels. A QDQ grouped (depthwise)
conv keeps float sums, exact ones of the codes by the integer weights, over uint8 data
(:func:`_integer_grouped`); a max pool of dequantized values pools the codes (:func:`_pooled_codes`).

On a CPU without VNNI (AVX512-VNNI or AVX-VNNI) the dot is AVX2's ``pmaddubsw`` pair
(``dot_u8i7x4``), whose int16 pair sums saturate, for weights none of whose pairs can reach
past int16 (:func:`integer_dot`; 7-bit weights, ORT's ``reduce_range``, always), and for the
others ``pmaddwd``, exact (``dot_i16x2``): a product's rows widened to int16 by their
producer, a conv's words by the conv's copy of its input (``block_layout``).
``saturating_int8=True`` (``CompileOptions``) runs those too on ``pmaddubsw``, saturating as
ORT's MLAS and oneDNN do on such CPUs (QDQ ResNets 1.3-1.4x faster; ORT's outputs, not the
spec's, where a pair sum passes int16).

Left alone (float or int32 as before): weights that are not constant 2-D int8 with a zero
zero point, per-channel activation scales, a contraction not a multiple of four, and every
product on a CPU with neither VNNI nor AVX2, where the portable sequence is no faster than float32.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...loop.intrinsics import PACKED_DOTS
from ..ir import Call, Constant, Module
from ..types import TensorType
from ..visit import use_counts
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call

DOT = "dot_u8i8x4"
GROUP = 4


def _is(e, op: str) -> bool:
    return isinstance(e, Call) and e.op == op


_ARITH = {"multiply": np.multiply, "add": np.add, "subtract": np.subtract}


def _value(e) -> Optional[np.ndarray]:
    """The value of ``e`` when it is a constant, or a reshape or cast of one (how the importer
    spreads a scale or a zero point), or a float product, sum or difference of such values
    (weights a later pass scaled per channel: EfficientNet's depthwise convs, by the folded
    batch norm, after the constants were folded); else None."""
    if isinstance(e, Constant):
        return e.value
    if isinstance(e, Call) and e.op in ("reshape", "cast") and len(e.args) == 1:
        v = _value(e.args[0])
        if v is None:
            return None
        from ...loop import dtype as dt

        return v.reshape(e.type.shape) if e.op == "reshape" else v.astype(dt.numpy_dtype(e.type.dtype))
    if isinstance(e, Call) and e.op in _ARITH and len(e.args) == 2 and isinstance(e.type, TensorType) \
            and e.type.dtype == "float32" and e.type.is_static and int(np.prod(e.type.shape, dtype=np.int64)) <= 1 << 22:
        a, b = (_value(x) for x in e.args)
        if a is None or b is None:
            return None
        return _ARITH[e.op](np.asarray(a, np.float32), np.asarray(b, np.float32)).reshape(e.type.shape)
    return None


def _scalar(e) -> bool:
    t = e.type
    return isinstance(t, TensorType) and t.is_static and int(np.prod(t.shape, dtype=np.int64)) == 1


def _dequantized(e, dtype: str):
    """``(q, zero point or None, scale or None)`` where ``e`` is ``(cast(q) - z) * s`` (or
    without the zero point or, for ``dtype`` int32, without the scale), ``q`` uint8/int8 and
    the cast to ``dtype``; else None."""
    scales = [(e, None)]
    if dtype == "float32":
        if not _is(e, "multiply"):
            return None
        scales = [(e.args[0], e.args[1]), (e.args[1], e.args[0])]
    for d, s in scales:
        c, z = (d.args[0], d.args[1]) if _is(d, "subtract") else (d, None)
        if _is(c, "cast") and c.type.dtype == dtype and c.args[0].type.dtype in ("uint8", "int8"):
            return c.args[0], z, s
    return None


def _activation(e, dtype: str):
    """:func:`_dequantized` of the activation ``e``, looking through reshapes (an exporter's
    flattening of the batch into rows): with one zero point and scale for the whole tensor, a
    reshape of the dequantized values is the dequantized reshape of ``q``."""
    shape = e.type.shape if isinstance(e.type, TensorType) else None
    while _is(e, "reshape") and _dequantized(e, dtype) is None:
        e = e.args[0]
    got = _dequantized(e, dtype)
    if got is None or shape is None:
        return None
    q, z, s = got
    if (z is not None and not _scalar(z)) or (s is not None and not _scalar(s)):
        return None  # (per-row activation scales: not a quantizer's)
    if tuple(q.type.shape) != tuple(shape):
        q = _call("reshape", [q], {"newshape": tuple(shape)}, e.span)
    return q, z, s


def _weights(q, z, s, trans: bool, units: int):
    """The constant int8 weights ``q`` ((K, N), or (N, K) with ``trans``) with a zero point of
    zeros, and their scale as a per-column vector of ``units`` (or a scalar): ``(w_q (K, N),
    scale or None)``; None when they do not qualify."""
    w = _value(q)
    if w is None or w.dtype != np.int8 or w.ndim != 2:
        return None
    if z is not None:
        zv = _value(z)
        if zv is None or np.any(zv != 0):
            return None
    if s is None:
        return (w.T if trans else w), None
    sv = _value(s)
    if sv is None:
        return None
    sv = np.asarray(sv, np.float32)
    if sv.size == 1:
        return (w.T if trans else w), sv.reshape(())
    # per output column: along N, the axis of the weight that is not contracted
    if sv.shape not in (((units, 1) if trans else (1, units)), (units,)):
        return None
    return (w.T if trans else w), sv.reshape(units)


def _as_uint8(a_q, z, dtype: str, span):
    """``a_q`` as uint8 and its zero point to match (``dtype``): int8 moved up by 128."""
    if a_q.type.dtype == "uint8":
        return a_q, z
    shifted = _call("add", [_call("cast", [a_q], {"dtype": "int32"}, span), Constant(np.array(128, np.int32))], {},
                    span)
    a_u8 = _call("cast", [shifted], {"dtype": "uint8"}, span)
    c128 = Constant(np.array(128, np.dtype(dtype)))
    return a_u8, (c128 if z is None else _call("add", [z, c128], {}, span))


def _integer(n: Call, target, saturating: bool = False) -> Optional[Call]:
    from ...kernels.matmul import micro_tile

    a, b = n.args
    dtype = n.type.dtype if isinstance(n.type, TensorType) else None
    if dtype not in ("float32", "int32") or not isinstance(b.type, TensorType) or b.type.ndim != 2 \
            or not isinstance(a.type, TensorType) or a.type.ndim < 2:
        return None
    da, db = _activation(a, dtype), _dequantized(b, dtype)
    if da is None or db is None:
        return None
    a_q, za, sa = da
    trans = n.op == "nn.dense"
    units = b.type.shape[0] if trans else b.type.shape[1]
    got = _weights(db[0], db[1], db[2], trans, units)
    if got is None:
        return None
    w, sw = got
    k = w.shape[0]
    dot = integer_dot(target, w, axis=0, saturating=saturating)
    g = PACKED_DOTS[dot][2] if dot else GROUP
    if k % g or a.type.shape[-1] != k or dot is None:
        return None
    span = n.span
    a_u8, za = _as_uint8(a_q, za, dtype, span)
    nr = micro_tile(target, "int32")[1]
    aw = _call("bitcast", [widened(a_u8, dot, span)], {"dtype": "int32"}, span)
    packed = _call("nn.pack_matmul_weight", [Constant(np.ascontiguousarray(w.astype(PACKED_DOTS[dot][1])))],
                   {"nr": nr, "trans": False, "group": g}, span)
    bw = _call("bitcast", [packed], {"dtype": "int32"}, span)
    bw = _call("reshape", [bw], {"newshape": bw.type.shape[:-1]}, span)
    acc = _call("nn.matmul_packed", [aw, bw], {"units": units, "dot": dot}, span)
    colsum = w.astype(np.int64).sum(axis=0)
    if dtype == "int32":
        out = acc
        if za is not None:
            z = za if za.type.ndim == 0 else _call("reshape", [za], {"newshape": ()}, span)
            out = _call("subtract", [acc, _call("multiply", [z, Constant(colsum.astype(np.int32))], {}, span)], {},
                        span)
        return out if out.type == n.type else None
    out = _call("cast", [acc], {"dtype": "float32"}, span)
    if za is not None:
        z = za if za.type.ndim == 0 else _call("reshape", [za], {"newshape": ()}, span)
        out = _call("subtract", [out, _call("multiply", [z, Constant(colsum.astype(np.float32))], {}, span)], {}, span)
    scale = Constant(np.asarray(1.0 if sw is None else sw, np.float32))
    if sa is not None:
        s = sa if sa.type.ndim == 0 else _call("reshape", [sa], {"newshape": ()}, span)
        scale = _call("multiply", [s, scale], {}, span)
    out = _call("multiply", [out, scale], {}, span)
    return out if out.type == n.type else None


def widened(codes, dot: str, span):
    """The uint8 ``codes`` as ``dot`` reads them: int16 for ``dot_i16x2`` (a cast its producer's
    epilogue takes), else as they are."""
    elem = PACKED_DOTS[dot][0]
    return codes if elem == codes.type.dtype else _call("cast", [codes], {"dtype": elem}, span)


def integer_dot(target, weights: np.ndarray = None, axis: int = 0, saturating: bool = False) -> Optional[str]:
    """The packed dot the integer kernels run on ``target``, for int8 ``weights`` whose words
    group four consecutive values along ``axis``: ``dot_u8i8x4`` with VNNI (``vpdpbusd``);
    without it, on AVX2 (or AVX-512BW), ``dot_u8i7x4`` (``pmaddubsw``, whose int16 pair sums
    saturate) where no pair of the weights can reach past int16 with uint8 data -- 7-bit weights
    (ORT's ``reduce_range``) always, full-range ones seldom -- or where ``saturating``
    (``CompileOptions.saturating_int8``: as ORT's MLAS and oneDNN run such weights there), and
    for the others, exact, ``pmaddwd``, ``dot_i16x2``: the data widened to int16 (a GEMM's rows
    by their producer, a conv's words by its copy of its input) and the weights when packed.
    None on a CPU with neither: the float path, which the portable sequence does not beat."""
    from ...kernels.common import host

    t = host(target)
    features = getattr(t, "feature_set", set())
    if {"avx512vnni", "avxvnni"} & features:
        return DOT
    if not {"avx2", "avx512bw"} & features:
        return None
    if weights is None or saturating:
        return "dot_u8i7x4"
    w = np.moveaxis(weights.astype(np.int32), axis, 0)
    if w.shape[0] % 2:
        w = np.concatenate([w, np.zeros_like(w[:1])])
    first, second = w[0::2], w[1::2]
    pos = np.maximum(first, 0) + np.maximum(second, 0)
    neg = np.minimum(first, 0) + np.minimum(second, 0)
    if pos.max(initial=0) <= 128 and neg.min(initial=0) >= -128:
        return "dot_u8i7x4"
    return "dot_i16x2"


def _qdq_conv(n: Call):
    """The operands of a QDQ ``nn.conv2d`` (constant per-tensor activation zero point and
    scale, constant int8 weights per tensor or per output channel with zero zero points):
    ``(codes as uint8, their zero point (int), the activation's scale, the weights' codes,
    their scales (F,))``; None otherwise. int8 codes are moved to uint8, their zero point
    with them."""
    a, b = n.args
    if n.type.dtype != "float32" or not isinstance(b.type, TensorType) or b.type.ndim != 4 \
            or not b.type.is_static or a.type.ndim != 4:
        return None
    da, db = _dequantized(a, "float32"), _dequantized(b, "float32")
    if da is None or db is None:
        return None
    a_q, za, sa = da
    if (za is not None and not _scalar(za)) or not _scalar(sa):
        return None
    w, sv = _value(db[0]), _value(db[2])
    F = b.type.shape[0]
    if w is None or w.dtype != np.int8 or sv is None or (db[1] is not None and np.any(_value(db[1]) != 0)):
        return None
    sv = np.asarray(sv, np.float32)
    zv = np.zeros((), np.float32) if za is None else _value(za)
    # (a zero point known only at run time: the padding needs its value)
    if sv.size not in (1, F) or zv is None or np.asarray(zv).size != 1:
        return None
    zero = int(np.asarray(zv).reshape(()))
    if a_q.type.dtype == "int8":
        a_q, _ = _as_uint8(a_q, None, "float32", n.span)
        zero += 128
    return a_q, zero, sa, w, np.broadcast_to(sv.reshape(-1), (F,))


def _scaled(acc, sa, sv, n: Call):
    """``acc * sa * sv`` per output channel, or None where it is not of ``n``'s type."""
    scale = Constant(sv.reshape(-1, 1, 1).astype(np.float32))
    out = _call("multiply", [_call("multiply", [acc, sa], {}, n.span), scale], {}, n.span)
    return out if out.type == n.type else None


def _integer_conv(n: Call, target) -> Optional[Call]:
    """A QDQ ``nn.conv2d`` (:func:`_qdq_conv`; groups 1, channels a multiple of four, or
    fewer: a stem's three, read as four) as ``nn.conv2d_integer`` times the scales; None
    otherwise."""
    got = _qdq_conv(n) if n.attr("groups", 1) == 1 else None
    if got is None:
        return None
    a_q, zero, sa, w, sv = got
    F, C, kh, kw = w.shape
    # a stem's few channels (three) are read as four, its uint8 input blocked by a kernel of its
    # own (~60 us for 224x224): paid back by a wide window of many filters (ResNet's 64 of 7x7:
    # 509 -> 242 us), not by MobileNetV2's 32 of 3x3
    if (C % GROUP and (C > GROUP or F * kh * kw < 1024)) or integer_dot(target, w, axis=1) is None:
        return None
    attrs = {k: n.attr(k, None) for k in ("strides", "padding", "dilation")}
    acc = _call("nn.conv2d_integer", [a_q, Constant(np.ascontiguousarray(w))], {**attrs, "zero": zero}, n.span)
    return _scaled(_call("cast", [acc], {"dtype": "float32"}, n.span), sa, sv, n)


def _integer_grouped(n: Call) -> Optional[Call]:
    """A QDQ grouped conv (:func:`_qdq_conv`; a depthwise one: MobileNet's, EfficientNet's)
    as the float conv of the codes less their zero point by the integer-valued weights, times
    the scales: ``conv(cast(a_q) - za, w_q) * (sa * sw)``. Its sums are the exact integer ones
    (below 2^24: 514 taps of 255 x 128), as ORT's integer kernel computes them; the blocked
    layout then reads the uint8 codes themselves, widening them as a task pads its rows
    (``block_layout``), so the layers around it store bytes, not floats. None otherwise."""
    got = _qdq_conv(n) if n.attr("groups", 1) != 1 else None
    if got is None:
        return None
    a_q, zero, sa, w, sv = got
    data = _call("cast", [a_q], {"dtype": "float32"}, n.span)
    if zero:
        data = _call("subtract", [data, Constant(np.array(zero, np.float32))], {}, n.span)
    conv = _call("nn.conv2d", [data, Constant(np.ascontiguousarray(w.astype(np.float32)))], dict(n.attrs), n.span)
    return _scaled(conv, sa, sv, n)


def _pooled_codes(n: Call) -> Optional[Call]:
    """A max pool of dequantized values, ``(cast(q) - z) * s`` with ``s`` a positive constant
    per tensor, is the dequantized max pool of the codes (a monotone map commutes with max):
    the pool reads the bytes (ResNet's stem writes them, not floats), and the quantizer after
    it, at the same scale (ORT's QDQ), rounds the codes back to themselves."""
    got = _dequantized(n.args[0], "float32")
    if got is None or n.type.dtype != "float32":
        return None
    q, z, s = got
    sv = None if s is None else _value(s)
    if sv is None or sv.size != 1 or not float(np.asarray(sv).reshape(())) > 0 or (z is not None and not _scalar(z)):
        return None
    span = n.span
    out = _call("cast", [_call(n.op, [q], dict(n.attrs), span)], {"dtype": "float32"}, span)
    if z is not None:
        out = _call("subtract", [out, z], {}, span)
    out = _call("multiply", [out, s], {}, span)
    return out if out.type == n.type else None


_MONOTONE = ("divide", "multiply", "add", "subtract", "round", "maximum", "minimum", "cast")


def _quantized_pool(n: Call, uses: dict, get) -> Optional[Call]:
    """The 8-bit quantizer ``n`` of a max pool (the pool's result read by it alone) as the pool
    of the quantized input: every step of a quantizer is monotone (a division or product by a
    positive constant, an offset, the rounding, the clamps, the casts), and a monotone map
    commutes with max. The pool then reads bytes, and the kernel before it writes them (ResNet's
    stem, quantized after its pool by Ember's quantizer: the pool 6x faster)."""
    if not (n.op == "cast" and n.type.dtype in ("uint8", "int8")):
        return None
    steps, e = [], n
    while isinstance(e, Call) and e.op in _MONOTONE and isinstance(e.type, TensorType):
        if e.op in ("divide", "multiply", "add", "subtract", "maximum", "minimum"):
            c = _value(e.args[1])
            if c is None or c.size != 1 or (e.op in ("divide", "multiply") and not float(c.reshape(())) > 0):
                return None
        steps.append(e)
        e = e.args[0]
        if isinstance(e, Call) and e.op in ("nn.max_pool1d", "nn.max_pool2d", "nn.max_pool3d") and len(e.args) == 1:
            break
    else:
        return None
    if not (isinstance(e, Call) and e.op.startswith("nn.max_pool") and uses.get(e, 0) == 1 and steps
            and all(uses.get(m, 0) == 1 for m in steps[1:])):
        return None
    out = get(e.args[0])
    for m in reversed(steps):
        out = _call(m.op, [out, *(get(a) for a in m.args[1:])], dict(m.attrs), m.span)
    out = _call(e.op, [out], dict(e.attrs), e.span)
    return out if out.type == n.type else None


@graph_pass("integer_products", opt_level=2)
def integer_products(mod: Module, ctx: PassContext) -> Module:
    """Run quantized matrix products by constant int8 weights on uint8 x int8 kernels (see the
    module docstring)."""
    target = ctx.config.get("target")
    if integer_dot(target) is None:  # (the portable sequence is no faster than float32)
        return mod
    saturating = getattr(ctx.config.get("options"), "saturating_int8", False)

    uses = use_counts(mod.main.body)

    def visit(n, old, get):
        if isinstance(n, Call) and n.op in ("nn.max_pool1d", "nn.max_pool2d", "nn.max_pool3d") and len(n.args) == 1:
            return _pooled_codes(n)
        if isinstance(n, Call) and n.op == "cast" and n.type.dtype in ("uint8", "int8"):
            return _quantized_pool(old, uses, get)
        if not isinstance(n, Call) or len(n.args) != 2:
            return None
        if n.op in ("nn.dense", "nn.matmul"):
            return _integer(n, target, saturating)
        if n.op == "nn.conv2d":
            return _integer_conv(n, target) if n.attr("groups", 1) == 1 else _integer_grouped(n)
        return None
    return rewrite_main(mod, visit, original=True)


__all__ = ["integer_products"]
