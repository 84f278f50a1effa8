"""The ONNX importer: parameters and constants, symbolic dims, errors up front and named."""
import os

import numpy as np
import pytest

import onnx
from ember.errors import DTypeError, EmberError, ShapeError, UnsupportedOpError
from ember.frontend import ModelError
from ember.frontend.onnx import from_onnx, scan, value_inputs
from ember.graph import Call, Constant, Dim, TensorType, Var, post_order

from .helpers import F, I64, LIGHT_DIR, init, model, node, vi


def _calls(mod):
    return [n for n in post_order(mod) if isinstance(n, Call)]


def test_params_constants_and_symbolic_dims():
    w = np.ones((8, 3, 3, 3), np.float32)
    m = model([node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]), node("Relu", ["y"], ["z"])],
              [vi("x", ["batch", 3, 32, 32]), vi("w", [8, 3, 3, 3])], [vi("z", ["batch", 8, 32, 32])],
              [init("w", w)])
    mod = from_onnx(m)
    (x,) = mod.main.params
    assert x == Var("x", TensorType((Dim("batch"), 3, 32, 32), "float32"))
    conv, relu = _calls(mod)
    assert conv.op == "nn.conv2d" and isinstance(conv.args[1], Constant) and conv.attrs["padding"] == (1, 1, 1, 1)
    assert relu.type == TensorType(("batch", 8, 32, 32), "float32") == mod.main.ret_type
    kept = from_onnx(m, keep_initializers_as_inputs=True)
    assert [p.name for p in kept.main.params] == ["x", "w"]


def test_unknown_dims_get_names_of_their_own():
    m = model([node("Relu", ["x"], ["y"])], [vi("x", [None, 4])], [vi("y", [None, 4])])
    assert from_onnx(m).main.params[0].type == TensorType((Dim("x.0"), 4), "float32")


def test_shape_chain_on_symbolic_batch_folds_into_reshape():
    # flatten the way exporters do: Reshape(x, Concat(Gather(Shape(x), 0), [-1]))
    nodes = [node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "zero"], ["n"], axis=0),
             node("Unsqueeze", ["n", "axes0"], ["n1"]),
             node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             node("Reshape", ["x", "shape"], ["y"])]
    inits = [init("zero", np.array(0, np.int64)), init("axes0", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64))]
    m = model(nodes, [vi("x", ["N", 3, 4, 5])], [vi("y", ["N", 60])], inits, opset=13)
    mod = from_onnx(m)
    assert mod.main.ret_type == TensorType(("N", 60), "float32")
    reshape = [c for c in _calls(mod) if c.op == "reshape"][0]
    assert reshape.attrs["newshape"] == (Dim("N"), -1)
    # static: the whole shape computation folds away
    m = model(nodes, [vi("x", [2, 3, 4, 5])], [vi("y", [2, 60])], inits, opset=13)
    assert [c.op for c in _calls(from_onnx(m))] == ["reshape"]


def test_unsupported_ops_are_all_reported_at_once_before_converting():
    nodes = [node("Bernoulli", ["x"], ["a"], name="nz1"),
             node("Add", ["x", "bad"], ["b"], name="add_shape_error"),  # would fail if converted
             node("Bernoulli", ["x"], ["c"], name="nz2"),
             node("Det", ["x"], ["d"], name="det"),
             helper_node_custom()]
    m = model(nodes, [vi("x", [2, 3]), vi("bad", [4])], [vi("a", [2, 3]), vi("b", [2, 3]),
                                                          vi("c", [2, 3]), vi("d", [6]), vi("e", [2, 3])])
    with pytest.raises(UnsupportedOpError) as info:
        from_onnx(m)
    msg = str(info.value)
    assert "opset 17" in msg and "3 op type(s)" in msg
    assert "Bernoulli: node(s) 'nz1', 'nz2'" in msg and "Det: node(s) 'det'" in msg
    assert "com.example.Custom: node(s) 'custom'" in msg
    assert info.value.unsupported_ops == {"Bernoulli": ["nz1", "nz2"], "Det": ["det"],
                                          "com.example.Custom": ["custom"]}


def helper_node_custom():
    return onnx.helper.make_node("Custom", ["x"], ["e"], name="custom", domain="com.example")


@pytest.mark.parametrize("opset", [6, 29])
def test_opsets_outside_7_to_28_are_unsupported(opset):
    # (Add changed at opset 7; an opset-6 model of ops unchanged since is read at 7)
    m = model([node("Add", ["x", "x"], ["y"])], [vi("x", [2])], [vi("y", [2])], opset=opset)
    with pytest.raises(UnsupportedOpError, match=f"opset {opset}.*supported opsets: 7 to 28"):
        from_onnx(m)
    if opset == 6:
        from_onnx(model([node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], opset=6))


def test_unsupported_attributes_and_types_are_reported_up_front():
    nodes = [node("Resize", ["x", "", "scales"], ["y"], name="aa", antialias=1, mode="linear"),
             node("Cast", ["x"], ["z"], name="to_string", to=onnx.TensorProto.STRING)]
    m = model(nodes, [vi("x", [1, 1, 4, 4]), vi("s", [2], onnx.TensorProto.STRING)],
              [vi("y", [1, 1, 8, 8]), vi("z", [1, 1, 4, 4], onnx.TensorProto.STRING)],
              [init("scales", np.array([1, 1, 2, 2], np.float32))], opset=19)
    with pytest.raises(UnsupportedOpError) as info:
        from_onnx(m)
    msg = str(info.value)
    assert "Resize node 'aa': Resize with antialias=1 is not supported" in msg
    assert "Cast node 'to_string': cast to STRING is not supported" in msg
    assert "graph input 's' has type STRING" in msg


