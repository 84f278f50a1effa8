"""Loops and branches decided at import: a Loop whose body slices by its iteration number
unrolls when its trip count is known (a model input's: compiled per value), and a value that
an If known at import passes on (a Split of a model input) is found as one the model needs."""
import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

import ember
from ember.compiler.specialize import SpecializingExecutable


def _model(nodes, inputs, outputs, opset=13, initializers=()):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def test_a_loop_slicing_by_its_iteration_number_unrolls():
    # y += x[i:i+1] each iteration; the scan output collects the running sums
    body = h.make_graph(
        [h.make_node("Identity", ["c"], ["c_out"]), h.make_node("Add", ["i", "one"], ["end"]),
         h.make_node("Unsqueeze", ["i", "zero"], ["starts"]), h.make_node("Unsqueeze", ["end", "zero"], ["ends"]),
         h.make_node("Slice", ["x", "starts", "ends"], ["part"]), h.make_node("Add", ["y", "part"], ["y_out"]),
         h.make_node("Identity", ["y_out"], ["scan"])], "body",
        [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("y", T.FLOAT, [1])],
        [_vi("c_out", T.BOOL, []), _vi("y_out", T.FLOAT, [1]), _vi("scan", T.FLOAT, [1])],
        initializer=[h.make_tensor("one", T.INT64, [], [1]), h.make_tensor("zero", T.INT64, [1], [0])])
    m = _model([h.make_node("Loop", ["n", "", "y0"], ["y", "sums"], body=body)],
               [_vi("n", T.INT64, []), _vi("x", T.FLOAT, [5]), _vi("y0", T.FLOAT, [1])],
               [_vi("y", T.FLOAT, [1]), _vi("sums", T.FLOAT, None)])
    exe = ember.compile(m)
    assert isinstance(exe, SpecializingExecutable) and exe.value_inputs == ["n"]
    x = np.arange(1, 6, dtype=np.float32)
    for n in (5, 2):
        y, sums = exe.run(np.array(n, np.int64), x, np.zeros(1, np.float32))
        np.testing.assert_array_equal(sums[:, 0], np.cumsum(x[:n]))
        assert y[0] == x[:n].sum()


def test_a_size_split_inside_a_branch_known_at_import_is_a_value_input():
    # (r, k) = If(rank == 2, then: Split(size), else: (1, 1)); y = Expand(x, Concat(r, k))
    then = h.make_graph([h.make_node("Split", ["size"], ["r1", "k1"], axis=0)], "then", [],
                        [_vi("r1", T.INT64, None), _vi("k1", T.INT64, None)])
    other = h.make_graph([h.make_node("Identity", ["ones"], ["r2"]), h.make_node("Identity", ["ones"], ["k2"])],
                         "else", [], [_vi("r2", T.INT64, None), _vi("k2", T.INT64, None)])
    m = _model([h.make_node("Size", ["size"], ["rank"]), h.make_node("Equal", ["rank", "two"], ["c"]),
                h.make_node("If", ["c"], ["r", "k"], then_branch=then, else_branch=other),
                h.make_node("Concat", ["r", "k"], ["shape"], axis=0), h.make_node("Expand", ["x", "shape"], ["y"])],
               [_vi("x", T.FLOAT, [1, 3]), _vi("size", T.INT64, [2])], [_vi("y", T.FLOAT, None)],
               initializers=[h.make_tensor("two", T.INT64, [], [2]), h.make_tensor("ones", T.INT64, [1], [1])])
    exe = ember.compile(m)
    x = np.arange(3, dtype=np.float32).reshape(1, 3)
    for rows in (4, 2):
        y, = exe.run(x, np.array([rows, 3], np.int64))
        np.testing.assert_array_equal(y, np.broadcast_to(x, (rows, 3)))
