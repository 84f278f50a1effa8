"""ONNX's GridSample: :func:`ember.frontend.sampling.grid_sample`, its mode and padding read
from the node (opset 16 spells the modes bilinear/bicubic, opset 20 linear/cubic); and
AffineGrid, which makes such grids."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
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


@converter("AffineGrid", since=20, const_inputs=(1,))
def _affine_grid(node):
    """The sampling grid of affine transforms: each output position's normalized coordinates
    (x, y[, z], 1) -- a constant of the size -- transformed by its batch's ``theta``."""
    theta = node.input(0)
    size = node.ints(1, "size")
    spatial = size[2:]
    if len(spatial) not in (2, 3) or tuple(theta.type.shape[1:]) != (len(spatial), len(spatial) + 1):
        raise ShapeError(f"theta must be (N, {len(spatial)}, {len(spatial) + 1}) for size {size}, got {theta.type}")
    align = bool(node.attr("align_corners", 0))
    axes = []
    for n in spatial:  # each axis's normalized positions in [-1, 1]
        i = np.arange(n, dtype=np.float64)
        axes.append(np.full(n, -1.0) if align and n == 1 else (-1 + 2 * i / (n - 1) if align else -1 + (2 * i + 1) / n))
    mesh = np.meshgrid(*axes, indexing="ij")  # (D,) H, W
    base = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(mesh[0].size)])  # (x, y[, z], 1) x positions
    dtype = theta.type.dtype
    grid = node.call("nn.matmul", theta, node.const_like(base.astype(np.float32), dtype))  # (N, dims, positions)
    n = theta.type.shape[0]
    return [node.call("reshape", node.call("transpose", grid, axes=(0, 2, 1)),
                      newshape=(n, *spatial, len(spatial)))]
