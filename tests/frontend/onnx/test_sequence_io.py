"""Sequences at a model's boundary: a sequence input is a list of arrays (the model is compiled
per length and item shapes), a sequence output comes back as a list; loops over sequences
unroll at import; values a program binds as sizes that are no sizes (a Reshape's -1 and 0)
get an executable of their own."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ember
from ember.compiler.specialize import GuardedExecutable, SpecializingExecutable
from ember.errors import ArgumentError
from ember.frontend.onnx.backend import EmberBackend


def _model(nodes, inputs, outputs, opset=17):
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs), opset_imports=[h.make_opsetid("", opset)])


def _seq(name, elem=T.FLOAT, shape=None):
    return h.make_value_info(name, h.make_sequence_type_proto(h.make_tensor_type_proto(elem, shape)))


def _add_map():
    """y = SequenceMap(x, b) with a body adding b to each item."""
    body = h.make_graph([h.make_node("Add", ["i0", "i1"], ["o0"])], "body",
                        [h.make_tensor_value_info("i0", T.FLOAT, ["n"]), h.make_tensor_value_info("i1", T.FLOAT, ["n"])],
                        [h.make_tensor_value_info("o0", T.FLOAT, ["n"])])
    return _model([h.make_node("SequenceMap", ["x", "b"], ["y"], body=body)],
                  [_seq("x", shape=["n"]), h.make_tensor_value_info("b", T.FLOAT, ["n"])], [_seq("y", shape=["n"])])


def test_a_sequence_input_is_compiled_per_length_and_its_output_is_a_list():
    exe = ember.compile(_add_map())
    assert isinstance(exe, SpecializingExecutable) and exe.structured == ["x"]
    b = np.arange(4, dtype=np.float32)
    for n in (3, 1, 3):
        xs = [np.full(4, k, np.float32) for k in range(n)]
        y, = exe.run(xs, b)
        assert isinstance(y, list) and len(y) == n
        for k in range(n):
            np.testing.assert_array_equal(y[k], xs[k] + b)
    assert exe.specializations == 2  # (length 3 again reuses its executable)
    assert exe.input_info[0].dtype == "sequence(float32)"


def test_the_wrong_kind_of_value_is_an_argument_error():
    exe = ember.compile(_add_map())
    b = np.zeros(4, np.float32)
    with pytest.raises(ArgumentError, match="'x' is a sequence: give it a list"):
        exe.run(np.zeros(4, np.float32), b)
    with pytest.raises(ArgumentError, match="'b' is a tensor: give it an array"):
        exe.run([b], [b])


def test_a_sequence_output_of_tensor_inputs_is_compiled_at_once():
    m = _model([h.make_node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0)],
               [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [_seq("s")])
    exe = ember.compile(m)
    assert exe.specializations == 1  # (nothing a run gives decides the graph)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    s, = exe.run(x)
    assert len(s) == 3 and all((s[k] == x[:, k]).all() for k in range(3))


def test_a_loop_over_a_sequence_unrolls_per_trip_count():
    # each iteration appends x[:i+1] to the carried sequence: its length is the trip count
    body = h.make_graph(
        [h.make_node("Identity", ["c"], ["c_out"]), h.make_node("Add", ["i", "one"], ["end"]),
         h.make_node("Unsqueeze", ["end", "zero"], ["ends"]), h.make_node("Slice", ["x", "zeros", "ends"], ["part"]),
         h.make_node("SequenceInsert", ["s", "part"], ["s_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []), _seq("s")],
        [h.make_tensor_value_info("c_out", T.BOOL, []), _seq("s_out")],
        initializer=[h.make_tensor("one", T.INT64, [], [1]), h.make_tensor("zero", T.INT64, [1], [0]),
                     h.make_tensor("zeros", T.INT64, [1], [0])])
    m = _model([h.make_node("SequenceEmpty", [], ["s0"]), h.make_node("Loop", ["n", "", "s0"], ["s"], body=body)],
               [h.make_tensor_value_info("n", T.INT64, []), h.make_tensor_value_info("x", T.FLOAT, [5])], [_seq("s")])
    exe = ember.compile(m)
    x = np.arange(5, dtype=np.float32)
    for n in (3, 2):
        s, = exe.run(np.array(n, np.int64), x)
        assert [list(a) for a in s] == [list(x[:k + 1]) for k in range(n)]
    assert exe.per_value and exe.specializations == 2


def test_a_reshape_shape_from_an_input_keeps_one_program_for_sizes():
    m = _model([h.make_node("Reshape", ["x", "shape"], ["y"])],
               [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4]), h.make_tensor_value_info("shape", T.INT64, [3])],
               [h.make_tensor_value_info("y", T.FLOAT, None)])
    exe = ember.compile(m)
    assert isinstance(exe, GuardedExecutable)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y, = exe.run(x, np.array([4, 3, 2], np.int64))
    np.testing.assert_array_equal(y, x.reshape(4, 3, 2))
    assert exe.fallback is None  # (sizes: the one program)
    for shape, want in [([-1, 2, 3], (4, 2, 3)), ([0, -1, 2], (2, 6, 2)), ([2, 0, 4], (2, 3, 4))]:
        y, = exe.run(x, np.array(shape, np.int64))
        np.testing.assert_array_equal(y, x.reshape(want))
    assert exe.fallback.specializations == 3
    exe.threads_per_run = 1  # (settings are the program's)
    assert exe.generic.threads_per_run == 1


def test_the_backend_takes_and_gives_sequences():
    xs = [np.ones(3, np.float32), np.zeros(3, np.float32)]
    y, = EmberBackend.run_model(_add_map(), [xs, np.arange(3, dtype=np.float32)])
    assert [list(a) for a in y] == [[1, 2, 3], [0, 1, 2]]


def test_an_if_whose_branches_give_sequences_is_compiled_per_condition():
    def branch(name, value, n):
        consts = [h.make_node("Constant", [], [f"{name}{k}"], value=h.make_tensor("v", T.FLOAT, [2], [value] * 2))
                  for k in range(n)]
        return h.make_graph(consts + [h.make_node("SequenceConstruct", [f"{name}{k}" for k in range(n)], [name])],
                            name, [], [_seq(name)])
    m = _model([h.make_node("If", ["c"], ["s"], then_branch=branch("t", 1.0, 1), else_branch=branch("e", 2.0, 3))],
               [h.make_tensor_value_info("c", T.BOOL, [])], [_seq("s")])
    exe = ember.compile(m)
    s, = exe.run(np.array(True))
    assert [list(a) for a in s] == [[1, 1]]
    s, = exe.run(np.array(False))
    assert [list(a) for a in s] == [[2, 2]] * 3
    assert exe.value_inputs == ["c"] and exe.specializations == 2
