"""Indexing ops: gather and scatter families, topk, cumsum/cumprod, trilu, one_hot.

Indices are int32 or int64 tensors; a negative index counts from the end of its axis (ONNX).
"""
from __future__ import annotations

from ...errors import DTypeError, ShapeError
from ...loop import dtype as dt
from ..types import TensorType, TupleType
from . import dims as D
from .registry import Pattern, attr, norm_axis, register_op, same_dtype, tensor


def _indices(t, what: str = "the indices") -> TensorType:
    t = tensor(t, what)
    if t.dtype not in ("int32", "int64"):
        raise DTypeError(f"{what} must be int32 or int64, got {t.dtype}")
    return t


def _infer_gather(args, attrs):
    x, idx = tensor(args[0], "the data"), _indices(args[1])
    if x.ndim == 0:
        raise ShapeError("the data must have rank >= 1")
    a = norm_axis(attrs["axis"], x.ndim)
    return TensorType(x.shape[:a] + idx.shape + x.shape[a + 1:], x.dtype)


register_op("gather", infer=_infer_gather, pattern=Pattern.INJECTIVE, num_args=2,
            attrs_schema={"axis": attr("int", 0)}, doc="numpy take: index one axis by an index tensor")


def _infer_gather_elements(args, attrs):
    x, idx = tensor(args[0], "the data"), _indices(args[1])
    if x.ndim == 0 or idx.ndim != x.ndim:
        raise ShapeError(f"the data and the indices must have one rank >= 1, got {x} and {idx}")
    norm_axis(attrs["axis"], x.ndim)
    return TensorType(idx.shape, x.dtype)


register_op("gather_elements", infer=_infer_gather_elements, pattern=Pattern.INJECTIVE, num_args=2,
            attrs_schema={"axis": attr("int", 0)}, doc="numpy take_along_axis")


def _infer_gather_nd(args, attrs):
    x, idx = tensor(args[0], "the data"), _indices(args[1])
    b = attrs["batch_dims"]
    if idx.ndim < 1 or not isinstance(idx.shape[-1], int):
        raise ShapeError(f"the indices need rank >= 1 and a static last dimension, got {idx}")
    k = idx.shape[-1]
    if b + k > x.ndim:
        raise ShapeError(f"index tuples of length {k} after {b} batch dims exceed the rank of {x}")
    return TensorType(idx.shape[:-1] + x.shape[b + k:], x.dtype)


register_op("gather_nd", infer=_infer_gather_nd, pattern=Pattern.INJECTIVE, num_args=2,
            attrs_schema={"batch_dims": attr("int", 0)})

_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _infer_scatter_elements(args, attrs):
    x, idx, upd = tensor(args[0], "the data"), _indices(args[1]), tensor(args[2], "the updates")
    same_dtype([x, upd], "the data and the updates")
    if idx.shape != upd.shape or idx.ndim != x.ndim:
        raise ShapeError(f"the indices {idx} and updates {upd} must have one shape, of the data's rank {x.ndim}")
    norm_axis(attrs["axis"], x.ndim)
    if attrs["reduction"] not in _REDUCTIONS:
        raise ShapeError(f"reduction must be one of {', '.join(_REDUCTIONS)}, got {attrs['reduction']!r}")
    return x


def _infer_scatter_nd(args, attrs):
    x, idx, upd = tensor(args[0], "the data"), _indices(args[1]), tensor(args[2], "the updates")
    same_dtype([x, upd], "the data and the updates")
    if idx.ndim < 1 or not isinstance(idx.shape[-1], int) or idx.shape[-1] > x.ndim:
        raise ShapeError(f"the indices {idx} need a static last dimension <= the data's rank {x.ndim}")
    want = idx.shape[:-1] + x.shape[idx.shape[-1]:]
    if len(want) != upd.ndim:
        raise ShapeError(f"the updates must have shape {want}, got {upd}")
    if attrs["reduction"] not in _REDUCTIONS:
        raise ShapeError(f"reduction must be one of {', '.join(_REDUCTIONS)}, got {attrs['reduction']!r}")
    return x


