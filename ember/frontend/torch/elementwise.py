"""Converters of ATen elementwise ops: unary math, activations, arithmetic with torch's type
promotion (Python numbers and sizes as scalars), comparisons, logic, ``where``, clamps, casts
and the identities an exported program keeps (clone, alias, copies)."""
from __future__ import annotations

import math

from ...errors import UnsupportedOpError
from ...graph import Expr
from ...loop import dtype as dt
from .table import converter

_FLOAT_UNARY = {
    "acos": "acos", "acosh": "acosh", "asin": "asin", "asinh": "asinh", "atan": "atan", "atanh": "atanh",
    "cos": "cos", "cosh": "cosh", "erf": "erf", "exp": "exp", "log": "log", "reciprocal": "reciprocal",
    "rsqrt": "rsqrt", "sigmoid": "sigmoid", "sin": "sin", "sinh": "sinh", "sqrt": "sqrt", "tan": "tan",
    "tanh": "tanh",
}
_SAME_UNARY = {"abs": "abs", "neg": "negative", "sign": "sign", "relu": "nn.relu"}
_ROUNDING = {"floor": "floor", "ceil": "ceil", "round": "round"}


def _input_as_out(node, key=0) -> Expr:
    """Argument ``key`` in the result's dtype (torch computes float math of ints in float)."""
    return node.as_tensor(node.arg(key), node.out_dtype())


def _unary(op):
    return lambda node: node.call(op, _input_as_out(node))


for _aten, _op in _FLOAT_UNARY.items():
    converter(f"aten.{_aten}.default")(_unary(_op))
for _aten, _op in _SAME_UNARY.items():
    converter(f"aten.{_aten}.default")(_unary(_op))


def _rounding(op):
    def convert(node):
        x = node.tensor(0)
        return x if not dt.is_float(x.type.dtype) else node.call(op, x)  # (an integer is its own floor)
    return convert


for _aten, _op in _ROUNDING.items():
    converter(f"aten.{_aten}.default")(_rounding(_op))


@converter("aten.round.decimals")
def _round_decimals(node):
    x, k = node.tensor(0), node.arg("decimals", 0)
    if not k:
        return node.call("round", x)
    scale = node.scalar(10.0 ** k, x.type.dtype)
    return node.call("divide", node.call("round", node.call("multiply", x, scale)), scale)


@converter("aten.trunc.default")
def _trunc(node):
    x = node.tensor(0)
    if not dt.is_float(x.type.dtype):
        return x
    return node.call("multiply", node.call("sign", x), node.call("floor", node.call("abs", x)))


def _log_base(base):
    def convert(node):
        x = _input_as_out(node)
        return node.call("divide", node.call("log", x), node.scalar(math.log(base), x.type.dtype))
    return convert


converter("aten.log2.default")(_log_base(2.0))
converter("aten.log10.default")(_log_base(10.0))


@converter("aten.log1p.default")
def _log1p(node):
    x = _input_as_out(node)
    return node.call("log", node.call("add", x, node.scalar(1, x.type.dtype)))


@converter("aten.expm1.default")
def _expm1(node):
    x = _input_as_out(node)
    return node.call("subtract", node.call("exp", x), node.scalar(1, x.type.dtype))


@converter("aten.isnan.default")
def _isnan(node):
    x = node.tensor(0)
    if not dt.is_float(x.type.dtype):
        return node.call("not_equal", x, x)  # never true: an integer is a number
    return node.call("isnan", x)


@converter("aten.isinf.default")
def _isinf(node):
    x = node.tensor(0)
    if not dt.is_float(x.type.dtype):
        return node.call("not_equal", x, x)
    return node.call("isinf", x)


@converter("aten.logical_not.default")
def _logical_not(node):
    return node.call("logical_not", _as_bool(node, node.tensor(0)))


def _as_bool(node, x: Expr) -> Expr:
    return x if x.type.dtype == "bool" else node.call("not_equal", x, node.scalar(0, x.type.dtype))


# -- activations ------------------------------------------------------------------------------------

@converter("aten.gelu.default")
def _gelu(node):
    return node.call("nn.gelu", node.tensor(0), approximate=node.arg("approximate", "none"))


@converter("aten.hardtanh.default")
def _hardtanh(node):
    return node.call("clip", node.tensor(0), a_min=float(node.arg("min_val", -1.0)),
                     a_max=float(node.arg("max_val", 1.0)))


@converter("aten.leaky_relu.default")
def _leaky_relu(node):
    return node.call("nn.leaky_relu", node.tensor(0), alpha=float(node.arg("negative_slope", 0.01)))


@converter("aten.elu.default")
def _elu(node):
    x = node.tensor(0)
    alpha, scale, in_scale = (float(node.arg(k, 1)) for k in ("alpha", "scale", "input_scale"))
    if scale == 1.0 and in_scale == 1.0:
        return node.call("nn.elu", x, alpha=alpha)
    # scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))
    d = x.type.dtype
    e = node.call("exp", node.call("multiply", x, node.scalar(in_scale, d)))
    neg = node.call("multiply", node.scalar(alpha, d), node.call("subtract", e, node.scalar(1, d)))
    y = node.call("where", node.call("greater", x, node.scalar(0, d)), x, neg)
    return node.call("multiply", y, node.scalar(scale, d))


