"""A quantized model's kernels are tuning tasks like a float model's: their 8-bit codes get
random values over their whole range, and a candidate's codes are checked against the
default schedule's without wrapping."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from ember.kernels.common import host
from ember.target import Target
from ember.tune.measure import measure_in_process
from ember.tune.tasks import extract_tasks

pytestmark = pytest.mark.skipif(not {"avx512vnni", "avxvnni"} & Target.host().feature_set,
                                reason="the integer products need VNNI on the host")


def _qdq_convs():
    """Two QDQ convs: the second reads the first's uint8 codes and writes its own."""
    rng = np.random.default_rng(3)
    inits, nodes, x = {"s": np.array(0.05, np.float32), "z": np.array(120, np.uint8)}, [], "x"
    for i in range(2):
        inits[f"w{i}"] = rng.integers(-127, 128, (32, 32, 3, 3)).astype(np.int8)
        inits[f"sw{i}"] = (rng.random(32) * 0.01 + 0.001).astype(np.float32)
        inits[f"zw{i}"] = np.zeros(32, np.int8)
        nodes += [h.make_node("QuantizeLinear", [x, "s", "z"], [f"q{i}"]),
                  h.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"d{i}"]),
                  h.make_node("DequantizeLinear", [f"w{i}", f"sw{i}", f"zw{i}"], [f"wd{i}"], axis=0),
                  h.make_node("Conv", [f"d{i}", f"wd{i}"], [f"c{i}"], pads=[1] * 4)]
        x = f"c{i}"
    nodes += [h.make_node("QuantizeLinear", [x, "s", "z"], ["qy"]),
              h.make_node("DequantizeLinear", ["qy", "s", "z"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [1, 32, 12, 12])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)]).SerializeToString()


def test_a_kernel_between_8_bit_codes_is_a_task_and_its_candidates_check_exactly():
    tasks, _ = extract_tasks(_qdq_convs(), host(), profile=False)
    coded = [t for t in tasks if t.builder.fn.body.type.dtype == "uint8"]  # (its input: words of 4 codes)
    assert coded, [t.description for t in tasks]
    task = coded[0]
    cands = [(i, {name: choice}) for i, (name, knob) in enumerate(sorted(task.knobs.items()))
             for choice in knob.choices[:2] if choice != knob.default][:4]
    assert cands
    out = measure_in_process(task.builder, host(), cands, repeat=1)
    assert [m["error"] for m in out] == [""] * len(cands)


def test_8_bit_codes_get_their_whole_range():
    from ember.graph import ir
    from ember.graph.types import TensorType
    from ember.tune.tasks import GroupBuilder

    x = ir.Var("x", TensorType((64, 64), "uint8"))
    codes = GroupBuilder(ir.Function([x], x), "k").arrays()[0]
    assert codes.dtype == np.uint8 and codes.min() < 8 and codes.max() > 247  # not normal floats cast


def test_a_group_reading_integers_that_may_be_indices_is_not_tuned():
    from ember.errors import TuneError
    from ember.graph import ir
    from ember.graph.types import TensorType
    from ember.tune.tasks import GroupBuilder

    idx = ir.Var("i", TensorType((4,), "int64"))
    fn = ir.Function([idx], idx)
    with pytest.raises(TuneError, match="int64"):
        GroupBuilder(fn, "k").arrays()
