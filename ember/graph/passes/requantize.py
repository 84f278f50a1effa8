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

A sum of such chains (a residual block's output: the conv's dequantized codes plus the
shortcut's, requantized) folds term by term: ``round(t1 * m1 + t2 * m2 + a)``, one multiply a
term, where written out it was a subtract, multiply and add a term, then the division (ResNet-50's
residual 1x1 convs, whose epilogue cost more than their products: 1.6x faster). The steps pass
through a clamp at a constant (a ReLU) where their factor is positive: ``max(x, c) * m + a`` is
``max(x * m + a, c * m + a)`` (a float conv quantized after its ReLU, as Ember's quantizer
leaves it).

A quantization whose codes only a dequantization reads, and whose dequantized values only
elementwise ops read (a quantizer's "fake quantization" inside one kernel's epilogue: ORT's QDQ
files put one after every conv that a residual add or a SiLU follows) stays in float:
``clamp(round(y), lo - z, hi - z) * s`` instead of round, convert to int32, add the zero point,
clamp, narrow to 8 bits, widen, convert back, subtract the zero point and scale. The values are
the same (integers below 2^24 are exact in float32), with four ops in place of nine and no
conversions. Codes a conv or a product reads stay codes: a quarter of the bytes, and the
integer kernels read them.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import Call, Constant, Module
from ..types import TensorType
from ..ops import get_op
from ..ops.registry import Pattern
from ..visit import readers_of, use_counts
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call
from .integer_products import _value

_STEPS = ("multiply", "divide", "add", "subtract", "nn.bias_add")


def _affine(e):
    """``(y, m, a, steps, divisions)`` with ``e == y * m + a``, walking down ``e``'s multiplies,
    divides, adds, subtracts and bias adds by constants (float64 arrays that broadcast against
    ``e``)."""
    m, a, steps, divs = np.float64(1.0), np.float64(0.0), 0, 0
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
            m, divs = m / cv, divs + 1
        elif e.op == "add":
            a = a + cv * m
        elif flipped:  # c - x
            a, m = a + cv * m, -m
        else:
            a = a - cv * m
        e, steps = x, steps + 1
    return e, m, a, steps, divs


_CLAMPS = ("nn.relu", "maximum", "minimum")


def _clamp_bound(e):
    """``(op, bound)`` where ``e`` clamps its first operand at a constant (a ReLU at 0)."""
    if e.op == "nn.relu" and len(e.args) == 1:
        return "maximum", np.float64(0.0)
    if e.op in ("maximum", "minimum") and len(e.args) == 2:
        c = _value(e.args[1])
        if c is not None and c.dtype == np.float32:
            return e.op, c.astype(np.float64)
    return None


def _scaled(e, m, a, span, depth: int = 0):
    """``(e * m + a rebuilt, arithmetic ops walked, of them divisions, arithmetic ops built)``:
    the steps by constants of :func:`_affine` folded into one multiply and one add a term,
    through a sum or difference of two computed values (a residual add of two dequantized
    tensors: each term its own factor) and through clamps at constants (a ReLU) where the
    factor is positive (``max(x, c) * m + a == max(x * m + a, c * m + a)`` for ``m > 0``)."""
    y, m2, a2, steps, divs = _affine(e)
    m, a = m2 * m, a2 * m + a
    t = y.type if isinstance(y, Call) else None
    floats = isinstance(t, TensorType) and t.dtype == "float32" and y.type == e.type
    bound = _clamp_bound(y) if floats and depth < 6 else None
    if bound is not None and np.all(m > 0):
        inner, walked, d, built = _scaled(y.args[0], m, a, span, depth + 1)
        out = _call(bound[0], [inner, _finite(bound[1] * m + a)], {}, span)
        return out, steps + walked, divs + d, built
    if (floats and depth < 6 and y.op in ("add", "subtract")
            and all(isinstance(v, Call) and isinstance(v.type, TensorType) and v.type.dtype == "float32"
                    and _value(v) is None for v in y.args)):  # (a term may broadcast: a bias, a mask)
        sign = 1.0 if y.op == "add" else -1.0
        p, wp, dp, bp = _scaled(y.args[0], m, a, span, depth + 1)
        q, wq, dq, bq = _scaled(y.args[1], sign * m, np.float64(0.0), span, depth + 1)
        return _call("add", [p, q], {}, span), steps + wp + wq, divs + dp + dq, bp + bq
    out, built = y, 0
    if np.any(m != 1):
        out, built = _call("multiply", [out, _finite(m)], {}, span), 1
    if np.any(a != 0):
        out, built = _call("add", [out, _finite(a)], {}, span), built + 1
    return out, steps, divs, built


def _requantize(n: Call) -> Optional[Call]:
    if n.op != "round" or not isinstance(n.type, TensorType) or n.type.dtype != "float32":
        return None
    try:
        with np.errstate(all="ignore"):
            out, walked, divs, built = _scaled(n.args[0], np.float64(1.0), np.float64(0.0), n.span)
    except (TypeError, ValueError):  # (constants that do not broadcast together, or overflow)
        return None
    # Fewer steps, or as many with a division gone. (Two steps or fewer: nothing to gain but
    # where one is a division. A quantizer's division alone stays: exact (the code generator's
    # reciprocal and correction step), where a multiply by the reciprocal would round some
    # values a half step the other way -- averages and sums of values on one grid land on
    # halves.)
    if not (built < walked or (built == walked >= 2 and divs)):
        return None
    out = _call("round", [out], dict(n.attrs), n.span)
    return out if out.type == n.type else None


def _finite(v) -> Constant:
    """``v`` as a float32 constant (a ValueError where a folded constant is not finite)."""
    c = np.asarray(v, np.float32)
    if not np.all(np.isfinite(c)):
        raise ValueError("a folded constant is not finite")
    return Constant(c)


_NARROW = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}