@converter("aten.silu.default")
def _silu(node):
    x = node.tensor(0)
    return node.call("multiply", x, node.call("sigmoid", x))


@converter("aten.hardswish.default")
def _hardswish(node):
    return node.call("nn.hard_swish", node.tensor(0))


@converter("aten.hardsigmoid.default")
def _hardsigmoid(node):
    return node.call("nn.hard_sigmoid", node.tensor(0), alpha=1 / 6, beta=0.5)


@converter("aten.mish.default")
def _mish(node):
    return node.call("nn.mish", node.tensor(0))


@converter("aten.softplus.default")
def _softplus(node):
    x = node.tensor(0)
    beta, threshold = float(node.arg("beta", 1.0)), float(node.arg("threshold", 20.0))
    d = x.type.dtype
    bx = x if beta == 1.0 else node.call("multiply", x, node.scalar(beta, d))
    soft = node.call("nn.softplus", bx)
    if beta != 1.0:
        soft = node.call("divide", soft, node.scalar(beta, d))
    # torch: linear above the threshold (beta * x > threshold)
    return node.call("where", node.call("greater", bx, node.scalar(threshold, d)), x, soft)


# -- arithmetic ---------------------------------------------------------------------------------

def _operands(node, compute: str = None):
    a, b = node.arg(0), node.arg(1)
    dtype = compute or node.promote(a, b)
    return node.as_tensor(a, dtype), node.as_tensor(b, dtype), dtype


def _arith(op, alpha: bool = False):
    def convert(node):
        a, b, dtype = _operands(node)
        k = node.arg("alpha", 1) if alpha else 1
        if k != 1:
            b = node.call("multiply", b, node.scalar(k, dtype))
        return node.call(op, a, b)
    return convert


for _aten, _op, _alpha in (("add", "add", True), ("sub", "subtract", True), ("mul", "multiply", False),
                           ("maximum", "maximum", False), ("minimum", "minimum", False)):
    for _ov in (("Tensor", "Scalar") if _aten in ("add", "sub", "mul") else ("default",)):
        converter(f"aten.{_aten}.{_ov}")(_arith(_op, _alpha))


@converter("aten.rsub.Scalar", "aten.rsub.Tensor")
def _rsub(node):
    a, b, dtype = _operands(node)
    k = node.arg("alpha", 1)
    if k != 1:
        a = node.call("multiply", a, node.scalar(k, dtype))
    return node.call("subtract", b, a)


def _div(node):
    dtype = node.promote(node.arg(0), node.arg(1))
    mode = node.arg("rounding_mode", None)
    if mode is None and not dt.is_float(dtype):
        dtype = node.out_dtype()  # true division of integers is float
    a, b, dtype = _operands(node, dtype)
    if mode is None or mode == "trunc" and not dt.is_float(dtype):
        return node.call("divide", a, b)  # (integer division truncates)
    if mode == "trunc":
        q = node.call("divide", a, b)
        return node.call("multiply", node.call("sign", q), node.call("floor", node.call("abs", q)))
    if mode == "floor":
        if dt.is_float(dtype):
            return node.call("floor", node.call("divide", a, b))
        # exact for integers: (a - a mod b) / b with the divisor's sign (Python's %)
        return node.call("divide", node.call("subtract", a, node.call("mod", a, b)), b)
    raise UnsupportedOpError(f"rounding_mode {mode!r} is not supported (None, 'trunc', 'floor' are)")


for _ov in ("Tensor", "Scalar", "Tensor_mode", "Scalar_mode"):
    converter(f"aten.div.{_ov}")(_div)


def _mod(fmod: bool):
    def convert(node):
        a, b, _ = _operands(node)
        return node.call("mod", a, b, fmod=fmod)
    return convert


for _ov in ("Tensor", "Scalar"):
    converter(f"aten.fmod.{_ov}")(_mod(True))
    converter(f"aten.remainder.{_ov}")(_mod(False))


def _pow(node):
    base, expo = node.arg(0), node.arg(1)
    dtype = node.out_dtype()
    x = node.as_tensor(base, dtype)
    if isinstance(expo, (int, float)) and not isinstance(expo, bool):
        if expo == 2:
            return node.call("multiply", x, x)  # exact and cheap
        if expo == 1:
            return x
        if expo == 0.5 and dt.is_float(dtype):
            return node.call("sqrt", x)
        if expo == -1 and dt.is_float(dtype):
            return node.call("reciprocal", x)
    return node.call("power", x, node.as_tensor(expo, dtype))


for _ov in ("Tensor_Scalar", "Tensor_Tensor", "Scalar"):
    converter(f"aten.pow.{_ov}")(_pow)


