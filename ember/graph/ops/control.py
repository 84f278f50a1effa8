"""Control flow: ops that run module functions (a model's subgraphs) chosen or repeated while
the model runs.

``if(cond, *then_args, *else_args, then=F, else=G, n_then=k, types=T)`` runs ``F`` on the
first ``k`` arguments after ``cond`` when ``cond`` (a scalar, or a one-element tensor) is
true, else ``G`` on the rest (``else=""``: the run fails with ``else_error``; versioned
conversions end their chain of cases so). Its result types ``T`` are the branches' where they agree; a
dimension they disagree on is a data size (:func:`~.dims.data_dim`), bound from the result the
branch returns. The functions are compiled like the model itself; the program runs the chosen
one in between phases (:mod:`ember.runtime.layout`).

``loop(*args, body=F, has_trip, has_cond, n_carried, n_scan, types)`` is ONNX's Loop: the
trip count and the condition (each present only when ``has_*``), the carried values, then
the values ``F`` reads from outside. ``scan(*args, body=F, n_states, n_scan_in, in_axes,
in_dirs, out_axes, out_dirs, types)`` is ONNX's Scan (opset 9 on). Their results are the
final carried (state) values and the per-iteration outputs stacked; a size that depends on
how many iterations ran, or that the iterations change, is a data size.
"""
from __future__ import annotations

from ...errors import ShapeError
from ..types import TensorType, TupleType, Type
from .registry import Pattern, attr, register_op, tensor


def _result(types: tuple) -> Type:
    return types[0] if len(types) == 1 else TupleType(list(types))


def _infer_if(args, attrs):
    cond = tensor(args[0], "the condition")
    if not (cond.is_static and all(d == 1 for d in cond.shape)):
        raise ShapeError(f"if: the condition must hold one element, got {cond}")
    if not 0 <= attrs["n_then"] <= len(args) - 1:
        raise ShapeError(f"if: n_then {attrs['n_then']} is out of range for {len(args) - 1} argument(s)")
    if not attrs["types"] or not all(isinstance(t, TensorType) for t in attrs["types"]):
        raise ShapeError(f"if: the result types must be tensors, got {attrs['types']}")
    return _result(attrs["types"])


register_op("if", infer=_infer_if, pattern=Pattern.OPAQUE, num_args=(1, None),
            attrs_schema={"then": attr("str"), "else": attr("str"), "n_then": attr("int"),
                          "types": attr("any"), "else_error": attr("str", "")},
            doc="run module function 'then' on the arguments after the condition up to n_then, or "
                "'else' on the rest; the result types are given. With else '' the else branch is "
                "an error: the run raises ArgumentError(else_error)")



def _infer_result(args, attrs):
    if not attrs["types"] or not all(isinstance(t, TensorType) for t in attrs["types"]):
        raise ShapeError(f"the result types must be tensors, got {attrs['types']}")
    return _result(attrs["types"])


register_op("loop", infer=_infer_result, pattern=Pattern.OPAQUE, num_args=(0, None),
            attrs_schema={"body": attr("str"), "has_trip": attr("bool"), "has_cond": attr("bool"),
                          "n_carried": attr("int"), "n_scan": attr("int"), "types": attr("any")},
            doc="ONNX Loop: run module function 'body' while the trip count and the condition allow")
register_op("scan", infer=_infer_result, pattern=Pattern.OPAQUE, num_args=(1, None),
            attrs_schema={"body": attr("str"), "n_states": attr("int"), "n_scan_in": attr("int"),
                          "in_axes": attr("ints"), "in_dirs": attr("ints"), "out_axes": attr("ints"),
                          "out_dirs": attr("ints"), "types": attr("any")},
            doc="ONNX Scan: run module function 'body' once per slice of the scan inputs")

CONTROL_OPS = ("if", "loop", "scan")

__all__ = ["CONTROL_OPS"]