def _op(e, op: str, dtype: str) -> bool:
    return isinstance(e, Call) and e.op == op and isinstance(e.type, TensorType) and e.type.dtype == dtype


def _elementwise_readers(n: Call, readers: dict) -> bool:
    """Whether the dequantization that starts at ``n`` (a cast, then steps by constants) is
    read by elementwise ops alone: then it fuses into the kernel that quantized, and nothing
    between them is stored. Codes a conv or a product reads stay codes (a quarter the bytes,
    and the integer kernels read them)."""
    while True:
        r = readers.get(n, [])
        if len(r) == 1 and r[0].op in ("subtract", "multiply") and _value(r[0].args[1]) is not None:
            n = r[0]
            continue
        return bool(r) and all(isinstance(m, Call) and isinstance(m.type, TensorType)
                               and get_op(m.op).pattern in (Pattern.ELEMWISE, Pattern.BROADCAST) for m in r)


def _float_codes(n: Call, uses: dict, readers: dict, get) -> Optional[Call]:
    """``cast(cast(clamp(cast(round(y), int32) + z), u8), float32)`` (the codes read by nothing
    else, the dequantized values by elementwise ops) as ``clamp(round(y) + z)`` in float32, or
    None when ``n`` is not that."""
    if not _op(n, "cast", "float32"):
        return None
    narrow = n.args[0]
    if not (isinstance(narrow, Call) and narrow.op == "cast"
            and narrow.type.dtype in _NARROW and uses.get(narrow, 0) == 1 and _elementwise_readers(n, readers)):
        return None
    lo, hi = _NARROW[narrow.type.dtype]
    bounds, e = [], narrow.args[0]  # the clamps, outermost first
    while _op(e, "minimum", "int32") or _op(e, "maximum", "int32"):
        c = _value(e.args[1])
        if c is None:
            return None
        bounds.append((e.op, c.astype(np.float64)))
        e = e.args[0]
    zero = None
    if _op(e, "add", "int32"):
        zero = _value(e.args[1])
        if zero is None:
            return None
        e = e.args[0]
    if not (_op(e, "cast", "int32") and _op(e.args[0], "round", "float32")):
        return None
    # the clamps must keep the codes inside the narrow type (the cast to it would wrap otherwise)
    low, high = -np.inf, np.inf
    for op, c in bounds:
        if op == "maximum":
            low, high = np.maximum(low, c), np.maximum(high, c)
        else:
            low, high = np.minimum(low, c), np.minimum(high, c)
    if not (np.all(low >= lo) and np.all(high <= hi)):
        return None
    out = get(e.args[0])
    span = n.span
    if zero is not None:
        out = _call("add", [out, Constant(zero.astype(np.float32))], {}, span)
    for op, c in reversed(bounds):
        out = _call(op, [out, Constant(c.astype(np.float32))], {}, span)
    return out if out.type == n.type else None


def _shift_clamp(n: Call) -> Optional[Call]:
    """``clamp(r + z) - z`` as ``clamp(r)`` with the bounds moved by ``-z``, for ``r`` a
    rounding (every value an integer, so moving the bounds changes nothing)."""
    if not (_op(n, "subtract", "float32")):
        return None
    z2 = _value(n.args[1])
    e, bounds = n.args[0], []
    while _op(e, "minimum", "float32") or _op(e, "maximum", "float32"):
        c = _value(e.args[1])
        if c is None:
            return None
        bounds.append((e.op, c))
        e = e.args[0]
    if z2 is None or not bounds or not _op(e, "add", "float32") or not _op(e.args[0], "round", "float32"):
        return None
    z1 = _value(e.args[1])
    try:
        same = z1 is not None and np.array_equal(*np.broadcast_arrays(z1, z2))
    except ValueError:
        return None
    if not same or np.any(np.abs(z1) >= 2 ** 24):
        return None
    out = e.args[0]
    for op, c in reversed(bounds):
        out = _call(op, [out, Constant((c - z1).astype(np.float32))], {}, n.span)
    return out if out.type == n.type else None


@graph_pass("requantize", opt_level=2)
def requantize(mod: Module, ctx: PassContext) -> Module:
    """Fold the constant scales and offsets that a rounding quantizes into one multiply and
    one add, and compute a quantization that only a dequantization reads in float (see the
    module docstring)."""
    uses, readers = use_counts(mod.main.body), readers_of(mod.main.body)

    def step(new, old, get):
        if not isinstance(new, Call):
            return None
        return _requantize(new) or _float_codes(old, uses, readers, get) or _shift_clamp(new)

    return rewrite_main(mod, step, original=True)


__all__ = ["requantize"]
