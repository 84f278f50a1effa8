"""Converters of ONNX reductions (Reduce*) and ArgMax/ArgMin.

Axes moved from an attribute to an input at opset 13 for ReduceSum and at opset 18 for the
others; ``noop_with_empty_axes`` arrived with the input. Without axes the reduction covers
every axis, unless ``noop_with_empty_axes`` says to reduce over none: the elementwise part alone.
"""
from __future__ import annotations

from .table import converter

_REDUCE = {
    "ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod",
    "ReduceL1": "l1_norm", "ReduceL2": "l2_norm", "ReduceLogSum": "log_sum", "ReduceLogSumExp": "log_sum_exp",
    "ReduceSumSquare": "sum_square",
}


def _reduce(op, axes_from_input: bool):
    def convert(node):
        x = node.input(0)
        if axes_from_input:
            axes = node.ints(1, "axes") if node.has(1) else ()
        else:
            axes = tuple(node.attr("axes", ()))
        if not axes:
            if node.attr("noop_with_empty_axes", 0):
                return [_over_no_axes(node, op, x)]
            axes = None
        return [node.call(op, x, axis=axes, keepdims=bool(node.attr("keepdims", 1)))]
    return convert


def _over_no_axes(node, op: str, x):
    """A reduction over no axes is its elementwise part (what ONNX's reference computes):
    |x| for L1 and L2, x*x for SumSquare, log x for LogSum; x itself for the others."""
    if op in ("l1_norm", "l2_norm"):
        return node.call("abs", x)
    if op == "sum_square":
        return node.call("multiply", x, x)
    if op == "log_sum":
        return node.call("log", x)
    return x


for _onnx, _ember in _REDUCE.items():
    _since = 13 if _onnx == "ReduceSum" else 18
    converter(_onnx)(_reduce(_ember, False))
    converter(_onnx, since=_since, const_inputs=(1,))(_reduce(_ember, True))


def _arg(op):
    def convert(node):
        return [node.call(op, node.input(0), axis=node.attr("axis", 0), keepdims=bool(node.attr("keepdims", 1)),
                          select_last_index=bool(node.attr("select_last_index", 0)))]
    return convert


converter("ArgMax")(_arg("argmax"))
converter("ArgMin")(_arg("argmin"))
