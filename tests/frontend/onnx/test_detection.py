"""NonMaxSuppression (issue 46): the greedy selection of onnx's reference, term for term,
compacted to its (count, 3) rows at a count known only while running."""
import numpy as np
import pytest
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import ember

from .helpers import I64, model, node, vi


def nms_model(n_boxes, classes, batch, center, max_out, iou, score, opset=11):
    inits = [numpy_helper.from_array(np.array([max_out], np.int64), "m"),
             numpy_helper.from_array(np.array([iou], np.float32), "iou")]
    ins = ["boxes", "scores", "m", "iou"]
    if score is not None:
        inits.append(numpy_helper.from_array(np.array([score], np.float32), "st"))
        ins.append("st")
    return model([node("NonMaxSuppression", ins, ["y"], center_point_box=center)],
                 [vi("boxes", [batch, n_boxes, 4]), vi("scores", [batch, classes, n_boxes])],
                 [vi("y", None, I64)], inits, opset=opset)


def random_boxes(rng, batch, n, center):
    xy, wh = rng.uniform(0, 10, (batch, n, 2)), rng.uniform(0.5, 4, (batch, n, 2))
    if center:
        return np.concatenate([xy, wh], -1).astype(np.float32)
    # corners as [y1, x1, y2, x2], some given the other way round (ONNX allows any diagonal)
    b = np.concatenate([xy, xy + wh], -1)
    flip = rng.random((batch, n)) < 0.3
    b[flip] = b[flip][:, [2, 3, 0, 1]]
    return b.astype(np.float32)


@pytest.mark.parametrize("batch,classes,n,center,max_out,iou,score", [
    (1, 1, 6, 0, 3, 0.5, 0.0), (2, 3, 50, 0, 10, 0.3, 0.4), (2, 3, 50, 1, 100, 0.5, None),
    (1, 2, 200, 1, 1000, 0.6, 0.2), (1, 4, 30, 0, 2, 0.0, 0.9)])
def test_the_selection_is_onnx_references(batch, classes, n, center, max_out, iou, score):
    m = nms_model(n, classes, batch, center, max_out, iou, score)
    rng = np.random.default_rng(n)
    boxes = random_boxes(rng, batch, n, center)
    scores = rng.random((batch, classes, n)).astype(np.float32)
    scores[..., 1:4] = 0.625  # equal scores: the lowest index first
    boxes[0, 5 % n] = boxes[0, 0]  # a box of no extent... and the same box twice
    boxes[0, 4 % n, 2:] = boxes[0, 4 % n, :2] if not center else 0
    got = ember.compile(m).run(boxes, scores)[0]
    want = ReferenceEvaluator(m).run(None, {"boxes": boxes, "scores": scores})[0].reshape(-1, 3)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_no_box_kept_gives_no_rows_and_the_same_executable_runs_again():
    m = nms_model(20, 2, 1, 0, 5, 0.5, 0.99)
    exe = ember.compile(m)
    rng = np.random.default_rng(0)
    boxes = random_boxes(rng, 1, 20, 0)
    low = rng.random((1, 2, 20)).astype(np.float32) * 0.5
    assert exe.run(boxes, low)[0].shape == (0, 3)
    high = low + 0.6
    want = ReferenceEvaluator(m).run(None, {"boxes": boxes, "scores": high})[0]
    np.testing.assert_array_equal(exe.run(boxes, high)[0], want)


def test_zero_boxes_per_class_is_an_empty_result():
    m = nms_model(5, 1, 1, 0, 0, 0.5, None)
    rng = np.random.default_rng(1)
    assert ember.compile(m).run(random_boxes(rng, 1, 5, 0), rng.random((1, 1, 5)).astype(np.float32))[0].shape == (0, 3)


def test_the_boxes_to_keep_may_come_with_the_inputs():
    m = model([node("NonMaxSuppression", ["boxes", "scores", "m", "iou"], ["y"])],
              [vi("boxes", [1, 30, 4]), vi("scores", [1, 2, 30]), vi("m", [1], I64)], [vi("y", None, I64)],
              [numpy_helper.from_array(np.array([0.4], np.float32), "iou")])
    exe = ember.compile(m)
    rng = np.random.default_rng(3)
    boxes, scores = random_boxes(rng, 1, 30, 0), rng.random((1, 2, 30)).astype(np.float32)
    for keep in (0, 2, 7, 100):
        feeds = {"boxes": boxes, "scores": scores, "m": np.array([keep], np.int64)}
        want = ReferenceEvaluator(m).run(None, feeds)[0].reshape(-1, 3)
        np.testing.assert_array_equal(exe.run(**feeds)[0], want)


@pytest.mark.parametrize("mode,ratio,ctm,scale", [("avg", 2, "half_pixel", 0.5), ("avg", 0, "half_pixel", 1.0),
                                                  ("max", 2, "output_half_pixel", 0.25), ("max", 0, "half_pixel", 1.0),
                                                  ("avg", 0, "output_half_pixel", 1.0)])
def test_roi_align_is_onnx_references(mode, ratio, ctm, scale):
    m = model([node("RoiAlign", ["x", "rois", "idx"], ["y"], mode=mode, output_height=3, output_width=4,
                    sampling_ratio=ratio, spatial_scale=scale, coordinate_transformation_mode=ctm)],
              [vi("x", [2, 3, 10, 12]), vi("rois", [5, 4]), vi("idx", [5], I64)], [vi("y", None)], opset=16)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 10, 12)).astype(np.float32)
    xy = rng.uniform(-2, 12 / scale, (5, 2))
    rois = np.concatenate([xy, xy + rng.uniform(0, 8 / scale, (5, 2))], -1).astype(np.float32)
    rois[4] = [3, 3, 3, 3]  # an empty RoI
    feeds = {"x": x, "rois": rois, "idx": np.array([0, 1, 1, 0, 1], np.int64)}
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    np.testing.assert_allclose(ember.compile(m).run(**feeds)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_max_roi_pool_is_onnx_runtimes(scale):
    ort = pytest.importorskip("onnxruntime")
    m = model([node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[3, 2], spatial_scale=scale)],
              [vi("x", [2, 3, 9, 11]), vi("rois", [4, 5])], [vi("y", None)], opset=16)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    rois = np.array([[0, 1, 1, 6, 7], [1, 0, 0, 10, 8], [1, 3, 2, 3, 2], [0, -2, 4, 30, 20]], np.float32)
    rois[:, 1:] /= scale
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "rois": rois})[0]
    np.testing.assert_allclose(ember.compile(m).run(x, rois)[0], want, rtol=1e-6)


def test_inputs_at_any_address():
    # a kernel written as a loop program promises its parameters only natural alignment: an
    # input 4 bytes off a vector boundary (a slice of a larger buffer) must run as an aligned one
    m = nms_model(20, 2, 1, 0, 5, 0.5, 0.0)
    exe = ember.compile(m)
    rng = np.random.default_rng(3)
    boxes, scores = random_boxes(rng, 1, 20, 0), rng.random((1, 2, 20)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"boxes": boxes, "scores": scores})[0]
    raw = np.zeros(boxes.size + 17, np.float32)
    off = next(k for k in range(1, 17) if raw[k:].ctypes.data % 64)
    moved = raw[off:off + boxes.size].reshape(boxes.shape)
    moved[...] = boxes
    assert moved.ctypes.data % 64
    for _ in range(3):
        np.testing.assert_array_equal(exe.run(moved, scores)[0], want)
