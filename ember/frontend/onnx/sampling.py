"""ONNX's GridSample: :func:`ember.frontend.sampling.grid_sample`, its mode and padding read
from the node (opset 16 spells the modes bilinear/bicubic, opset 20 linear/cubic)."""
from __future__ import annotations

from ..sampling import grid_sample
from .table import converter


def _grid_sample(node, mode: str):
    return grid_sample(node.call, node.input(0), node.input(1), mode, node.attr("padding_mode", "zeros"),
                       bool(node.attr("align_corners", 0)))


@converter("GridSample", since=16)
def _grid_sample_16(node):
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(node.attr("mode", "bilinear"), node.attr("mode", "bilinear"))
    return [_grid_sample(node, mode)]


@converter("GridSample", since=20)
def _grid_sample_20(node):
    return [_grid_sample(node, node.attr("mode", "linear"))]


__all__ = []
