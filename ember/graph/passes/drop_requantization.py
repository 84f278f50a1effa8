"""Codes that are quantized again as they were: the codes themselves.

A QDQ file writes a ``QuantizeLinear``/``DequantizeLinear`` pair after every op its quantizer
touched, data movement included: a transformer's key goes through reshape, transpose and
transpose again, each followed by a pair with the scale and zero point of the one before
(the quantizer gives a data-movement op its input's). Run as written, each pair is a kernel
that dequantizes, divides by the scale, rounds and clamps, and the data moves as floats.
ORT's QDQ propagation drops those pairs; here too, by two exact rules:

* ``quantize(dequantize(c, s, z), s, z) == c`` for codes ``c`` of the quantizer's type:
  ``(c - z) * s / s`` lies within an ulp of the integer ``c - z`` (of magnitude below 2^16),
  so it rounds back to it;
* with one scale and zero point for the whole tensor, quantizing commutes with data movement
  (reshape, transpose, slices, gathers, concatenations of tensors quantized alike), so
  ``quantize(move(dequantize(c)))`` is ``move(c)``: the codes move, as bytes.

What a rewrite leaves behind (the pair's dequantize, when something else reads it) the dead
code pass removes.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import Call, Module
from ..types import TensorType
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call
from .integer_products import _dequantized, _is, _value

_CODES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}
# data movement: the data is argument 0, any other argument an index
_MOVES = ("reshape", "flatten", "transpose", "squeeze", "unsqueeze", "expand", "tile", "strided_slice",
          "depth_to_space", "space_to_depth", "gather", "gather_elements", "gather_nd")


def _quantizer(n: Call):
    """``(x, scale, zero point)`` where ``n`` is ``cast(clip(round(x / s) + z), codes)`` (how
    the importer writes QuantizeLinear; the zero point 0 when absent), else None."""
    if not (_is(n, "cast") and n.type.dtype in _CODES):
        return None
    lo, hi = _CODES[n.type.dtype]
    e = n.args[0]
    if not (_is(e, "minimum") and _is(e.args[0], "maximum")):
        return None
    if not (_bound(e.args[1]) == hi and _bound(e.args[0].args[1]) == lo):
        return None
    e = e.args[0].args[0]
    z = np.zeros((), np.int64)
    if _is(e, "add"):
        zv = _value(e.args[1])
        if zv is None:
            return None
        e, z = e.args[0], zv.astype(np.int64)
    if not (_is(e, "cast") and e.type.dtype == "int32" and _is(e.args[0], "round")):
        return None
    d = e.args[0].args[0]
    if not _is(d, "divide") or not isinstance(d.type, TensorType) or d.type.dtype != "float32":
        return None
    s = _value(d.args[1])
    return None if s is None else (d.args[0], s, z)


def _bound(e) -> Optional[int]:
    v = _value(e)
    return int(v) if v is not None and v.size == 1 else None


def _codes(x, scale: np.ndarray, zero: np.ndarray, dtype: str, per_tensor: bool):
    """The codes ``c`` (of ``dtype``) where ``x`` is their dequantization by ``scale`` and
    ``zero`` (equal values; one for the whole tensor when ``per_tensor``), else None."""
    got = _dequantized(x, "float32")
    if got is None:
        return None
    c, z, s = got
    if c.type.dtype != dtype or s is None:
        return None
    sv = _value(s)
    zv = np.zeros((), np.int64) if z is None else _value(z)
    if sv is None or zv is None or sv.dtype != np.float32:
        return None
    if per_tensor and (sv.size != 1 or zv.size != 1 or scale.size != 1 or zero.size != 1):
        return None
    if sv.shape != scale.shape or zv.size != zero.size:
        return None
    zv = zv.reshape(zero.shape)
    if not (np.array_equal(sv, scale) and np.array_equal(zv.astype(np.int64), zero)):
        return None
    # (a scale the products cannot round back from: subnormal, or codes times it overflowing)
    a = np.abs(sv.astype(np.float64))
    if not np.all((a >= np.finfo(np.float32).tiny) & (a * 65536 < np.finfo(np.float32).max)):
        return None
    return c


def _moved(x, scale, zero, dtype: str, span):
    """``x`` (the quantizer's operand) rebuilt on the codes: a dequantization by the same
    scale and zero point, reached through data movement; None where it is not."""
    direct = _codes(x, scale, zero, dtype, per_tensor=False)
    if direct is not None:
        return direct
    if not isinstance(x, Call):
        return None
    if x.op in _MOVES:
        inner = _moved(x.args[0], scale, zero, dtype, span)
        if inner is None:
            return None
        return _call(x.op, [inner, *x.args[1:]], dict(x.attrs), span)
    if x.op == "concat":
        parts = [_moved(a, scale, zero, dtype, span) for a in x.args]
        if any(p is None for p in parts):
            return None
        return _call("concat", parts, dict(x.attrs), span)
    return None


def _drop(n: Call) -> Optional[Call]:
    q = _quantizer(n)
    if q is None:
        return None
    x, scale, zero = q
    dtype = n.type.dtype
    if isinstance(x, Call) and (x.op in _MOVES or x.op == "concat") and (scale.size != 1 or zero.size != 1):
        return None  # (per-axis parameters do not commute with moving the axes)
    out = _moved(x, scale, zero, dtype, n.span)
    if out is None or tuple(out.type.shape) != tuple(n.type.shape):
        return None
    return out


@graph_pass("drop_requantization", opt_level=1)
def drop_requantization(mod: Module, ctx: PassContext) -> Module:
    """Quantizers of dequantized codes with the same scale and zero point, data movement
    between them or not, become the codes (moved): see the module's notes."""
    return rewrite_main(mod, lambda n: _drop(n) if isinstance(n, Call) else None)
