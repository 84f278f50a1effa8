"""Chains of products and sums by constants composed into one of each, and a product by a
per-channel constant after a convolution folded into its weights.

Models converted from Caffe follow each batch norm with a separate scale layer: ONNX's
``BatchNormalization`` then ``Mul`` and ``Add`` by per-channel constants (the onnx package's
DenseNet-121, 121 times). With the batch norm a scale and a shift, that is
``((x * s + t) * c) + d``: four per-channel operands a kernel reads for every element, in 117
of DenseNet-121's epilogues, and a product after a convolution its weights could have taken.
Composed, ``x * (s * c) + (t * c + d)``; after a convolution ``conv(x, W * c) + (t * c + d)``.
The new constants are expressions over constants, which ``fold_constant`` computes.

The algebra holds whatever the operands' uses; a chain is composed only through values read
once (else the inner value would still be computed for its other readers, and the chain
beside it). Reassociating rounds differently in the last bit, as folding a batch norm into a
convolution does; so a dequantization (integer codes less a zero point, times a scale) is
left as ONNX computes it, which quantized models' requantization matches code for code.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from ..ir import Call, Expr
from ..types import TensorType
from ..visit import constant_depth

CONVS = ("nn.conv1d", "nn.conv2d", "nn.conv3d")
_FLOATS = ("float16", "bfloat16", "float32", "float64")

# the most elements a composed constant may have: per-channel vectors, not activations (a
# product of a per-channel and a per-position constant would be a plane per channel)
SMALL_CONSTANT = 1 << 16


def typed(op: str, args: list, attrs=None) -> Call:
    """The call ``op(*args)`` with its type inferred."""
    from ..ops import infer_type

    return Call(op, args, attrs or {}, infer_type(op, [a.type for a in args], attrs or {}))


def _constant(v, depth: int = 16) -> bool:
    """Whether ``v`` is a constant or an expression over constants only, of at most ``depth``
    levels (:func:`~ember.graph.visit.constant_depth`: kept on the nodes, so asking it at every
    product and sum of a model walks the model once)."""
    return isinstance(v, Expr) and constant_depth(v) <= depth


def _small(t) -> bool:
    return isinstance(t, TensorType) and t.is_static and math.prod(t.shape) <= SMALL_CONSTANT


def split_constant(n) -> Optional[tuple]:
    """``(x, c)`` where ``n`` is ``x * c`` or ``x + c`` (either order) over floats, ``c`` a small
    constant expression and ``x`` a value of ``n``'s own type (``c`` broadcasts into it)."""
    if not (isinstance(n, Call) and n.op in ("multiply", "add") and len(n.args) == 2
            and isinstance(n.type, TensorType) and n.type.dtype in _FLOATS):
        return None
    for x, c in (n.args, n.args[::-1]):
        if getattr(x, "type", None) == n.type and _small(getattr(c, "type", None)) \
                and getattr(c.type, "dtype", None) == n.type.dtype and _constant(c) and not _constant(x):
            return x, c
    return None


def _codes(v) -> bool:
    """Whether ``v`` is integer codes as floats, less a zero point: a dequantization's operand,
    whose product by its scale ONNX computes as it is (and requantization matches it exactly)."""
    while isinstance(v, Call) and v.op in ("subtract", "add") and len(v.args) == 2 and _constant(v.args[1]):
        v = v.args[0]
    return isinstance(v, Call) and v.op == "cast" and bool(v.args) \
        and not str(getattr(v.args[0].type, "dtype", "float")).startswith(("float", "bfloat"))


def _per_output_channel(c, conv: Call) -> Optional[int]:
    """The channel count of ``c`` (1 or the conv's output channels) where ``c`` broadcasts into
    the conv's output along its channel axis only, else None."""
    out = conv.type
    shape = (1,) * (out.ndim - c.type.ndim) + tuple(c.type.shape)
    if len(shape) != out.ndim or any(d != 1 for i, d in enumerate(shape) if i != 1):
        return None
    return shape[1] if shape[1] in (1, out.shape[1]) else None


def _reshaped(v, shape: tuple) -> Call:
    return Call("reshape", [v], {"newshape": shape}, TensorType(shape, v.type.dtype))


def _into_conv(conv: Call, c) -> Optional[Call]:
    """``conv * c`` as a convolution whose (constant) weights are scaled per output channel."""
    if not (conv.op in CONVS and len(conv.args) == 2 and _constant(conv.args[1])
            and conv.type.dtype in _FLOATS and conv.args[1].type.dtype == conv.type.dtype):
        return None
    k = _per_output_channel(c, conv)
    if k is None:
        return None
    w = conv.args[1]
    shape = (k,) + (1,) * (w.type.ndim - 1)
    vector = _reshaped(c, (k,))
    if isinstance(w, Call) and w.op == "multiply" and len(w.args) == 2:
        # weights a batch norm already scaled, W * reshape(s): W * reshape(s * c), one product
        # over the weights, of the form a batch norm's alone has (its kernel then shared)
        for big, s in (w.args, w.args[::-1]):
            if isinstance(s, Call) and s.op == "reshape" and s.type.shape == shape and s.args[0].type.shape == (k,):
                w, vector = big, typed("multiply", [s.args[0], vector])
                break
    scale = _reshaped(vector, shape)
    return typed(conv.op, [conv.args[0], typed("multiply", [w, scale])], dict(conv.attrs))


def composes(op: str, x) -> bool:
    """Whether :func:`compose` has something to push ``op``'s constant into: ``x`` a product or
    a sum by a constant, or a convolution under a product."""
    return isinstance(x, Call) and (split_constant(x) is not None or (op == "multiply" and x.op in CONVS))


def compose(op: str, x, c, single: Callable[[object], bool]) -> Call:
    """``op(x, c)`` (``op`` a product or a sum, ``c`` a small constant), with ``c`` pushed into
    ``x`` where ``x`` is read only here (``single``) and is itself a product or a sum by a
    constant, or (for a product) a convolution with constant weights."""
    if isinstance(x, Call) and single(x):
        inner = split_constant(x)
        if inner is not None and not _codes(inner[0]):
            y, k = inner
            if x.op == op:  # (y * k) * c = y * (k * c); (y + k) + c = y + (k + c)
                kc = typed(op, [k, c])
                if _small(kc.type):
                    return compose(op, y, kc, single)
            elif op == "multiply":  # (y + k) * c = y * c + k * c
                kc = typed("multiply", [k, c])
                if _small(kc.type):
                    return compose("add", compose("multiply", y, c, single), kc, single)
        elif op == "multiply":
            folded = _into_conv(x, c)
            if folded is not None:
                return folded
    return typed(op, [x, c])


__all__ = ["CONVS", "SMALL_CONSTANT", "compose", "composes", "split_constant", "typed"]
