"""Ops of object detection: non-maximum suppression, RoI alignment and RoI max pooling.

``nms_select`` is the greedy selection of ONNX's NonMaxSuppression, per batch and class: the
index of each box it keeps, in the order it keeps them, and -1 after the last (a fixed-size
result; the frontend compacts it to the ``(count, 3)`` rows ONNX returns with ``nonzero``,
whose count the program binds while running). Its kernel is a loop program written directly
(:mod:`.compute.detection`): which box comes next depends on every box kept before it.
"""
from __future__ import annotations

from ...errors import DTypeError, ShapeError
from ...loop import dtype as dt
from ..types import TensorType
from . import dims as D
from .registry import Pattern, attr, register_op, tensor


def _infer_nms_select(args, attrs):
    boxes, scores, th, limit = (tensor(a, f"input {i}") for i, a in enumerate(args))
    if limit.shape != (1,) or limit.dtype != "int64":
        raise ShapeError(f"nms_select: the boxes to keep per class must be int64 (1,), got {limit}")
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise ShapeError(f"nms_select: boxes must be (batch, boxes, 4), got {boxes}")
    if scores.ndim != 3:
        raise ShapeError(f"nms_select: scores must be (batch, classes, boxes), got {scores}")
    if not (dt.is_float(boxes.dtype) and dt.is_float(scores.dtype)):
        raise DTypeError(f"nms_select: boxes and scores must be floats, got {boxes.dtype} and {scores.dtype}")
    if th.shape != (2,) or th.dtype != "float32":
        raise ShapeError(f"nms_select: the thresholds must be float32 (iou, score), got {th}")
    batch = D.assume_equal(boxes.shape[0], scores.shape[0], "NonMaxSuppression: boxes and scores have one batch")
    n = D.assume_equal(boxes.shape[1], scores.shape[2], "NonMaxSuppression: boxes and scores have one box count")
    k = D.dim_min(attrs["max_out"], n)
    return TensorType((batch, scores.shape[1], k), "int64")


register_op("nms_select", infer=_infer_nms_select, pattern=Pattern.OPAQUE, num_args=4,
            attrs_schema={"max_out": attr("dim"), "center_point_box": attr("int", 0),
                          "score_threshold": attr("bool", False)},
            doc="per batch and class, the boxes NonMaxSuppression keeps (at most the limit, int64 "
                "(1,), and max_out, the result's bound), in order, then -1 (thresholds: float32 "
                "[iou, score]; the score threshold applies when score_threshold)")

def _infer_roi_align(args, attrs):
    x, rois, idx = (tensor(a, f"input {i}") for i, a in enumerate(args))
    if x.ndim != 4 or not dt.is_float(x.dtype):
        raise ShapeError(f"roi_align: the features must be float (N, C, H, W), got {x}")
    if rois.ndim != 2 or rois.shape[1] != 4 or idx.ndim != 1 or idx.dtype != "int64":
        raise ShapeError(f"roi_align: rois must be (R, 4) and batch indices int64 (R,), got {rois} and {idx}")
    r = D.assume_equal(rois.shape[0], idx.shape[0], "RoiAlign: rois and batch indices have one count")
    return TensorType((r, x.shape[1], attrs["output_height"], attrs["output_width"]), x.dtype)


register_op("roi_align", infer=_infer_roi_align, pattern=Pattern.OPAQUE, num_args=3,
            attrs_schema={"mode": attr("str", "avg"), "output_height": attr("int", 1), "output_width": attr("int", 1),
                          "sampling_ratio": attr("int", 0), "spatial_scale": attr("float", 1.0),
                          "half_pixel": attr("bool", True)},
            doc="each RoI's bins, each the average (or max) of bilinear samples of its batch's features "
                "(ONNX RoiAlign; sampling_ratio 0: ceil(bin size) samples a side, per RoI)")

def _infer_max_roi_pool(args, attrs):
    x, rois = (tensor(a, f"input {i}") for i, a in enumerate(args))
    if x.ndim != 4 or not dt.is_float(x.dtype) or rois.ndim != 2 or rois.shape[1] != 5:
        raise ShapeError(f"max_roi_pool: features (N, C, H, W) and rois (R, 5), got {x} and {rois}")
    return TensorType((rois.shape[0], x.shape[1], attrs["pooled_height"], attrs["pooled_width"]), x.dtype)


register_op("max_roi_pool", infer=_infer_max_roi_pool, pattern=Pattern.OPAQUE, num_args=2,
            attrs_schema={"pooled_height": attr("int"), "pooled_width": attr("int"),
                          "spatial_scale": attr("float", 1.0)},
            doc="each RoI (batch, x1, y1, x2, y2) split into bins of whole pixels, each bin's largest "
                "feature (0 for an empty bin): ONNX MaxRoiPool")

__all__: list = []
