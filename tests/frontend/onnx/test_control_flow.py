"""ONNX control flow: If branches become programs of their own, run by the branch the
condition picks while the model runs; results whose shapes differ between the branches get
data sizes, bound from the branch that ran."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import ember
from ember.errors import ModelError, UnsupportedOpError

W = np.arange(4, dtype=np.float32)


def _graph(nodes, name, outputs):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(o, T.FLOAT, None) for o in outputs])


def if_model(then_nodes=None):
    """z = relu(If(sum(x) > 0, then: x * w + 1 (n x 4), else: concat(x, x) (2n x 4)))"""
    then = _graph(then_nodes or [helper.make_node("Mul", ["x", "w"], ["t0"]), helper.make_node("Add", ["t0", "one"], ["t1"])],
                  "then", ["t1"])
    els = _graph([helper.make_node("Concat", ["x", "x"], ["e0"], axis=0)], "else", ["e0"])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els, name="branch"),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", T.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("z", T.FLOAT, None)],
                          [numpy_helper.from_array(W, "w"), numpy_helper.from_array(np.float32(1), "one"),
                           numpy_helper.from_array(np.float32(0), "zero")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def reference(x):
    return np.maximum(x * W + 1 if x.sum() > 0 else np.concatenate([x, x]), 0)


def test_the_branch_the_condition_picks_runs_with_its_own_shapes(tmp_path):
    exe = ember.compile(if_model())
    assert len(exe.program["functions"]) == 2 and exe.program["controls"][0]["kind"] == "if"
    loaded = ember.load(exe.export(str(tmp_path / "if.so")))
    rng = np.random.default_rng(0)
    for x in (np.ones((3, 4), np.float32), -np.ones((2, 4), np.float32), rng.standard_normal((5, 4)).astype(np.float32),
              rng.standard_normal((1, 4)).astype(np.float32) - 3):
        for e in (exe, loaded):
            y = e.run(x)[0]
            assert y.shape == reference(x).shape
            np.testing.assert_allclose(y, reference(x), rtol=1e-6)


def test_a_condition_known_at_import_inlines_its_branch():
    m = if_model()
    g = m.graph
    g.node[1].CopyFrom(helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(False), "v")))
    exe = ember.compile(m)
    assert "controls" not in exe.program  # the else branch, inlined
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(exe.run(x)[0], np.concatenate([x, x]))


def test_an_unsupported_op_in_a_branch_is_named_up_front():
    m = if_model([helper.make_node("Bernoulli", ["x"], ["t1"], name="coin")])
    with pytest.raises(UnsupportedOpError, match="Bernoulli: node\\(s\\) 'coin'"):
        ember.compile(m)


def test_a_control_step_is_verified(tmp_path):
    exe = ember.compile(if_model())
    import json

    from ember.runtime.executable import Executable

    prog = json.loads(json.dumps(exe.program))
    prog["controls"][0]["else"] = 7
    with pytest.raises(ModelError, match="else function must be an integer"):
        Executable(exe.module, prog, exe.constants)
    prog = json.loads(json.dumps(exe.program))
    prog["controls"][0]["args"] = []
    with pytest.raises(ModelError, match="n_then must be an integer"):
        Executable(exe.module, prog, exe.constants)
