"""Converters of the ONNX loss ops (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss),
written as the graph ops they are made of: a gather of each sample's target class, weights,
ignored targets, and the reduction."""
from __future__ import annotations

from ...errors import ShapeError
from .table import converter


def _check_reduction(attrs, opset, proto):
    red = attrs.get("reduction", "mean")
    return None if red in ("none", "sum", "mean") else f"reduction {red!r} is not supported"


def nll_loss(node, log_prob, target, weight):
    """-log_prob[n, target[n, ...], ...] with class weights and ignore_index, then reduced."""
    lt, tt = log_prob.type, target.type
    if lt.ndim < 2 or tt.ndim != lt.ndim - 1:
        raise ShapeError(f"expects input (N, C, ...) and target (N, ...), got {lt} and {tt}")
    ignore = node.attr("ignore_index")
    safe = target
    if ignore is not None:  # an ignored target picks class 0, and its weight becomes 0
        is_ignored = node.call("equal", target, node.const_like(ignore, tt.dtype))
        safe = node.call("where", is_ignored, node.const_like(0, tt.dtype), target)
    picked = node.call("gather_elements", log_prob, node.call("unsqueeze", safe, axes=(1,)), axis=1)
    loss = node.call("negative", node.call("squeeze", picked, axis=(1,)))
    w = node.call("gather", weight, safe, axis=0) if weight is not None else None
    if ignore is not None:
        keep = node.call("cast", node.call("logical_not", is_ignored), dtype=lt.dtype)
        w = keep if w is None else node.call("multiply", w, keep)
    if w is not None:
        loss = node.call("multiply", loss, w)
    red = node.attr("reduction", "mean")
    if red == "none":
        return loss
    total = node.call("sum", loss)
    if red == "sum":
        return total
    if w is None:
        return node.call("mean", loss)
    return node.call("divide", total, node.call("sum", w))


@converter("NegativeLogLikelihoodLoss", check=_check_reduction)
def _nll(node):
    weight = node.input(2) if node.has(2) else None
    return [nll_loss(node, node.input(0), node.input(1), weight)]


@converter("SoftmaxCrossEntropyLoss", check=_check_reduction)
def _softmax_cross_entropy(node):
    log_prob = node.call("nn.log_softmax", node.input(0), axis=1)
    weight = node.input(2) if node.has(2) else None
    return [nll_loss(node, log_prob, node.input(1), weight), log_prob]
