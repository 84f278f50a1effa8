"""Computes of the elementwise family: unary math, activations, broadcasting binary ops,
comparisons, logic, ``where``, ``cast`` and ``clip`` (numpy semantics).

Every op is one stage ``out[i] = f(in0[bcast(i)], in1[bcast(i)], ...)``: inputs index the
output's index right-aligned, size-1 dims fixed at 0 (:func:`broadcast_index`), so the stage
is injective and ``schedule_elementwise`` applies.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ....kernels.elementwise import broadcast_index
from ....loop import compute as te
from ....loop import dtype as dt
from ....loop import intrinsics as intr
from ....loop.expr import Expr, cast, const, eq, max_, min_, ne, select, truncdiv, truncmod
from .common import register_compute, stage_name, te_shape


def elementwise(name: str, fn: Callable, inputs, out_type) -> te.Tensor:
    """The stage ``out[i] = fn(*(t[broadcast(i)] for t in inputs))`` of ``out_type``'s shape."""
    def body(*i):
        return fn(*(t[broadcast_index(t, i)] for t in inputs))

    return te.compute(te_shape(out_type), body, stage_name(name))


def _c(value, like: Expr) -> Expr:
    """The Python number ``value`` as a constant of ``like``'s dtype (ints truncate)."""
    d = dt.element(like.dtype)
    if dt.is_float(d):
        return const(float(value), d)
    if dt.is_bool(d):
        return const(bool(value), d)
    return const(int(value), d)


# op name -> fn(attrs, *scalar_exprs) -> Expr: what one element of it computes (a loop program
# written directly applies them too: an RNN's activations, :mod:`.recurrent`)
SCALAR: dict = {}


def register(name: str, fn: Callable) -> None:
    """Register ``fn(attrs, *scalar_exprs) -> Expr`` as ``name``'s elementwise compute."""
    SCALAR[name] = fn

    def compute_fn(attrs, inputs, out_type):
        return elementwise(name, lambda *xs: fn(attrs, *xs), inputs, out_type)

    register_compute(name, compute_fn)


# -- unary math ---------------------------------------------------------------------------------

for _name in ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
              "cosh", "asinh", "acosh", "atanh", "erf", "sigmoid", "tanh", "floor", "ceil", "round",
              "reciprocal", "abs", "isnan"):
    register(_name, (lambda f: lambda a, x: f(x))(getattr(intr, _name)))


def _sign(a, x):
    return select(x > _c(0, x), _c(1, x), select(x < _c(0, x), _c(-1, x), _c(0, x)))


def _isinf(a, x):
    inf = intr.isinf(x)
    if a["detect_positive"] and a["detect_negative"]:
        return inf
    if a["detect_positive"]:
        return inf & (x > _c(0, x))
    if a["detect_negative"]:
        return inf & (x < _c(0, x))
    return inf & ~inf  # always false, but still reads x (a kernel argument must be used)


register("sign", _sign)
register("negative", lambda a, x: -x)
register("logical_not", lambda a, x: ~x)
register("bitwise_not", lambda a, x: ~x)
register("isinf", _isinf)
register("copy", lambda a, x: x)

# -- activations --------------------------------------------------------------------------------


def _neg_part_elu(x, alpha):
    return _c(alpha, x) * intr.expm1(x)


def _softplus(x):
    # log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))
    return max_(x, _c(0, x)) + intr.log1p(intr.exp(-intr.abs(x)))


def _gelu(a, x):
    if a["approximate"] == "tanh":
        inner = _c(math.sqrt(2.0 / math.pi), x) * (x + _c(0.044715, x) * x * x * x)
        return _c(0.5, x) * x * (_c(1, x) + intr.tanh(inner))
    return _c(0.5, x) * x * (_c(1, x) + intr.erf(x * _c(1 / math.sqrt(2.0), x)))


def _int_bound(value, dtype: str, upper: bool):
    """An integer tensor's clip bound: the nearest int inside it, None when nothing is cut off."""
    info = np.iinfo(dt.numpy_dtype(dtype))
    v = math.floor(value) if upper else math.ceil(value)
    if (upper and v >= info.max) or (not upper and v <= info.min):
        return None
    return min(max(v, int(info.min)), int(info.max))


