"""Ops that make tensors from shapes rather than data: shape_of, size, constant_of_shape, range,
eye.

``shape_of``/``size`` read only their input's type, so on static shapes constant folding turns
them into constants; on symbolic shapes they are computed when the model runs.
"""
from __future__ import annotations

import math

from ...errors import DTypeError, ShapeError
from ...loop import dtype as dt
from ..types import Dim, TensorType
from . import dims as D
from .registry import Pattern, attr, register_op, tensor


def _int_dtype(attrs) -> str:
    if not dt.is_int(attrs["dtype"]):
        raise DTypeError(f"dtype must be an integer dtype, got {attrs['dtype']}")
    return attrs["dtype"]


def _infer_shape_of(args, attrs):
    return TensorType((tensor(args[0]).ndim,), _int_dtype(attrs))


def _infer_size(args, attrs):
    tensor(args[0])
    return TensorType((), _int_dtype(attrs))


register_op("shape_of", infer=_infer_shape_of, pattern=Pattern.OPAQUE, attrs_schema={"dtype": attr("dtype", "int64")},
            doc="the input's shape as a 1-D tensor")
register_op("size", infer=_infer_size, pattern=Pattern.OPAQUE, attrs_schema={"dtype": attr("dtype", "int64")},
            doc="the input's element count as a scalar")


def _infer_constant_of_shape(args, attrs):
    return TensorType(attrs["shape"], attrs["dtype"])


register_op("constant_of_shape", infer=_infer_constant_of_shape, pattern=Pattern.ELEMWISE, num_args=0,
            attrs_schema={"shape": attr("dims"), "value": attr(("float", "bool"), 0.0),
                          "dtype": attr("dtype", "float32")},
            doc="a tensor of the given shape filled with value")


def range_len(start, stop, step):
    """ONNX Range's element count: ``max(ceil((stop - start) / step), 0)``. A symbolic bound
    (``arange(seq)``) needs integer bounds and step, and is assumed not to run backwards."""
    if step == 0:
        raise ShapeError("range step must not be 0")
    if not isinstance(start, Dim) and not isinstance(stop, Dim):
        return max(int(math.ceil((stop - start) / step)), 0)
    if any(isinstance(v, float) and not float(v).is_integer() for v in (start, stop, step)):
        raise ShapeError(f"a range from {start} to {stop} by {step} over a symbolic size needs integer "
                         f"bounds and step")
    start, stop, step = (v if isinstance(v, Dim) else int(v) for v in (start, stop, step))
    lo, hi = (start, stop) if step > 0 else (stop, start)
    D.assume_le(lo, hi, f"range from {start} to {stop} by {step} must not be empty backwards")
    return D.dim_ceildiv(D.dim_sub(hi, lo), abs(step))


def _infer_range(args, attrs):
    if dt.is_bool(attrs["dtype"]):
        raise DTypeError("range cannot produce bool")
    if args:  # (start, step, count) from values: count elements, stop is its bound size
        if len(args) != 3:
            raise ShapeError(f"range takes no arguments or (start, step, count), got {len(args)}")
        for a, what in zip(args[:2], ("start", "step")):
            t = tensor(a, what)
            if t.shape != () or t.dtype != attrs["dtype"]:
                raise ShapeError(f"range: the {what} must be a {attrs['dtype']} scalar, got {t}")
        return TensorType((attrs["stop"],), attrs["dtype"])
    return TensorType((range_len(attrs["start"], attrs["stop"], attrs["step"]),), attrs["dtype"])


register_op("range", infer=_infer_range, pattern=Pattern.INJECTIVE, num_args=(0, 3),
            attrs_schema={"start": attr(("float", "dim")), "stop": attr(("float", "dim")), "step": attr("float", 1),
                          "dtype": attr("dtype", "int64")},
            doc="start, start + step, ... up to (not including) stop; or, given (start, step, count) "
                "scalar tensors, count elements start + i * step (stop: the count's bound data size)")


def _infer_eye(args, attrs):
    if len(attrs["shape"]) != 2:
        raise ShapeError(f"shape must have two dimensions, got {attrs['shape']}")
    return TensorType(attrs["shape"], attrs["dtype"])


register_op("eye", infer=_infer_eye, pattern=Pattern.INJECTIVE, num_args=0,
            attrs_schema={"shape": attr("dims"), "k": attr("int", 0), "dtype": attr("dtype", "float32")},
            doc="ones on the k-th diagonal (k > 0 above the main one), zeros elsewhere")
