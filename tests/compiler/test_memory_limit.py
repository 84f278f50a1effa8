"""A model that needs more memory than the limit is a ResourceError at compile time, naming the
node, op and shape at fault and the bytes, before anything is allocated (never numpy's
MemoryError); ``memory_limit=`` sets the limit, the default is the machine's available memory."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.errors import ResourceError
from ember.graph import limits

BIG = [2 ** 25, 2 ** 25]  # 2^50 elements: 4 PiB of float32


def _model(nodes, inputs, output, out_shape, inits=(), out_type=TensorProto.FLOAT):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(output, out_type, out_shape)], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _ints(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def test_constant_of_shape_of_2_to_the_50_elements_at_the_default_limit():
    one = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["c"], value=one, name="huge"),
                helper.make_node("Add", ["x", "c"], ["y"], name="add")],
               [("x", [1])], "y", BIG, [_ints("s", BIG)])
    with pytest.raises(ResourceError) as e:
        ember.compile(m)
    msg = str(e.value)
    assert "constant_of_shape" in msg and "'huge'" in msg and "(33554432, 33554432)" in msg
    assert str(2 ** 52) in msg and "memory available to this process" in msg and "memory_limit" in msg


def test_expand_of_a_constant_blowing_up_is_caught_before_folding():
    m = _model([helper.make_node("Expand", ["w", "s"], ["e"], name="expand_w"),
                helper.make_node("Add", ["x", "e"], ["y"], name="add")],
               [("x", [1])], "y", BIG,
               [numpy_helper.from_array(np.ones((1, 1), np.float32), "w"), _ints("s", BIG)])
    with pytest.raises(ResourceError, match=r"expand_w.*\(33554432, 33554432\) float32.*4503599627370496 bytes"):
        ember.compile(m)


def test_tile_of_a_constant_blowing_up_names_the_node():
    m = _model([helper.make_node("Tile", ["w", "r"], ["t"], name="tile_w"),
                helper.make_node("Add", ["x", "t"], ["y"], name="add")],
               [("x", [1])], "y", [2 ** 24, 2 ** 24],
               [numpy_helper.from_array(np.ones((4, 4), np.float32), "w"), _ints("r", [2 ** 22, 2 ** 22])])
    with pytest.raises(ResourceError, match=r"tile_w.*\(16777216, 16777216\)"):
        ember.compile(m)


def test_expand_of_an_input_blowing_up_is_caught_at_the_memory_plan():
    # nothing constant to fold: the intermediate itself does not fit in the arena
    m = _model([helper.make_node("Expand", ["x", "s"], ["e"], name="expand_x"),
                helper.make_node("Relu", ["e"], ["y"], name="relu")],
               [("x", [1, 1])], "y", BIG, [_ints("s", BIG)])
    with pytest.raises(ResourceError, match=r"its outputs \(4 PiB\).*output 'y' \(expand_x.*memory available"):
        ember.compile(m)
    # (read by two reductions, the expanded tensor is an intermediate: one reduction alone would
    # compute it as it reads it, its prologue)
    m = _model([helper.make_node("Expand", ["x", "s"], ["e"], name="expand_x"),
                helper.make_node("Relu", ["e"], ["r"], name="relu"),
                helper.make_node("ReduceSum", ["r"], ["a"], name="sum", keepdims=0),
                helper.make_node("ReduceMax", ["r"], ["b"], name="max", keepdims=0),
                helper.make_node("Add", ["a", "b"], ["y"], name="add")],
               [("x", [1, 1])], "y", [], [_ints("s", [2 ** 16, 2 ** 16])])
    with pytest.raises(ResourceError) as e:
        ember.compile(m, memory_limit="1GiB")
    assert "expand_x" in str(e.value) and "(65536, 65536) float32" in str(e.value)


def _normal_model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w")  # 16 KiB
    return _model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                   helper.make_node("Relu", ["m"], ["y"], name="relu")],
                  [("x", [8, 64])], "y", [8, 64], [w])


def test_a_normal_model_compiles_at_the_default_limit_and_within_a_given_one():
    x = np.ones((8, 64), np.float32)
    ref = ember.compile(_normal_model()).run(x)[0]
    np.testing.assert_array_equal(ember.compile(_normal_model(), memory_limit=2 ** 20).run(x)[0], ref)
    np.testing.assert_array_equal(ember.compile(_normal_model(), memory_limit="1MiB").run(x)[0], ref)


def test_a_tiny_limit_makes_a_normal_model_fail_with_the_bytes_named():
    with pytest.raises(ResourceError) as e:
        ember.compile(_normal_model(), memory_limit=1000)
    msg = str(e.value)
    # the weights alone (64 x 64 float32) are the first thing over 1000 bytes
    assert "initializer 'w' of shape [64, 64]" in msg and "16384 bytes" in msg and "1000 bytes" in msg
    assert "the memory_limit" in msg


def test_a_limit_between_the_weights_and_the_whole_executable_names_the_total():
    # weights 16 KiB fit; weights + the arena of intermediates (none here: the output is
    # written directly) + ... make a chain with an intermediate
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                helper.make_node("Softmax", ["m"], ["s"], name="sm"),
                helper.make_node("MatMul", ["s", "w"], ["y"], name="mm2")],
               [("x", [256, 64])], "y", [256, 64], [w])
    with pytest.raises(ResourceError) as e:
        ember.compile(m, memory_limit=16384 + 32768)
    msg = str(e.value)
    assert "its constants (16 KiB)" in msg and "arena" in msg and "(256, 64) float32" in msg


def test_the_limit_holds_inside_the_constant_folding_compile(monkeypatch):
    # folding compiles a program of its own ('constants'): the model's limit applies there too
    seen = []
    real = limits.check_bytes
    monkeypatch.setattr(limits, "check_bytes", lambda n, what: (seen.append((what, limits.current_limit())),
                                                                real(n, what)))
    w = numpy_helper.from_array(np.ones((64, 32), np.float32), "w")
    m = _model([helper.make_node("Transpose", ["w"], ["wt"], name="t"),
                helper.make_node("MatMul", ["x", "wt"], ["y"], name="mm")],
               [("x", [8, 32])], "y", [8, 64], [w])
    ember.compile(m, memory_limit=2 ** 20)
    assert any("model 'constants'" in what for what, _ in seen)
    assert all(lim == (2 ** 20, "the memory_limit") for _, lim in seen)


def test_memory_error_from_an_allocation_becomes_resource_error(monkeypatch):
    one = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["c"], value=one, name="huge"),
                helper.make_node("Add", ["x", "c"], ["y"], name="add")],
               [("x", [1])], "y", BIG, [_ints("s", BIG)])
    # a limit above what the machine has: numpy's MemoryError must not escape
    with pytest.raises(ResourceError, match="could not allocate"):
        ember.compile(m, memory_limit=2 ** 60)
