"""Converters of ONNX elementwise ops: unary math, activations, binary and variadic arithmetic,
comparisons, logic, Where, Clip, Cast, Identity and Dropout (inference)."""
from __future__ import annotations

from ...errors import ShapeError, UnsupportedOpError
from ...loop import dtype as dt
from . import narrow
from .dtypes import is_supported, narrow_of, onnx_type_name, to_ember
from .table import converter

_UNARY = {
    "Abs": "abs", "Acos": "acos", "Acosh": "acosh", "Asin": "asin", "Asinh": "asinh", "Atan": "atan",
    "Atanh": "atanh", "Ceil": "ceil", "Cos": "cos", "Cosh": "cosh", "Erf": "erf", "Exp": "exp",
    "Floor": "floor", "IsNaN": "isnan", "Log": "log", "Neg": "negative", "Not": "logical_not",
    "Reciprocal": "reciprocal", "Round": "round", "Sigmoid": "sigmoid", "Sign": "sign", "Sin": "sin",
    "Sinh": "sinh", "Sqrt": "sqrt", "Tan": "tan", "Tanh": "tanh", "Relu": "nn.relu",
    "Softplus": "nn.softplus", "Softsign": "nn.softsign", "HardSwish": "nn.hard_swish", "Mish": "nn.mish",
    "BitwiseNot": "bitwise_not",
}

# ONNX attribute -> (Ember attribute, ONNX default)
_UNARY_ATTRS = {
    "Elu": ("nn.elu", {"alpha": ("alpha", 1.0)}),
    "Celu": ("nn.celu", {"alpha": ("alpha", 1.0)}),
    "Selu": ("nn.selu", {"alpha": ("alpha", 1.67326319217681884765625), "gamma": ("gamma", 1.05070102214813232421875)}),
    "LeakyRelu": ("nn.leaky_relu", {"alpha": ("alpha", 0.01)}),
    "ThresholdedRelu": ("nn.thresholded_relu", {"alpha": ("alpha", 1.0)}),
    "HardSigmoid": ("nn.hard_sigmoid", {"alpha": ("alpha", 0.2), "beta": ("beta", 0.5)}),
    "Shrink": ("nn.shrink", {"bias": ("bias", 0.0), "lambd": ("lambd", 0.5)}),
    "Gelu": ("nn.gelu", {"approximate": ("approximate", "none")}),
    "IsInf": ("isinf", {"detect_positive": ("detect_positive", 1), "detect_negative": ("detect_negative", 1)}),
}

_BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power",
    "Equal": "equal", "Greater": "greater", "GreaterOrEqual": "greater_equal", "Less": "less",
    "LessOrEqual": "less_equal", "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor",
    "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor", "PRelu": "nn.prelu",
}


def _unary(op):
    return lambda node: [node.call(op, node.input(0))]


for _onnx, _ember in _UNARY.items():
    converter(_onnx)(_unary(_ember))


def _unary_attrs(op, spec):
    def convert(node):
        attrs = {}
        for onnx_name, (name, default) in spec.items():
            v = node.attr(onnx_name, default)
            attrs[name] = bool(v) if name.startswith("detect_") else v
        return [node.call(op, node.input(0), **attrs)]
    return convert


for _onnx, (_ember, _spec) in _UNARY_ATTRS.items():
    converter(_onnx)(_unary_attrs(_ember, _spec))


def _binary(op):
    return lambda node: [node.call(op, node.input(0), node.input(1))]


for _onnx, _ember in _BINARY.items():
    converter(_onnx)(_binary(_ember))


@converter("Mod")
def _mod(node):
    return [node.call("mod", node.input(0), node.input(1), fmod=bool(node.attr("fmod", 0)))]


@converter("BitShift")
def _bitshift(node):
    op = "left_shift" if node.attr("direction") == "LEFT" else "right_shift"
    return [node.call(op, node.input(0), node.input(1))]


@converter("Where")
def _where(node):
    return [node.call("where", node.input(0), node.input(1), node.input(2))]


def _chain(op):
    def convert(node):
        args = [node.input(i) for i in range(len(node.inputs))]
        out = args[0]
        for a in args[1:]:
            out = node.call(op, out, a)
        return [out]
    return convert


converter("Sum")(_chain("add"))
converter("Max")(_chain("maximum"))
converter("Min")(_chain("minimum"))


@converter("Mean")
def _mean(node):
    total = _chain("add")(node)[0]
    if len(node.inputs) == 1:
        return [total]
    return [node.call("divide", total, node.const_like(len(node.inputs), total.type.dtype))]


@converter("Swish")
def _swish(node):
    x = node.input(0)
    alpha = node.attr("alpha", 1.0)
    scaled = x if alpha == 1.0 else node.call("multiply", x, node.const_like(alpha, x.type.dtype))
    return [node.call("multiply", x, node.call("sigmoid", scaled))]


# -- clip -------------------------------------------------------------------------------------------

