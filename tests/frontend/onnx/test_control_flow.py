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


def test_a_condition_that_is_a_model_input_compiles_the_model_per_value(tmp_path):
    """optimum's merged decoders pick their branch by an input (`use_cache_branch`): each value
    gets a straight program (no control step), compiled on its first run; an export holds one
    program, with the If as control flow."""
    m = if_model()
    g = m.graph
    del g.node[:2]
    g.input.append(helper.make_tensor_value_info("c", T.BOOL, [1]))
    exe = ember.compile(m)
    assert type(exe).__name__ == "SpecializingExecutable"
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    for c in (True, False, True):
        y = exe.run(x, np.array([c]))[0]
        want = np.maximum(x * W + 1 if c else np.concatenate([x, x]), 0)
        np.testing.assert_allclose(y, want, rtol=1e-6)
    for c in (True, False):
        inner = exe.executable_for(x, np.array([c]))[0]
        assert "controls" not in inner.program and inner.native
    loaded = ember.load(exe.export(str(tmp_path / "if.so")))
    assert loaded.program["controls"][0]["kind"] == "if"
    for c in (True, False):
        np.testing.assert_array_equal(loaded.run(x, np.array([c]))[0], exe.run(x, np.array([c]))[0])


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


def _body(nodes, inputs, outputs):
    return helper.make_graph(nodes, "body", inputs, outputs)


def _vi(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def test_a_loop_with_a_trip_count_carries_values_and_stacks_per_iteration_outputs(tmp_path):
    # acc += x * (i + 1), for i < M while the running sum stays under the limit; each iteration's
    # acc is stacked as a scan output
    body = _body([helper.make_node("Cast", ["i"], ["fi"], to=T.FLOAT), helper.make_node("Add", ["fi", "one"], ["k"]),
                  helper.make_node("Mul", ["x", "k"], ["xk"]), helper.make_node("Add", ["acc", "xk"], ["acc2"]),
                  helper.make_node("ReduceSum", ["acc2"], ["tot"], keepdims=0), helper.make_node("Less", ["tot", "limit"], ["go"]),
                  helper.make_node("Identity", ["acc2"], ["each"])],
                 [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("acc", T.FLOAT, ["n"])],
                 [_vi("go", T.BOOL, []), _vi("acc2", T.FLOAT, None), _vi("each", T.FLOAT, None)])
    g = helper.make_graph([helper.make_node("Loop", ["M", "c0", "a0"], ["final", "stacked"], body=body)], "m",
                          [_vi("M", T.INT64, []), _vi("c0", T.BOOL, []), _vi("a0", T.FLOAT, ["n"]),
                           _vi("x", T.FLOAT, ["n"])],
                          [_vi("final", T.FLOAT, None), _vi("stacked", T.FLOAT, None)],
                          [numpy_helper.from_array(np.float32(1), "one"), numpy_helper.from_array(np.float32(50), "limit")])
    exe = ember.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))

    def ref(m, c, a, x):
        outs = []
        i = 0
        while i < m and c:
            a = a + x * (i + 1)
            c = a.sum() < 50
            outs.append(a)
            i += 1
        return a, np.stack(outs) if outs else np.zeros((0, len(a)), np.float32)

    for m, c, n in ((5, True, 3), (100, True, 2), (0, True, 4), (3, False, 3)):
        a = np.zeros(n, np.float32)
        x = np.arange(1, n + 1, dtype=np.float32)
        got = exe.run(np.array(m, np.int64), np.array(c), a, x)
        for g_, w in zip(got, ref(m, c, a, x)):
            np.testing.assert_allclose(g_, w, rtol=1e-6)


