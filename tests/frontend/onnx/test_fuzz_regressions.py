"""Malformed models the fuzzer (ember.testing.fuzz) found raising plain Python exceptions
(TypeError, ValueError, KeyError, IndexError, AttributeError) from the importer: each is now an
EmberError naming the model, node, tensor or attribute at fault."""
import numpy as np
import pytest

import onnx
from onnx import helper
from ember.errors import DTypeError, ModelError, ShapeError
from ember.frontend.onnx import from_onnx
from ember.frontend.onnx.context import NodeContext

from .helpers import init, model, node, vi


def test_initializer_data_that_does_not_fill_its_dims():
    # was ValueError: cannot reshape array of size 9 into shape (1,) (numpy_helper.to_array)
    t = init("w", np.ones(3, np.float32))
    t.raw_data = t.raw_data + bytes(1)
    t.dims[:] = [1]
    m = model([node("Add", ["x", "w"], ["y"])], [vi("x", [3])], [vi("y", [3])], [t])
    with pytest.raises(ModelError, match=r"initializer 'w' cannot be read: .*dims \[1\]"):
        from_onnx(m)


def test_graph_input_declared_twice_or_without_a_name():
    # was ValueError: two function parameters are named 'x' (graph.ir.Function)
    m = model([node("Relu", ["x"], ["y"])], [vi("x", [2]), vi("x", [2])], [vi("y", [2])])
    with pytest.raises(ModelError, match="graph input 'x' is declared twice"):
        from_onnx(m)
    # was TypeError: a Var's name must be a non-empty string
    m = model([node("Relu", [""], ["y"])], [vi("", [2])], [vi("y", [2])])
    with pytest.raises(ModelError, match="graph input #0 has no name"):
        from_onnx(m)


def test_cycle_is_a_model_error():
    # was KeyError: 'b' (an input rewired to a later node's output)
    m = model([node("Relu", ["x", "b"], ["a"], name="first"), node("Exp", ["a"], ["b"], name="second")],
              [vi("x", [2])], [vi("b", [2])])
    m.graph.node[0].input.pop()  # Relu takes one input; the cycle goes through Add below
    m.graph.node[0].op_type = "Add"
    m.graph.node[0].input.append("b")
    with pytest.raises(ModelError, match="the graph has a cycle"):
        from_onnx(m)


def test_nodes_are_checked_against_their_schema():
    cases = [
        # TypeError: 'NoneType' object is not iterable (nn.py, kernel_shape)
        (node("MaxPool", ["x"], ["y"], name="pool"), r"MaxPool node 'pool': required attribute\(s\) 'kernel_shape' missing"),
        # IndexError in NodeContext.const (OneHot with a missing depth)
        (node("OneHot", ["x", "x"], ["y"], name="hot"), r"OneHot node 'hot': has 2 input\(s\); OneHot takes 3 to 3"),
        # TypeError in onnx_type_name(None) (Cast without 'to')
        (node("Cast", ["x"], ["y"], name="cast"), r"Cast node 'cast': required attribute\(s\) 'to' missing"),
        # AttributeError in fold.is_symbolic (Concat with an empty input in the middle)
        (node("Concat", ["x", "", "x"], ["y"], name="cat", axis=0), "Concat node 'cat': input 1 is required but empty"),
        (node("Concat", ["x", ""], ["y"], name="cat", axis=0), "Concat node 'cat': input 1 is required but empty"),
        # TypeError: 'NoneType' object is not iterable (a strides attribute of the wrong type)
        (node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[1, 1], strides=2),
         "MaxPool node 'pool': attribute 'strides' must be INTS, got INT"),
    ]
    for n, message in cases:
        m = model([n], [vi("x", [1, 1, 4, 4])], [vi("y", [1, 1, 4, 4])])
        with pytest.raises(ModelError, match=message):
            from_onnx(m)
    # opset 8: Unsqueeze's axes is a required attribute (TypeError in _unsqueeze_attr)
    m = model([node("Unsqueeze", ["x"], ["y"], name="u")], [vi("x", [2])], [vi("y", [1, 2])], opset=8)
    with pytest.raises(ModelError, match=r"Unsqueeze node 'u': required attribute\(s\) 'axes' missing"):
        from_onnx(m)
    # an attribute whose type byte was corrupted to UNDEFINED
    n = node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[1, 1], strides=[1, 1])
    n.attribute[1].type = onnx.AttributeProto.UNDEFINED
    m = model([n], [vi("x", [1, 1, 4, 4])], [vi("y", [1, 1, 4, 4])])
    with pytest.raises(ModelError, match="attribute 'strides' has no type"):
        from_onnx(m)


def test_trailing_empty_optional_inputs_are_still_fine():
    m = model([node("Clip", ["x", "", ""], ["y"])], [vi("x", [2])], [vi("y", [2])])
    from_onnx(m)


def test_names_that_are_not_utf8():
    # protobuf hands back bytes for such a name: was TypeError (a span of source node names)
    m = model([node("Relu", ["x"], ["y"], name="reluX")], [vi("x", [2])], [vi("y", [2])])
    data = m.SerializeToString().replace(b"reluX", b"relu\x80")
    with pytest.raises(ModelError, match="the name of node #0 is not valid UTF-8"):
        from_onnx(data)


def test_transpose_perm_out_of_range_is_a_shape_error():
    # perm [1, 2] on a rank-2 tensor: was IndexError in the transpose type inference
    m = model([node("Transpose", ["x"], ["y"], name="t", perm=[1, 2])], [vi("x", [2, 3])], [vi("y", [3, 2])])
    with pytest.raises(ShapeError, match=r"Transpose node 't'.*not a permutation"):
        from_onnx(m)
    from ember.graph import Var
    from ember.graph.ops import call
    from ember.graph.types import TensorType

    x = Var("x", TensorType((2, 3), "float32"))
    assert call("transpose", x, axes=(-1, 0)).type.shape == (3, 2)  # negative axes still work
    with pytest.raises(ShapeError):
        call("transpose", x, axes=(1, 2))


def test_a_missing_input_read_as_a_constant():
    # NodeContext.const formatted input_names[i] for an input that is not there (IndexError)
    n = helper.make_node("OneHot", ["i", "d"], ["y"])
    ctx = NodeContext(n, 17, [None, None], {}, "OneHot node 'h'")
    with pytest.raises(ShapeError, match=r"required input 2 \(the depth\) is missing"):
        ctx.const(2, "depth")


def test_shape_inputs_that_are_not_integers():
    # Pad's pads given a float tensor with a NaN: was ValueError (cannot convert float NaN to integer)
    pads = init("pads", np.array([np.nan, 0], np.float32))
    m = model([node("Pad", ["x", "pads"], ["y"], name="pad")], [vi("x", [2])], [vi("y", [2])], [pads])
    with pytest.raises(DTypeError, match=r"Pad node 'pad'.*input 1 \('pads', the pads\) must hold integers, got float32"):
        from_onnx(m)


def test_a_shape_past_int64_is_not_folded():
    # was OverflowError: Python int too large to convert to C long (fold._shape_of of a dim 2**63)
    m = model([node("Concat", ["x", "x"], ["c"], axis=2), node("Shape", ["c"], ["s"]),
               node("ConstantOfShape", ["s"], ["y"])],
              [vi("x", [2, 3, 1 << 62])], [vi("y", [2, 3, "big"])])
    try:
        from_onnx(m)
    except Exception as e:  # noqa: BLE001 - any EmberError is fine, nothing else
        from ember.errors import EmberError
        assert isinstance(e, EmberError), repr(e)