@converter("Clip")
def _clip_attrs(node):
    bounds = {k: node.attr(a) for k, a in (("a_min", "min"), ("a_max", "max")) if a in node.attrs}
    return [node.call("clip", node.input(0), **bounds)]


@converter("Clip", since=11)
def _clip(node):
    x = node.input(0)
    known, dynamic = {}, {}  # bound name -> Python number / graph expression
    for i, name in ((1, "a_min"), (2, "a_max")):
        if not node.has(i):
            continue
        v = node.value(i)
        if v is not None and v.dtype != object:
            known[name] = v.reshape(-1)[0].item()
        else:
            dynamic[name] = node.input(i)
    if not dynamic:  # constant (or absent) bounds: one clip op
        return [node.call("clip", x, **known)]
    out = x  # some bound known only at run time: ONNX's min(max(x, lo), hi) as two ops
    for name, op in (("a_min", "maximum"), ("a_max", "minimum")):
        if name in dynamic:
            out = node.call(op, out, dynamic[name])
        elif name in known:
            out = node.call(op, out, node.const_like(known[name], x.type.dtype))
    return [out]


# -- cast, identity, dropout ----------------------------------------------------------------------

def _check_cast(attrs, opset, proto):
    to = attrs.get("to")
    return None if is_supported(to) else f"cast to {onnx_type_name(to)} is not supported"


def cast_to(node, x, src_narrow, dtype: str, dst_narrow, saturate: bool = True, round_mode: str = "up"):
    """``x`` cast to ``dtype`` (an Ember dtype), either side maybe a narrow type (then ``x`` or
    the result is its bytes, and ``*_narrow`` names it)."""
    if src_narrow == dst_narrow and (src_narrow or x.type.dtype == dtype):
        return x
    if dst_narrow is None:
        return narrow.decode(node, x, src_narrow, dtype) if src_narrow else node.call("cast", x, dtype=dtype)
    if src_narrow:
        x = narrow.decode(node, x, src_narrow, "float32")
    return narrow.encode(node, x, dst_narrow, saturate, round_mode)


@converter("BitCast", since=26)
def _bitcast(node):
    """The input's bits read as ``to`` (the same width): a view of its bytes, no kernel. (Narrow
    types -- float8, int4 -- are not supported: Ember keeps their bytes, not their bits.)"""
    to = node.attr("to")
    if narrow_of(to):  # (a narrow input is refused before any converter runs)
        raise UnsupportedOpError("BitCast to or from a narrow type (float8, int4, ...) is not supported")
    dtype = to_ember(to, "the bitcast's target")
    src = node.input(0).type.dtype
    if dt.nbytes(src) != dt.nbytes(dtype):  # (ONNX's BitCast keeps the width; Ember's may regroup)
        raise ShapeError(f"BitCast from {src} to {dtype}: the types differ in width (ONNX reinterprets same-width types only)")
    return [node.call("bitcast", node.input(0), dtype=dtype)]


@converter("Cast", check=_check_cast)
def _cast(node):
    to = node.attr("to")
    dst = narrow_of(to)
    dtype = "uint8" if dst else to_ember(to, "the cast's target")
    if dst:
        node.set_narrow(0, dst)
    return [cast_to(node, node.input(0), node.narrow(0), dtype, dst, bool(node.attr("saturate", 1)),
                    node.attr("round_mode", "up"))]


@converter("CastLike")
def _cast_like(node):
    dst = node.narrow(1)
    if dst:
        node.set_narrow(0, dst)
    return [cast_to(node, node.input(0), node.narrow(0), node.type(1).dtype, dst, bool(node.attr("saturate", 1)),
                    node.attr("round_mode", "up"))]


@converter("Identity")
def _identity(node):
    return [node.input(0)]


def _check_dropout(attrs, opset, proto):
    if opset < 7 and not attrs.get("is_test", 0):
        return "training-mode Dropout is not supported"
    return None


@converter("Dropout", check=_check_dropout, const_inputs=(1, 2))
def _dropout(node):
    x = node.input(0)
    if node.opset >= 12 and node.has(2) and bool(node.scalar(2, "training mode")):
        # (from model inputs: compiled per value, ember.compiler.specialize)
        ratio = float(node.scalar(1, "ratio")) if node.has(1) else 0.5
        if ratio != 0:
            raise UnsupportedOpError(f"Dropout in training mode with ratio {ratio:g} drops elements at random, "
                                     "which Ember does not do (its outputs are deterministic); ratio 0 keeps all")
    outs = [x]
    if node.wants(1):  # the mask of an inference dropout (or of ratio 0) keeps everything
        outs.append(node.call("constant_of_shape", shape=x.type.shape, value=True, dtype="bool"))
    return outs



@converter("SwiGLU", since=28)
def _swiglu(node):
    """``a * sigmoid(alpha * a) * b``."""
    a, b = node.input(0), node.input(1)
    alpha = node.attr("alpha", 1.0)
    scaled = a if alpha == 1.0 else node.call("multiply", a, node.const_like(alpha, a.type.dtype))
    return [node.call("multiply", node.call("multiply", a, node.call("sigmoid", scaled)), b)]