def test_a_loop_whose_carried_value_grows_runs_each_size():
    # acc = concat(acc, acc * 2) three times: each iteration a new shape (laid out anew), and
    # the iterations' outputs stay valid while the next ones run
    body = _body([helper.make_node("Mul", ["acc", "two"], ["dbl"]), helper.make_node("Concat", ["acc", "dbl"], ["acc2"],
                                                                                      axis=0),
                  helper.make_node("ReduceSum", ["acc2"], ["each"], keepdims=0)],
                 [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("acc", T.FLOAT, ["n"])],
                 [_vi("c", T.BOOL, []), _vi("acc2", T.FLOAT, None), _vi("each", T.FLOAT, None)])
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "a0"], ["final", "sums"], body=body)], "m",
                          [_vi("M", T.INT64, []), _vi("a0", T.FLOAT, ["n"])],
                          [_vi("final", T.FLOAT, None), _vi("sums", T.FLOAT, None)],
                          [numpy_helper.from_array(np.float32(2), "two")])
    exe = ember.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    a = np.array([1, -2], np.float32)
    final, sums = exe.run(np.array(3, np.int64), a)
    want, each = a, []
    for _ in range(3):
        want = np.concatenate([want, want * 2])
        each.append(want.sum())
    np.testing.assert_array_equal(final, want)
    np.testing.assert_array_equal(sums, np.array(each, np.float32))


def test_scan_runs_its_body_per_slice_in_either_direction():
    # running sum over the rows of xs (forward), and the rows themselves reversed (backward)
    body = _body([helper.make_node("Add", ["s", "row"], ["s2"]), helper.make_node("Identity", ["s2"], ["out"]),
                  helper.make_node("Identity", ["row"], ["back"])],
                 [_vi("s", T.FLOAT, [2]), _vi("row", T.FLOAT, [2])],
                 [_vi("s2", T.FLOAT, [2]), _vi("out", T.FLOAT, [2]), _vi("back", T.FLOAT, [2])])
    g = helper.make_graph([helper.make_node("Scan", ["s0", "xs"], ["final", "sums", "rows"], body=body,
                                            num_scan_inputs=1, scan_output_directions=[0, 1])], "m",
                          [_vi("s0", T.FLOAT, [2]), _vi("xs", T.FLOAT, ["t", 2])],
                          [_vi("final", T.FLOAT, None), _vi("sums", T.FLOAT, None), _vi("rows", T.FLOAT, None)])
    exe = ember.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]))
    for t in (4, 1):
        xs = np.random.default_rng(t).standard_normal((t, 2)).astype(np.float32)
        final, sums, rows = exe.run(np.zeros(2, np.float32), xs)
        np.testing.assert_allclose(sums, np.cumsum(xs, axis=0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(final, xs.sum(axis=0), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(rows, xs[::-1])


def test_a_view_of_a_scan_result_as_the_last_output_is_made():
    # the reshape of the scan's stacked output is a view made after the scan ran, in the last phase
    body = _body([helper.make_node("Add", ["s", "row"], ["s2"]), helper.make_node("Identity", ["s2"], ["out"])],
                 [_vi("s", T.FLOAT, [2]), _vi("row", T.FLOAT, [2])],
                 [_vi("s2", T.FLOAT, [2]), _vi("out", T.FLOAT, [2])])
    g = helper.make_graph([helper.make_node("Scan", ["s0", "xs"], ["final", "sums"], body=body, num_scan_inputs=1),
                           helper.make_node("Flatten", ["sums"], ["flat"], axis=0)], "m",
                          [_vi("s0", T.FLOAT, [2]), _vi("xs", T.FLOAT, ["t", 2])], [_vi("flat", T.FLOAT, None)])
    exe = ember.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]))
    for t in (3, 1):
        xs = np.random.default_rng(t).standard_normal((t, 2)).astype(np.float32)
        (flat,) = exe.run(np.zeros(2, np.float32), xs)
        np.testing.assert_allclose(flat, np.cumsum(xs, axis=0).reshape(1, -1), rtol=1e-5, atol=1e-6)


def test_profiling_a_program_with_control_flow_times_its_kernels_and_its_steps(tmp_path):
    exe = ember.compile(if_model())
    prof = exe.profile(np.ones((2, 4), np.float32), warmup=1, repeat=3)
    kinds = {r.op_type for r in prof.rows}
    assert "if" in kinds and len(prof.rows) == len(exe.program["calls"]) + 1
    step = next(r for r in prof.rows if r.op_type == "if")
    assert step.calls == 3 and step.total > 0 and step.kernel == "<if>"
    assert all(r.calls == 3 for r in prof.rows) and prof.latency > 0
    assert "<if>" in prof.table()
    prof.to_chrome_trace(str(tmp_path / "t.json"))
    # after profiling, runs go through the native runner again
    assert exe._timer is None
    np.testing.assert_allclose(exe.run(np.ones((3, 4), np.float32))[0], reference(np.ones((3, 4), np.float32)))
