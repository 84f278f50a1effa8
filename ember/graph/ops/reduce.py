"""Reductions: sum, mean, max, min, prod, norms, log-sum(-exp), argmax/argmin.

``axis`` is a tuple of axes (negative counts from the end) or None for all axes; ``()``
reduces nothing. ``keepdims`` keeps reduced axes as size 1. Reducing an empty axis is allowed
(ONNX defines the identity element as the result), so shapes with zeros pass through.
"""
from __future__ import annotations

from ...errors import DTypeError, ShapeError
from ...loop import dtype as dt
from ..types import TensorType
from .registry import Pattern, attr, norm_axis, register_op, tensor


def reduced_axes(axis, ndim: int) -> tuple:
    """The sorted, non-negative axes ``axis`` names (None: all); ShapeError on range or repeats."""
    if axis is None:
        return tuple(range(ndim))
    axes = [norm_axis(a, ndim) for a in axis]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"axis {axis} names an axis twice")
    return tuple(sorted(axes))


def reduce_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_rule(cls: str):
    def infer(args, attrs):
        x = tensor(args[0])
        if cls == "float" and not dt.is_float(x.dtype):
            raise DTypeError(f"the input must have a float dtype, got {x.dtype}")
        if cls == "numeric" and dt.is_bool(x.dtype):
            raise DTypeError(f"the input must be numeric, got {x.dtype}")
        axes = reduced_axes(attrs["axis"], x.ndim)
        return TensorType(reduce_shape(x.shape, axes, attrs["keepdims"]), x.dtype)

    return infer


_SCHEMA = {"axis": attr("ints", None), "keepdims": attr("bool", False)}
_REDUCTIONS = {
    "sum": "numeric", "mean": "numeric", "prod": "numeric", "max": "any", "min": "any",
    "l1_norm": "numeric", "l2_norm": "numeric", "sum_square": "numeric",
    "log_sum": "float", "log_sum_exp": "float",
}
for _name, _cls in _REDUCTIONS.items():
    register_op(_name, infer=_reduce_rule(_cls), pattern=Pattern.REDUCTION, attrs_schema=_SCHEMA)


def _infer_arg(args, attrs):
    x = tensor(args[0])
    if x.ndim == 0:
        raise ShapeError("the input must have rank >= 1")
    axis = norm_axis(attrs["axis"], x.ndim)
    return TensorType(reduce_shape(x.shape, (axis,), attrs["keepdims"]), "int64")


for _name in ("argmax", "argmin"):
    register_op(_name, infer=_infer_arg, pattern=Pattern.REDUCTION,
                attrs_schema={"axis": attr("int", 0), "keepdims": attr("bool", True),
                              "select_last_index": attr("bool", False)},
                doc="index (int64) of the first (or last) extreme element along axis")
