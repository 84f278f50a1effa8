"""Requantization as one multiply-add.

A quantized model writes each layer's requantization as the ops of its ``DequantizeLinear``
and ``QuantizeLinear``, one by one: the integer sums times the activation's scale, times the
weights' (per channel), plus the bias, divided by the output's scale, rounded:
``round((acc * sa * sw + b) / so)``. Done as written, an int8 kernel's epilogue spends more
instructions on that than its window spends on the products (MobileNetV2's depthwise convs:
nine FMAs an output vector). The int8 kernels of ONNX Runtime and oneDNN fold the scales into
one factor, ``sa * sw / so``, and the bias into ``b / so``; here too: the ``round`` of a chain
of multiplies, divides, adds and subtracts by constants becomes one multiply and one add, the
constants combined in float64. The result is the same but where the value lies within a few
ulps of a half, where the rounding may go either way (as between ORT's optimized and
unoptimized sessions). A quantizer's division alone stays exact: a multiply by the reciprocal
moved one code of Ember's quantized BERT (its difference from ORT 2e-6 -> 5e-3, where ORT's
own sessions differ by 3e-6).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import Call, Constant, Module
from ..types import TensorType
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call
from .integer_products import _value

_STEPS = ("multiply", "divide", "add", "subtract", "nn.bias_add")


def _affine(e):
    """``(y, m, a, steps)`` with ``e == y * m + a``, walking down ``e``'s multiplies, divides,
    adds, subtracts and bias adds by constants (float64 arrays that broadcast against ``e``)."""
    m, a, steps = np.float64(1.0), np.float64(0.0), 0
    while isinstance(e, Call) and e.op in _STEPS and isinstance(e.type, TensorType) and e.type.dtype == "float32":
        if e.op == "nn.bias_add":  # (a bias along an axis: an add of it shaped to broadcast there)
            bv, nd = _value(e.args[1]), e.type.ndim
            axis = e.attr("axis", 1) % nd
            if bv is None or bv.dtype != np.float32 or bv.ndim != 1:
                break
            a = a + bv.astype(np.float64).reshape((-1,) + (1,) * (nd - 1 - axis)) * m
            e, steps = e.args[0], steps + 1
            continue
        x, c = e.args
        cv = _value(c)
        flipped = False
        if cv is None and e.op in ("multiply", "add", "subtract"):
            x, c, cv, flipped = c, x, _value(x), True
        if cv is None or cv.dtype != np.float32 or (e.op == "divide" and np.any(cv == 0)):
            break
        cv = cv.astype(np.float64)
        if e.op == "multiply":
            m = m * cv
        elif e.op == "divide":
            m = m / cv
        elif e.op == "add":
            a = a + cv * m
        elif flipped:  # c - x
            a, m = a + cv * m, -m
        else:
            a = a - cv * m
        e, steps = x, steps + 1
    return e, m, a, steps


def _requantize(n: Call) -> Optional[Call]:
    if n.op != "round" or not isinstance(n.type, TensorType) or n.type.dtype != "float32":
        return None
    y, m, a, steps = _affine(n.args[0])
    # (two steps or fewer: nothing to gain but where one is a division. A quantizer's division
    # alone stays: exact (the code generator's reciprocal and correction step), where a
    # multiply by the reciprocal would round some values a half step the other way --
    # averages and sums of values on one grid land on halves)
    if steps < 2 or (steps == 2 and not (isinstance(n.args[0], Call) and n.args[0].op == "divide")):
        return None
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(a))):
        return None
    span = n.span
    out = _call("multiply", [y, Constant(np.asarray(m, np.float32))], {}, span)
    if np.any(a != 0):
        out = _call("add", [out, Constant(np.asarray(a, np.float32))], {}, span)
    out = _call("round", [out], dict(n.attrs), span)
    return out if out.type == n.type else None


@graph_pass("requantize", opt_level=2)
def requantize(mod: Module, ctx: PassContext) -> Module:
    """Fold the constant scales and offsets that a rounding quantizes into one multiply and
    one add (see the module docstring)."""
    return rewrite_main(mod, lambda n: _requantize(n) if isinstance(n, Call) else None)


__all__ = ["requantize"]
