"""Elementwise ops: unary math, activations, binary arithmetic with numpy broadcasting,
comparisons, logic, bitwise ops, ``where``, ``cast`` and ``clip``.

Every op here keeps its inputs' (broadcast) shape; the rules differ only in which dtypes an op
accepts and what dtype it returns. Binary ops require one dtype for both operands (as ONNX
does): an implicit promotion would hide a frontend bug, so a mismatch is a DTypeError.
"""
from __future__ import annotations

from typing import Optional

from ...errors import DTypeError
from ...loop import dtype as dt
from ..types import TensorType
from .dims import broadcast_shapes
from .registry import Pattern, attr, register_op, same_dtype, tensor

# dtype classes an op accepts
_CLASSES = {
    "float": (dt.is_float, "a float dtype"),
    "numeric": (lambda d: not dt.is_bool(d), "a numeric dtype (not bool)"),
    "signed": (lambda d: dt.is_float(d) or (dt.is_int(d) and not dt.is_uint(d)), "a signed dtype"),
    "int": (dt.is_int, "an integer dtype"),
    "bool": (dt.is_bool, "bool"),
    "intbool": (lambda d: dt.is_int(d) or dt.is_bool(d), "an integer or bool dtype"),
    "any": (lambda d: True, "any dtype"),
}


def _check_class(t: TensorType, cls: str, what: str) -> None:
    ok, text = _CLASSES[cls]
    if not ok(t.dtype):
        raise DTypeError(f"{what} must have {text}, got {t.dtype}")


def _unary_rule(cls: str, out: Optional[str] = None):
    def infer(args, attrs):
        t = tensor(args[0])
        _check_class(t, cls, "the input")
        return TensorType(t.shape, out or t.dtype)

    return infer


def unary(name: str, cls: str = "float", out: Optional[str] = None, schema=None, doc: str = "") -> None:
    """Register a unary elementwise op on dtype class ``cls`` returning the input's dtype (or ``out``)."""
    register_op(name, infer=_unary_rule(cls, out), pattern=Pattern.ELEMWISE, attrs_schema=schema, doc=doc)


def broadcast_type(args, cls: str, out: Optional[str] = None, what: str = "operands") -> TensorType:
    """The broadcast result type of tensor ``args`` of one dtype in class ``cls``."""
    ts = [tensor(a, f"operand {i}") for i, a in enumerate(args)]
    dtype = same_dtype(ts, what)
    _check_class(ts[0], cls, what)
    return TensorType(broadcast_shapes(*(t.shape for t in ts)), out or dtype)


def _binary_rule(cls: str, out: Optional[str] = None):
    return lambda args, attrs: broadcast_type(args, cls, out)


def binary(name: str, cls: str = "numeric", out: Optional[str] = None, schema=None, doc: str = "") -> None:
    """Register a broadcasting binary op."""
    register_op(name, infer=_binary_rule(cls, out), pattern=Pattern.BROADCAST, attrs_schema=schema,
                num_args=2, doc=doc)


# -- unary math ---------------------------------------------------------------------------------

for _name in ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
              "cosh", "asinh", "acosh", "atanh", "erf", "sigmoid", "tanh", "floor", "ceil", "round",
              "reciprocal"):
    unary(_name, "float")
for _name in ("abs", "sign"):
    unary(_name, "numeric")
unary("negative", "signed", doc="-x")
unary("logical_not", "bool")
unary("bitwise_not", "int")
unary("isnan", "float", out="bool")
unary("isinf", "float", out="bool",
      schema={"detect_positive": attr("bool", True), "detect_negative": attr("bool", True)})
unary("copy", "any", doc="identity (a materialized copy; frontends drop Identity instead)")

# -- activations --------------------------------------------------------------------------------

unary("nn.relu", "numeric")
unary("nn.leaky_relu", "float", schema={"alpha": attr("float", 0.01)})
unary("nn.elu", "float", schema={"alpha": attr("float", 1.0)})
unary("nn.celu", "float", schema={"alpha": attr("float", 1.0)})
unary("nn.selu", "float", schema={"alpha": attr("float", 1.67326319217681884765625),
                                  "gamma": attr("float", 1.05070102214813232421875)})
unary("nn.thresholded_relu", "float", schema={"alpha": attr("float", 1.0)})
unary("nn.hard_sigmoid", "float", schema={"alpha": attr("float", 0.2), "beta": attr("float", 0.5)})
unary("nn.hard_swish", "float")
unary("nn.softplus", "float")
unary("nn.softsign", "float")
unary("nn.mish", "float")
unary("nn.gelu", "float", schema={"approximate": attr("str", "none")},
      doc="x * Phi(x); approximate='tanh' uses the tanh formula")
unary("nn.shrink", "numeric", schema={"bias": attr("float", 0.0), "lambd": attr("float", 0.5)})
unary("clip", "numeric", schema={"a_min": attr("float", None), "a_max": attr("float", None)},
      doc="min(max(x, a_min), a_max) with constant bounds; None means unbounded")

# -- binary -------------------------------------------------------------------------------------

for _name in ("add", "subtract", "multiply", "maximum", "minimum"):
    binary(_name, "numeric")
binary("divide", "numeric", doc="x / y; integer division truncates toward zero (C, ONNX)")
binary("mod", "numeric", schema={"fmod": attr("bool", False)},
       doc="remainder with the divisor's sign (Python), or the dividend's when fmod=True (C fmod)")
for _name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    binary(_name, "any", out="bool")
for _name in ("logical_and", "logical_or", "logical_xor"):
    binary(_name, "bool")
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    binary(_name, "intbool")
for _name in ("left_shift", "right_shift"):
    binary(_name, "int")


def _infer_power(args, attrs):
    # ONNX Pow lets the exponent have its own dtype; the result has the base's
    base, expo = tensor(args[0], "the base"), tensor(args[1], "the exponent")
    _check_class(base, "numeric", "the base")
    _check_class(expo, "numeric", "the exponent")
    return TensorType(broadcast_shapes(base.shape, expo.shape), base.dtype)


register_op("power", infer=_infer_power, pattern=Pattern.BROADCAST, num_args=2)


def _infer_prelu(args, attrs):
    x, slope = tensor(args[0]), tensor(args[1], "the slope")
    same_dtype([x, slope])
    _check_class(x, "numeric", "the input")
    return TensorType(broadcast_shapes(x.shape, slope.shape), x.dtype)


register_op("nn.prelu", infer=_infer_prelu, pattern=Pattern.BROADCAST, num_args=2,
            doc="x if x >= 0 else slope * x; slope broadcasts against x")


def _infer_where(args, attrs):
    c, x, y = (tensor(a, w) for a, w in zip(args, ("the condition", "x", "y")))
    if not dt.is_bool(c.dtype):
        raise DTypeError(f"the condition must be bool, got {c.dtype}")
    dtype = same_dtype([x, y], "x and y")
    return TensorType(broadcast_shapes(c.shape, x.shape, y.shape), dtype)


register_op("where", infer=_infer_where, pattern=Pattern.BROADCAST, num_args=3,
            doc="where(cond, x, y): x where cond else y, all three broadcast")


def _infer_cast(args, attrs):
    return TensorType(tensor(args[0]).shape, attrs["dtype"])


register_op("cast", infer=_infer_cast, pattern=Pattern.ELEMWISE, attrs_schema={"dtype": attr("dtype")},
            doc="convert to dtype (float -> int truncates; -> bool is x != 0)")