def test_shape_deciding_graph_inputs_are_reported_and_can_be_bound():
    m = model([node("Reshape", ["x", "shape"], ["y"], name="r")], [vi("x", [2, 6]), vi("shape", [2], I64)],
              [vi("y", [3, 4])])
    assert value_inputs(m) == ["shape"]
    # unbound, the input's values become sizes the program binds before it runs
    assert str(from_onnx(m).main.ret_type) == 'Tensor[("?shape#0", "?shape#1"), float32]'
    import ember

    exe = ember.compile(m)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(exe.run(x, np.array([3, 4], np.int64))[0], x.reshape(3, 4))
    np.testing.assert_array_equal(exe.run(x, np.array([12, 1], np.int64))[0], x.reshape(12, 1))
    with pytest.raises(ShapeError, match="element counts"):
        exe.run(x, np.array([5, 4], np.int64))
    # -1 and 0 are not sizes: ember.compile compiles the run's values of its own (specialize.GuardedExecutable)
    np.testing.assert_array_equal(exe.run(x, np.array([-1, 4], np.int64))[0], x.reshape(3, 4))
    mod = from_onnx(m, static_inputs={"shape": np.array([3, 4], np.int64)})
    assert mod.main.ret_type == TensorType((3, 4), "float32") and [p.name for p in mod.main.params] == ["x"]
    with pytest.raises(DTypeError, match="static input 'shape' has dtype int32"):
        from_onnx(m, static_inputs={"shape": np.array([3, 4], np.int32)})
    with pytest.raises(ShapeError, match="not graph inputs"):
        from_onnx(m, static_inputs={"shape": np.array([3, 4], np.int64), "nope": np.zeros(1)})


def test_shape_deciding_inputs_are_found_through_computations():
    nodes = [node("Add", ["n", "one"], ["n1"]), node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             node("Reshape", ["x", "shape"], ["y"])]
    m = model(nodes, [vi("x", [2, 6]), vi("n", [1], I64)], [vi("y", [3, 4])],
              [init("one", np.array([1], np.int64)), init("minus1", np.array([-1], np.int64))])
    assert value_inputs(m) == ["n"]
    assert scan(m)["dynamic"] == ["'n' (input 1 of Reshape node 'reshape_y')"]
    assert from_onnx(m, static_inputs={"n": np.array([2], np.int64)}).main.ret_type == TensorType((3, 4), "float32")


def test_shape_errors_name_the_onnx_node():
    m = model([node("Add", ["a", "b"], ["c"], name="the_add")], [vi("a", [2, 3]), vi("b", [4])], [vi("c", [2, 3])])
    with pytest.raises(ShapeError, match=r"^Add node 'the_add' \(opset 17\): add: cannot broadcast shapes \(2, 3\) and \(4,\)"):
        from_onnx(m)


# -- unreadable and malformed models ------------------------------------------------------------

@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.37, 0.5, 0.8, 0.99])
def test_truncated_file_is_a_model_error_naming_the_file(tmp_path, fraction):
    data = open(os.path.join(LIGHT_DIR, "light_resnet50.onnx"), "rb").read()
    path = tmp_path / "resnet50_truncated.onnx"
    path.write_bytes(data[:int(len(data) * fraction)])
    with pytest.raises(ModelError, match="resnet50_truncated.onnx") as info:
        from_onnx(str(path))
    assert isinstance(info.value, EmberError)


def test_garbage_missing_and_wrong_argument(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\xff\x00not an onnx model at all" * 10)
    with pytest.raises(ModelError, match="garbage.onnx.*cannot be read as an ONNX model"):
        from_onnx(str(path))
    with pytest.raises(ModelError, match="no such file"):
        from_onnx(str(tmp_path / "missing.onnx"))
    with pytest.raises(TypeError, match="from_onnx takes"):
        from_onnx(42)


def test_malformed_graphs_are_model_errors():
    dangling = model([node("Relu", ["nowhere"], ["y"], name="r")], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(ModelError, match="input 'nowhere' of Relu node 'r' is produced by nothing"):
        from_onnx(dangling)
    no_output = model([node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("z", [2])])
    with pytest.raises(ModelError, match="graph output 'z' is produced by nothing"):
        from_onnx(no_output)
    twice = model([node("Relu", ["x"], ["y"]), node("Exp", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(ModelError, match="'y' is produced twice"):
        from_onnx(twice)
    no_shape = model([node("Relu", ["x"], ["y"])], [onnx.helper.make_tensor_value_info("x", F, None)], [vi("y", [2])])
    with pytest.raises(ShapeError, match="graph input 'x' has no shape"):
        from_onnx(no_shape)


def test_nodes_out_of_order_are_sorted():
    m = model([node("Exp", ["a"], ["b"]), node("Relu", ["x"], ["a"])], [vi("x", [2])], [vi("b", [2])])
    assert [c.op for c in _calls(from_onnx(m))] == ["nn.relu", "exp"]


def test_bytes_and_multiple_outputs():
    m = model([node("Relu", ["x"], ["y"]), node("Exp", ["x"], ["z"])], [vi("x", [2])], [vi("y", [2]), vi("z", [2])])
    mod = from_onnx(m.SerializeToString())
    assert str(mod.main.ret_type) == "(Tensor[(2,), float32], Tensor[(2,), float32])"
