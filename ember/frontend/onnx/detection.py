"""Converters of ONNX's NonMaxSuppression (detection models export it: ultralytics with
``nms=True``, torchvision's ``nms``), RoiAlign and MaxRoiPool (two-stage detectors' heads).

``nms_select`` (:mod:`ember.graph.ops.detection`) gives each batch and class its kept boxes in
order, then -1; the ``(count, 3)`` rows ONNX returns -- batch, class, box, ordered by batch,
class and then the order of keeping -- are the positions of the kept entries in row-major order
(``nonzero``, whose count the program binds while running) with the box index gathered in.
"""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...graph import Dim
from .dynamic import nonzero
from .table import converter


def _threshold(node, i: int, what: str):
    """Optional scalar input ``i`` as a float32 of shape (1,), or None when absent (or empty)."""
    if not node.has(i):
        return None
    v = node.value(i)
    if v is not None and np.asarray(v).size == 0:
        return None
    x = node.input(i)
    if x.type.ndim > 1 or (x.type.ndim == 1 and x.type.shape[0] != 1):
        raise ShapeError(f"the {what} must be a scalar or a single element, got {x.type}")
    return node.call("reshape", node.call("cast", x, dtype="float32"), newshape=(1,))


@converter("NonMaxSuppression", since=10)
def _nms(node):
    boxes, scores = node.input(0), node.input(1)
    # the boxes kept per class: a number known now bounds the result; one that comes with the
    # inputs is read by the kernel, and the result is bounded by the box count
    limit = node.const_like(np.array([1 << 62], np.int64), "int64")  # (no limit but the bound)
    max_out = scores.type.shape[2]
    known = node.value(2) if node.has(2) else np.zeros(0, np.int64)
    if known is not None and np.asarray(known).size == 0:
        max_out = 0
    elif known is not None and not any(isinstance(v, Dim) for v in np.asarray(known).reshape(-1)):
        max_out = max(node.int_scalar(2, "max_output_boxes_per_class"), 0)
        limit = node.const_like(np.array([max_out], np.int64), "int64")
    else:
        m = node.input(2)
        if m.type.shape not in ((), (1,)):
            raise ShapeError(f"max_output_boxes_per_class must be a scalar or a single element, got {m.type}")
        limit = node.call("reshape", node.call("cast", m, dtype="int64"), newshape=(1,))
    center = node.attr("center_point_box", 0)
    if center not in (0, 1):
        raise ShapeError(f"center_point_box must be 0 or 1, got {center}")
    if max_out == 0:  # (absent, 0 or empty: no box is kept)
        return [node.const_like(np.zeros((0, 3), np.int64), "int64")]
    iou = _threshold(node, 3, "iou_threshold")
    score = _threshold(node, 4, "score_threshold")
    zero = node.const_like(np.zeros(1, np.float32), "float32")
    th = node.call("concat", iou if iou is not None else zero, score if score is not None else zero, axis=0)
    sel = node.call("nms_select", boxes, scores, th, limit, max_out=max_out, center_point_box=center,
                    score_threshold=score is not None)
    # kept entries are >= 0: their positions (batch, class, order) in row-major order
    where = nonzero(node, node.call("add", sel, node.const_like(1, "int64")))
    rows = node.call("transpose", where, axes=(1, 0))
    box = node.call("gather_nd", sel, rows)
    n = rows.type.shape[0]
    head = node.call("strided_slice", rows, begin=(0,), end=(2,), axes=(1,))
    return [node.call("concat", head, node.call("reshape", box, newshape=(n, 1)), axis=1)]


@converter("RoiAlign", since=10)
def _roi_align(node):
    x, rois, idx = node.input(0), node.input(1), node.input(2)
    mode = node.attr("mode", "avg")
    if mode not in ("avg", "max"):
        raise ShapeError(f"mode must be avg or max, got {mode!r}")
    # opset 16 made half_pixel the default; before it, the coordinates were output_half_pixel
    ctm = node.attr("coordinate_transformation_mode", "half_pixel" if node.opset >= 16 else "output_half_pixel")
    rois = rois if rois.type.dtype == x.type.dtype else node.call("cast", rois, dtype=x.type.dtype)
    return [node.call("roi_align", x, rois, node.call("cast", idx, dtype="int64"), mode=mode,
                      output_height=node.attr("output_height", 1), output_width=node.attr("output_width", 1),
                      sampling_ratio=node.attr("sampling_ratio", 0), spatial_scale=float(node.attr("spatial_scale", 1.0)),
                      half_pixel=ctm == "half_pixel")]


@converter("MaxRoiPool")
def _max_roi_pool(node):
    x, rois = node.input(0), node.input(1)
    shape = node.attr("pooled_shape")
    if not shape or len(shape) != 2:
        raise ShapeError(f"pooled_shape must give a height and a width, got {shape}")
    rois = rois if rois.type.dtype == x.type.dtype else node.call("cast", rois, dtype=x.type.dtype)
    return [node.call("max_roi_pool", x, rois, pooled_height=shape[0], pooled_width=shape[1],
                      spatial_scale=float(node.attr("spatial_scale", 1.0)))]
