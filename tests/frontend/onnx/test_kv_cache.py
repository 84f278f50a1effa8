"""TensorScatter (opset 24): a fixed-length KV cache written at each sample's index, against
onnx's reference, with a dynamic batch and update length, linear and circular."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import ember


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_writes_land_at_each_samples_index(mode):
    node = h.make_node("TensorScatter", ["past", "update", "w"], ["present"], mode=mode, axis=2)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("past", T.FLOAT, ["b", 2, 8, 4]),
                                   h.make_tensor_value_info("update", T.FLOAT, ["b", 2, "s", 4]),
                                   h.make_tensor_value_info("w", T.INT64, ["b"])],
                     [h.make_tensor_value_info("present", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 24)])
    exe = ember.compile(m)
    rng = np.random.default_rng(0)
    for b, s, w in [(3, 1, [0, 5, 7]), (2, 3, [6, 1]), (1, 8, [0])]:
        feeds = {"past": rng.standard_normal((b, 2, 8, 4)).astype(np.float32),
                 "update": rng.standard_normal((b, 2, s, 4)).astype(np.float32), "w": np.array(w, np.int64)}
        if mode == "linear" and any(x + s > 8 for x in w):
            continue  # (the reference would write past the end)
        want = ReferenceEvaluator(m).run(None, feeds)[0]
        np.testing.assert_array_equal(exe.run(**feeds)[0], want)


def test_sizes_that_disagree_are_a_shape_error():
    from ember.errors import ShapeError

    node = h.make_node("TensorScatter", ["past", "update"], ["present"], axis=2)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("past", T.FLOAT, [1, 2, 8, 4]),
                                   h.make_tensor_value_info("update", T.FLOAT, [1, 3, 2, 4])],
                     [h.make_tensor_value_info("present", T.FLOAT, None)])
    with pytest.raises(ShapeError, match="differ on axis 1"):
        ember.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 24)]))