_SCATTER = {"reduction": attr("str", "none")}
register_op("scatter_elements", infer=_infer_scatter_elements, pattern=Pattern.OPAQUE, num_args=3,
            attrs_schema={"axis": attr("int", 0), **_SCATTER},
            doc="a copy of data with updates written (or combined) at indices along axis")
register_op("scatter_nd", infer=_infer_scatter_nd, pattern=Pattern.OPAQUE, num_args=3, attrs_schema=_SCATTER)


def _infer_topk(args, attrs):
    x = tensor(args[0])
    if x.ndim == 0:
        raise ShapeError("the input must have rank >= 1")
    a = norm_axis(attrs["axis"], x.ndim)
    k = attrs["k"]
    if isinstance(k, int):
        if k < 0 or (isinstance(x.shape[a], int) and k > x.shape[a]):
            raise ShapeError(f"k = {k} is out of range for axis {a} of {x}")
    else:  # a size from a value: checked when the run binds it
        D.assume_le(k, x.shape[a], f"topk: k ({k}) must be at most the size of axis {a} ({x.shape[a]})")
    shape = x.shape[:a] + (k,) + x.shape[a + 1:]
    return TupleType([TensorType(shape, x.dtype), TensorType(shape, "int64")])


register_op("topk", infer=_infer_topk, pattern=Pattern.OPAQUE,
            attrs_schema={"k": attr("dim"), "axis": attr("int", -1), "largest": attr("bool", True),
                          "sorted": attr("bool", True)},
            doc="(values, int64 indices) of the k largest (smallest) along axis; ties: lower index first")


def _infer_cumsum(args, attrs):
    x = tensor(args[0])
    if dt.is_bool(x.dtype):
        raise DTypeError("the input must be numeric, got bool")
    norm_axis(attrs["axis"], x.ndim)
    return x


for _name in ("cumsum", "cumprod"):
    register_op(_name, infer=_infer_cumsum, pattern=Pattern.OPAQUE,
                attrs_schema={"axis": attr("int", 0), "exclusive": attr("bool", False),
                              "reverse": attr("bool", False)},
                doc="running sum (product) along axis; exclusive skips the element itself")


def _infer_trilu(args, attrs):
    x = tensor(args[0])
    if x.ndim < 2:
        raise ShapeError(f"the input must have rank >= 2, got {x}")
    if len(args) > 1:
        k = tensor(args[1], "k")
        if k.shape != (1,) or k.dtype != "int64":
            raise ShapeError(f"k must be a one-element int64 tensor, got {k}")
    return x


register_op("trilu", infer=_infer_trilu, pattern=Pattern.INJECTIVE, num_args=(1, 2),
            attrs_schema={"upper": attr("bool", True), "k": attr("int", 0)},
            doc="keep the upper (lower) triangle of the last two axes from diagonal k (the attribute, "
                "or the one-element second argument, read while running), zero the rest")


def _infer_one_hot(args, attrs):
    idx = tensor(args[0], "the indices")
    if not dt.is_int(idx.dtype) and not dt.is_float(idx.dtype):
        raise DTypeError(f"the indices must be numeric, got {idx.dtype}")
    a = norm_axis(attrs["axis"], idx.ndim + 1)
    if len(args) > 1:
        v = tensor(args[1], "the values")
        if v.shape != (2,) or v.dtype != attrs["dtype"]:
            raise ShapeError(f"the values must be (off, on) of {attrs['dtype']}, got {v}")
    return TensorType(idx.shape[:a] + (attrs["depth"],) + idx.shape[a:], attrs["dtype"])


register_op("one_hot", infer=_infer_one_hot, pattern=Pattern.INJECTIVE, num_args=(1, 2),
            attrs_schema={"depth": attr("dim"), "axis": attr("int", -1), "on_value": attr("float", 1.0),
                          "off_value": attr("float", 0.0), "dtype": attr("dtype", "float32")},
            doc="on_value where the index hits the position along axis, else off_value; depth may be "
                "a size from a value, and (off, on) a second argument read while running")
