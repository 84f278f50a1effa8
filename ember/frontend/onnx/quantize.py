"""Converters of ONNX quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
and the integer and quantized-linear products (MatMulInteger, ConvInteger, QLinearMatMul,
QLinearConv), as compositions of Ember's elementwise ops, so they fuse with their neighbours.

A scale and zero point are per tensor (one element), per axis (1-D along ``axis``) or blocked
(``block_size`` elements along ``axis`` share one: the scale is repeated along the axis by a
gather). Arithmetic follows the ONNX reference: quantize divides in the inputs' float type,
rounds half to even, adds the zero point in int32 and saturates; dequantize subtracts in
float32 and multiplies by the scale in float32.
"""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...graph import Constant
from . import narrow
from .dtypes import narrow_of, to_ember
from .table import converter

RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
          "int32": (-2 ** 31, 2 ** 31 - 1), "int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}


def _const(v, dtype: str) -> Constant:
    return Constant(np.asarray(v, dtype=dtype))


def _spread(node, v, shape: tuple, axis: int, block: int):
    """``v`` (a scale or zero point) shaped to broadcast against a tensor of ``shape``."""
    t = v.type
    if t.ndim == 0 or (t.is_static and int(np.prod(t.shape)) == 1 and not block):
        return node.call("reshape", v, newshape=()) if t.ndim else v
    nd = len(shape)
    a = axis % nd if nd else 0
    if not block:
        if t.ndim != 1:
            raise ShapeError(f"a per-axis scale or zero point must be 1-D, got {t}")
        return node.call("reshape", v, newshape=tuple(t.shape[0] if k == a else 1 for k in range(nd)))
    n = shape[a]
    if not isinstance(n, int):
        raise UnsupportedOpError(f"blocked quantization needs a static size on axis {a}, got {n}")
    if t.ndim != nd:
        raise ShapeError(f"a blocked scale must have the input's rank {nd}, got {t}")
    return node.call("gather", v, _const(np.arange(n) // block, "int64"), axis=a)


def _float_type(*dtypes: str) -> str:
    """numpy's promotion among float dtypes (the reference divides in it)."""
    return str(np.result_type(*[np.dtype("float32" if d == "bfloat16" else d) for d in dtypes]))


def _as(node, v, kind, dtype: str):
    """``v`` as ``dtype``: decoded when it holds the bytes of the narrow type ``kind``."""
    if kind:
        return narrow.decode(node, v, kind, dtype)
    return v if v.type.dtype == dtype else node.call("cast", v, dtype=dtype)


def quantize(node, x, scale, zp, dtype: str, axis: int, block: int, precision=None, zp_kind=None,
             saturate: bool = True):
    """``saturate(round(x / scale) + zp)`` as ``dtype`` (an integer type, or a narrow type:
    then its bytes; float8 and float4 round as a cast to them does)."""
    if dtype not in RANGES and dtype not in narrow_types():
        raise UnsupportedOpError(f"quantizing to {dtype} is not supported")
    shape = x.type.shape
    s = _spread(node, scale, shape, axis, block)
    ft = precision or _float_type(x.type.dtype, scale.type.dtype)
    xf = x if x.type.dtype == ft else node.call("cast", x, dtype=ft)
    sf = s if s.type.dtype == ft else node.call("cast", s, dtype=ft)
    y = node.call("divide", xf, sf)
    if dtype not in RANGES:  # float8 (its zero point must be 0), float4 (adds its zero point)
        if zp is not None and dtype.startswith("float4"):
            y = node.call("add", node.call("cast", y, dtype="float32"),
                          _spread(node, _as(node, zp, zp_kind, "float32"), shape, axis, block))
        return narrow.encode(node, y, dtype, saturate)
    q = node.call("cast", node.call("round", y), dtype="int32")
    if zp is not None:
        z = _spread(node, _as(node, zp, zp_kind, "int32"), shape, axis, block)
        q = node.call("add", q, z)
    lo, hi = RANGES[dtype]
    if dtype != "int32":
        q = node.call("minimum", node.call("maximum", q, _const(lo, "int32")), _const(hi, "int32"))
    if dtype in narrow.INTS:  # the low bits, as the type's byte
        return narrow.encode(node, q, dtype)
    return q if dtype == "int32" else node.call("cast", q, dtype=dtype)


def narrow_types() -> tuple:
    from .dtypes import NARROW

    return tuple(NARROW.values())


def dequantize(node, x, scale, zp, out_dtype: str, axis: int, block: int, kind=None, zp_kind=None):
    """``(x - zp) * scale`` computed in float32, as ``out_dtype`` (``kind``: the narrow type
    whose bytes ``x`` holds; a float8 or float4 zero point is 0, as in the reference)."""
    shape = x.type.shape
    d = _as(node, x, kind, "float32")
    if zp is not None and not (kind or "").startswith("float"):
        d = node.call("subtract", d, _spread(node, _as(node, zp, zp_kind, "float32"), shape, axis, block))
    s = _spread(node, scale, shape, axis, block)
    y = node.call("multiply", d, s if s.type.dtype == "float32" else node.call("cast", s, dtype="float32"))
    return y if out_dtype == "float32" else node.call("cast", y, dtype=out_dtype)


def _zero_point(node, i: int):
    """Input ``i`` when present and not an empty tensor."""
    if not node.has(i):
        return None
    t = node.type(i)
    return None if t.is_static and 0 in t.shape else node.input(i)


@converter("QuantizeLinear", since=10)
def _quantize_linear(node):
    zp = _zero_point(node, 2)
    if zp is not None:
        dtype = node.narrow(2) or zp.type.dtype
    elif node.attr("output_dtype"):
        dtype = narrow_of(node.attr("output_dtype")) or to_ember(node.attr("output_dtype"), "the output dtype")
    else:
        dtype = "uint8"
    if dtype in narrow_types():
        node.set_narrow(0, dtype)
    precision = to_ember(node.attr("precision"), "the precision") if node.attr("precision") else None
    return [quantize(node, node.input(0), node.input(1), zp, dtype, node.attr("axis", 1),
                     node.attr("block_size", 0), precision, node.narrow(2), bool(node.attr("saturate", 1)))]


@converter("DequantizeLinear", since=10)
def _dequantize_linear(node):
    out = node.type(1).dtype
    if node.attr("output_dtype"):
        out = to_ember(node.attr("output_dtype"), "the output dtype")
    return [dequantize(node, node.input(0), node.input(1), _zero_point(node, 2), out, node.attr("axis", 1),
                       node.attr("block_size", 0), node.narrow(0), node.narrow(2))]


@converter("DynamicQuantizeLinear", since=11)
def _dynamic_quantize_linear(node):
    x = node.input(0)
    xf = x if x.type.dtype == "float32" else node.call("cast", x, dtype="float32")
    zero = _const(0, "float32")
    hi = node.call("maximum", node.call("max", xf, axis=None), zero)
    lo = node.call("minimum", node.call("min", xf, axis=None), zero)
    span = node.call("subtract", hi, lo)
    same = node.call("equal", hi, lo)
    scale = node.call("divide", node.call("where", same, _const(1, "float32"), span), _const(255, "float32"))
    zp0 = node.call("subtract", zero, node.call("divide", lo, scale))
    zp = node.call("round", node.call("minimum", node.call("maximum", zp0, zero), _const(255, "float32")))
    q = node.call("add", node.call("round", node.call("divide", xf, scale)), zp)
    q = node.call("minimum", node.call("maximum", q, zero), _const(255, "float32"))
    out_scale = scale if x.type.dtype == "float32" else node.call("cast", scale, dtype=x.type.dtype)
    return [node.call("cast", q, dtype="uint8"), out_scale, node.call("cast", zp, dtype="uint8")]


def _minus_zero_point(node, x, zp, axis: int):
    """``x - zp`` in int32 (a per-row or per-column zero point along ``axis``)."""
    xi = node.call("cast", x, dtype="int32")
    if zp is None:
        return xi
    t = zp.type
    if t.ndim and not (t.is_static and int(np.prod(t.shape)) == 1):
        nd = x.type.ndim
        z = node.call("reshape", zp, newshape=tuple(t.shape[0] if k == axis % nd else 1 for k in range(nd)))
    else:
        z = node.call("reshape", zp, newshape=()) if t.ndim else zp
    return node.call("subtract", xi, node.call("cast", z, dtype="int32"))


@converter("MatMulInteger", since=10)
def _matmul_integer(node):
    a, b = node.input(0), node.input(1)
    a = _minus_zero_point(node, a, _zero_point(node, 2), -2 if a.type.ndim > 1 else -1)
    b = _minus_zero_point(node, b, _zero_point(node, 3), -1)
    return [node.call("nn.matmul", a, b)]


@converter("QLinearMatMul", since=10)
def _qlinear_matmul(node):
    a = dequantize(node, node.input(0), node.input(1), _zero_point(node, 2), "float32",
                   -2 if node.type(0).ndim > 1 else -1, 0)
    b = dequantize(node, node.input(3), node.input(4), _zero_point(node, 5), "float32", -1, 0)
    y = node.call("nn.matmul", a, b)
    return [quantize(node, y, node.input(6), node.input(7), node.type(7).dtype, -1, 0)]


__all__ = ["dequantize", "quantize"]


def _int_conv(node, x, w, x_zp, w_zp, bias=None):
    """The integer convolution of ``x - x_zp`` by ``w - w_zp`` (per output channel), exact:
    computed in float64 (integer sums up to 2^53)."""
    from .nn import _spatial_name, _window_attrs

    xs = node.call("cast", _minus_zero_point(node, x, x_zp, 1), dtype="float64")
    ws = node.call("cast", _minus_zero_point(node, w, w_zp, 0), dtype="float64")
    kernel = tuple(node.attr("kernel_shape", w.type.shape[2:]))
    y = node.call(f"nn.conv{_spatial_name(len(kernel))}", xs, ws, groups=node.attr("group", 1),
                  **_window_attrs(node, x.type, kernel))
    if bias is not None:
        y = node.call("nn.bias_add", y, node.call("cast", bias, dtype="float64"), axis=1)
    return y


@converter("ConvInteger", since=10)
def _conv_integer(node):
    y = _int_conv(node, node.input(0), node.input(1), _zero_point(node, 2), _zero_point(node, 3))
    return [node.call("cast", y, dtype="int32")]


@converter("QLinearConv", since=10)
def _qlinear_conv(node):
    x, w = node.input(0), node.input(3)
    acc = _int_conv(node, x, w, _zero_point(node, 2), _zero_point(node, 5), node.input(8) if node.has(8) else None)
    ws = node.input(4)
    if ws.type.ndim == 1 and not (ws.type.is_static and ws.type.shape[0] == 1):
        ws = node.call("reshape", ws, newshape=(ws.type.shape[0],) + (1,) * (x.type.ndim - 2))
    elif ws.type.ndim:
        ws = node.call("reshape", ws, newshape=())
    # the reference: int32 sums times a float32 multiplier, in float64; zero point, clip, round
    m = node.call("divide", node.call("multiply", node.input(1), ws), node.input(6))
    r = node.call("multiply", acc, node.call("cast", m, dtype="float64"))
    zp = _zero_point(node, 7)
    dtype = zp.type.dtype if zp is not None else x.type.dtype
    if zp is not None:
        r = node.call("add", r, node.call("cast", node.call("reshape", zp, newshape=()) if zp.type.ndim else zp,
                                          dtype="float64"))
    lo, hi = RANGES[dtype]
    r = node.call("minimum", node.call("maximum", r, _const(lo, "float64")), _const(hi, "float64"))
    return [node.call("cast", node.call("round", r), dtype=dtype)]