def _clip(a, x):
    lo, hi = a["a_min"], a["a_max"]
    if dt.is_int(x.dtype):
        lo = None if lo is None else _int_bound(lo, dt.element(x.dtype), False)
        hi = None if hi is None else _int_bound(hi, dt.element(x.dtype), True)
    if lo is not None:
        x = max_(x, _c(lo, x))
    if hi is not None:
        x = min_(x, _c(hi, x))
    return x


def _shrink(a, x):
    lambd, bias = a["lambd"], a["bias"]
    return select(x < _c(-lambd, x), x + _c(bias, x),
                  select(x > _c(lambd, x), x - _c(bias, x), _c(0, x)))


register("nn.relu", lambda a, x: max_(x, _c(0, x)))
register("nn.leaky_relu", lambda a, x: select(x >= _c(0, x), x, x * _c(a["alpha"], x)))
register("nn.elu", lambda a, x: select(x > _c(0, x), x, _neg_part_elu(x, a["alpha"])))
register("nn.celu", lambda a, x: max_(x, _c(0, x))
         + min_(_c(0, x), _neg_part_elu(x * _c(1.0 / a["alpha"], x), a["alpha"])))
register("nn.selu", lambda a, x: _c(a["gamma"], x) * select(x > _c(0, x), x, _neg_part_elu(x, a["alpha"])))
register("nn.thresholded_relu", lambda a, x: select(x > _c(a["alpha"], x), x, _c(0, x)))
register("nn.hard_sigmoid", lambda a, x: max_(_c(0, x), min_(_c(1, x), x * _c(a["alpha"], x) + _c(a["beta"], x))))
register("nn.hard_swish", lambda a, x: x * max_(_c(0, x), min_(_c(1, x), x * _c(1 / 6, x) + _c(0.5, x))))
register("nn.softplus", lambda a, x: _softplus(x))
register("nn.softsign", lambda a, x: x / (_c(1, x) + intr.abs(x)))
register("nn.mish", lambda a, x: x * intr.tanh(_softplus(x)))
register("nn.gelu", _gelu)
register("nn.shrink", _shrink)
register("clip", _clip)

# -- binary -------------------------------------------------------------------------------------


def _divide(a, x, y):
    return x / y if dt.is_float(x.dtype) else truncdiv(x, y)


def _mod(a, x, y):
    return truncmod(x, y) if a["fmod"] else x % y


def _power(a, x, y):
    if dt.is_float(x.dtype):
        return intr.pow(x, cast(x.dtype, y))
    # integer base: compute in float64 (exact for the magnitudes an int result can hold)
    return cast(x.dtype, intr.pow(cast("float64", x), cast("float64", y)))


register("add", lambda a, x, y: x + y)
register("subtract", lambda a, x, y: x - y)
register("multiply", lambda a, x, y: x * y)
register("divide", _divide)
register("maximum", lambda a, x, y: max_(x, y))
register("minimum", lambda a, x, y: min_(x, y))
register("mod", _mod)
register("power", _power)
register("equal", lambda a, x, y: eq(x, y))
register("not_equal", lambda a, x, y: ne(x, y))
register("less", lambda a, x, y: x < y)
register("less_equal", lambda a, x, y: x <= y)
register("greater", lambda a, x, y: x > y)
register("greater_equal", lambda a, x, y: x >= y)
register("logical_and", lambda a, x, y: x & y)
register("logical_or", lambda a, x, y: x | y)
register("logical_xor", lambda a, x, y: ne(x, y))
register("bitwise_and", lambda a, x, y: x & y)
register("bitwise_or", lambda a, x, y: x | y)
register("bitwise_xor", lambda a, x, y: x ^ y)
register("left_shift", lambda a, x, y: x << y)
register("right_shift", lambda a, x, y: x >> y)
register("nn.prelu", lambda a, x, s: select(x >= _c(0, x), x, x * s))
register("where", lambda a, c, x, y: select(c, x, y))


def _cast(attrs, inputs, out_type):
    to = out_type.dtype

    def fn(x):
        if dt.is_bool(to) and not dt.is_bool(x.dtype):
            return ne(x, _c(0, x))
        return cast(to, x)

    return elementwise("cast", fn, inputs, out_type)


register_compute("cast", _cast)