@converter("aten.atan2.default")
def _atan2(node):
    y, x, d = _operands(node)
    if not dt.is_float(d):
        d = node.out_dtype()
        y, x = node.as_tensor(y, d), node.as_tensor(x, d)
    # atan(y/x), moved into the right quadrant: +-pi where x < 0, +-pi/2 where x == 0
    zero, pi = node.scalar(0, d), node.scalar(math.pi, d)
    base = node.call("atan", node.call("divide", y, x))
    neg_x = node.call("less", x, zero)
    shift = node.call("where", node.call("less", y, zero), node.call("negative", pi), pi)
    out = node.call("where", neg_x, node.call("add", base, shift), base)
    half = node.call("multiply", node.call("sign", y), node.scalar(math.pi / 2, d))
    return node.call("where", node.call("equal", x, zero), half, out)


# -- comparisons and logic ------------------------------------------------------------------------

_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
            "ge": "greater_equal"}


def _compare(op):
    def convert(node):
        a, b, _ = _operands(node)
        return node.call(op, a, b)
    return convert


for _aten, _op in _COMPARE.items():
    for _ov in ("Tensor", "Scalar"):
        converter(f"aten.{_aten}.{_ov}")(_compare(_op))


def _logical(op):
    def convert(node):
        a, b = (_as_bool(node, node.as_tensor(v, node.promote(v))) for v in (node.arg(0), node.arg(1)))
        return node.call(op, a, b)
    return convert


for _aten in ("and", "or", "xor"):
    converter(f"aten.logical_{_aten}.default")(_logical(f"logical_{_aten}"))


def _bitwise(op):
    def convert(node):
        a, b, dtype = _operands(node)
        if dtype == "bool":  # (on bools, the logical op)
            return node.call(f"logical_{op}", a, b)
        return node.call(f"bitwise_{op}", a, b)
    return convert


for _aten in ("and", "or", "xor"):
    for _ov in ("Tensor", "Scalar"):
        converter(f"aten.bitwise_{_aten}.{_ov}")(_bitwise(_aten))


@converter("aten.bitwise_not.default")
def _bitwise_not(node):
    x = node.tensor(0)
    return node.call("logical_not" if x.type.dtype == "bool" else "bitwise_not", x)


@converter("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def _where(node):
    cond = node.tensor(0)
    a, b = node.arg(1), node.arg(2)
    dtype = node.out_dtype()
    return node.call("where", _as_bool(node, cond), node.as_tensor(a, dtype), node.as_tensor(b, dtype))


# -- clamps ---------------------------------------------------------------------------------------

@converter("aten.clamp.default")
def _clamp(node):
    x = _input_as_out(node)
    lo, hi = node.arg("min", None), node.arg("max", None)
    bounds = {k: float(v) for k, v in (("a_min", lo), ("a_max", hi)) if v is not None}
    return node.call("clip", x, **bounds) if bounds else x


@converter("aten.clamp.Tensor", "aten.clamp_min.default", "aten.clamp_max.default")
def _clamp_tensor(node):
    dtype = node.out_dtype()
    out = node.as_tensor(node.arg(0), dtype)
    if node.target == "aten.clamp_min.default":
        bounds = (("maximum", node.arg(1)),)
    elif node.target == "aten.clamp_max.default":
        bounds = (("minimum", node.arg(1)),)
    else:
        bounds = (("maximum", node.arg("min", None)), ("minimum", node.arg("max", None)))
    for op, v in bounds:
        if v is not None:
            out = node.call(op, out, node.as_tensor(v, dtype))
    return out


# -- casts and identities -------------------------------------------------------------------------

@converter("aten._to_copy.default", "aten.to.dtype", "aten.type_as.default")
def _to_copy(node):
    x = node.tensor(0)
    dtype = node.out_dtype()
    return x if x.type.dtype == dtype else node.call("cast", x, dtype=dtype)


def _check_dropout(fx_node):
    args = list(fx_node.args) + [None] * 3
    train = fx_node.kwargs.get("train", args[2])
    return "dropout in training mode (train=True): call model.eval()" if train else None


converter("aten.dropout.default", check=_check_dropout)(lambda node: node.tensor(0))


@converter("aten.clone.default", "aten.alias.default", "aten.lift_fresh_copy.default", "aten.detach.default",
           "aten.contiguous.default")
def _identity(node):
    return node.tensor(0)  # (values are immutable: a copy is the value itself)


@converter("aten.copy.default")
def _copy(node):
    dst, src = node.tensor(0), node.tensor(1)
    out = node.as_tensor(src, dst.type.dtype)
    if out.type.shape != dst.type.shape:
        out = node.call("expand", out, shape=dst.type.shape)
    return out


@converter("aten.fill.Scalar", "aten.fill.Tensor")
def _fill(node):
    x = node.tensor(0)
    v = node.as_tensor(node.arg(1), x.type.dtype)
    return node.call("expand", v, shape=x.type.shape) if v.type.shape != x.type.shape else v
