"""Converters across opsets: attributes that became inputs, defaults, and the ops produced."""
import numpy as np
import pytest

import ember
from ember.errors import UnsupportedOpError
from ember.frontend.onnx import from_onnx
from ember.graph import Call, TensorType, post_order

from onnx import numpy_helper

from .helpers import I64, init, model, node, vi


def convert(nodes, inputs, outputs, inits=(), opset=17):
    mod = from_onnx(model(nodes, inputs, outputs, inits, opset=opset))
    return mod, [n for n in post_order(mod) if isinstance(n, Call)]


def one(nodes, inputs, outputs, inits=(), opset=17):
    """The single call a one-node model becomes, and the module's result type."""
    mod, calls = convert(nodes, inputs, outputs, inits, opset)
    assert len(calls) == 1, [c.op for c in calls]
    return calls[0], mod.main.ret_type


def T(*shape, dtype="float32"):
    return TensorType(shape, dtype)


def i64(*v):
    return np.array(v, np.int64)


def test_clip_attributes_then_inputs():
    c, _ = one([node("Clip", ["x"], ["y"], min=0.0, max=6.0)], [vi("x", [3])], [vi("y", [3])], opset=7)
    assert c.op == "clip" and c.attrs == {"a_min": 0.0, "a_max": 6.0}
    c, _ = one([node("Clip", ["x", "lo", ""], ["y"])], [vi("x", [3])], [vi("y", [3])],
               [init("lo", np.array(-1, np.float32))], opset=11)
    assert c.attrs == {"a_min": -1.0}
    _, calls = convert([node("Clip", ["x", "lo", "hi"], ["y"])], [vi("x", [3]), vi("lo", []), vi("hi", [])],
                       [vi("y", [3])], opset=13)
    assert [c.op for c in calls] == ["maximum", "minimum"]  # bounds known only at run time


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze_axes(opset):
    if opset < 13:
        nodes = [node("Unsqueeze", ["x"], ["u"], axes=[0, 3]), node("Squeeze", ["u"], ["y"], axes=[0])]
        inits = []
    else:
        nodes = [node("Unsqueeze", ["x", "a03"], ["u"]), node("Squeeze", ["u", "a0"], ["y"])]
        inits = [init("a03", i64(0, 3)), init("a0", i64(0))]
    mod, calls = convert(nodes, [vi("x", [2, 3])], [vi("y", [2, 3, 1])], inits, opset)
    assert calls[0].attrs["axes"] == (0, 3) and calls[1].attrs["axis"] == (0,)
    assert mod.main.ret_type == T(2, 3, 1)


@pytest.mark.parametrize("opset, attrs, inits, inputs, sizes", [
    (11, {"split": [1, 4]}, [], ["x"], [1, 4]),
    (11, {}, [], ["x"], [None]),  # equal parts
    (13, {}, [init("s", i64(2, 3))], ["x", "s"], [2, 3]),
    (18, {"num_outputs": 2}, [], ["x"], [3, 2]),  # uneven: ceil, then the rest
])
def test_split(opset, attrs, inits, inputs, sizes):
    outs = ["a", "b"]
    mod, calls = convert([node("Split", inputs, outs, axis=1, **attrs)], [vi("x", [2, 5 if opset != 11 or attrs else 6])],
                         [vi(o, None) for o in outs], inits, opset)
    got = [f.shape[1] for f in mod.main.ret_type.fields]
    assert got == ([3, 3] if sizes == [None] else sizes)


def test_slice_attributes_then_inputs():
    c, t = one([node("Slice", ["x"], ["y"], starts=[1], ends=[1000], axes=[1])], [vi("x", [4, 10])], [vi("y", None)],
               opset=9)
    assert c.attrs == {"begin": (1,), "end": (1000,), "axes": (1,)} and t == T(4, 9)
    c, t = one([node("Slice", ["x", "s", "e", "a", "st"], ["y"])], [vi("x", [4, 10])], [vi("y", None)],
               [init("s", i64(-1)), init("e", i64(-2**63)), init("a", i64(1)), init("st", i64(-3))], opset=13)
    assert c.attrs["strides"] == (-3,) and t == T(4, 4)  # 9, 6, 3, 0


def test_pad_attributes_inputs_and_axes():
    c, t = one([node("Pad", ["x"], ["y"], pads=[0, 1, 0, 2], value=1.5, mode="constant")], [vi("x", [2, 3])],
               [vi("y", None)], opset=10)
    assert c.attrs["pad_width"] == (0, 1, 0, 2) and c.attrs["pad_value"] == 1.5 and t == T(2, 6)
    c, t = one([node("Pad", ["x", "p", "v"], ["y"], mode="reflect")], [vi("x", [2, 3])], [vi("y", None)],
               [init("p", i64(1, 1, 1, 1)), init("v", np.array(0, np.float32))], opset=11)
    assert c.attrs["mode"] == "reflect" and t == T(4, 5)
    c, t = one([node("Pad", ["x", "p", "", "ax"], ["y"])], [vi("x", [2, 3])], [vi("y", None)],
               [init("p", i64(2, 3)), init("ax", i64(-1))], opset=18)
    assert c.attrs["pad_width"] == (0, 2, 0, 3) and t == T(2, 8)


@pytest.mark.parametrize("op, since", [("ReduceSum", 13), ("ReduceMean", 18), ("ReduceMax", 18), ("ReduceL2", 18)])
def test_reduce_axes_attribute_then_input(op, since):
    c, t = one([node(op, ["x"], ["y"], axes=[1], keepdims=0)], [vi("x", [2, 3, 4])], [vi("y", None)], opset=since - 1)
    assert c.attrs == {"axis": (1,), "keepdims": False} and t == T(2, 4)
    c, t = one([node(op, ["x", "a"], ["y"])], [vi("x", [2, 3, 4])], [vi("y", None)], [init("a", i64(-1))], opset=since)
    assert t == T(2, 3, 1)
    c, t = one([node(op, ["x"], ["y"], keepdims=0)], [vi("x", [2, 3, 4])], [vi("y", None)], opset=since)
    assert c.attrs["axis"] is None and t == T()
    mod, calls = convert([node(op, ["x"], ["y"], noop_with_empty_axes=1)], [vi("x", [2, 3])], [vi("y", None)],
                         opset=since)
    # over no axes a reduction is its elementwise part: |x| for L2, x itself for the others
    assert [c.op for c in calls] == (["abs"] if op == "ReduceL2" else []) and mod.main.ret_type == T(2, 3)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp",
                                "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"])
def test_reductions_over_no_axes_compute_what_onnx_reference_computes(op):
    from onnx.reference import ReferenceEvaluator

    m = model([node(op, ["x", "a"], ["y"], noop_with_empty_axes=1)], [vi("x", [2, 3])], [vi("y", None)],
              [init("a", np.zeros(0, np.int64))], opset=18)
    x = np.random.default_rng(0).uniform(-2, 2, (2, 3)).astype(np.float32)
    if op == "ReduceLogSum":
        x = np.abs(x) + 0.1
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_allclose(ember.compile(m).run(x)[0], want, rtol=1e-5)


def test_topk_k_attribute_then_input():
    mod, calls = convert([node("TopK", ["x"], ["v", "i"], k=2)], [vi("x", [3, 5])], [vi("v", None), vi("i", None, I64)],
                         opset=9)
    assert calls[0].attrs["k"] == 2 and str(mod.main.ret_type) == "(Tensor[(3, 2), float32], Tensor[(3, 2), int64])"
    mod, calls = convert([node("TopK", ["x", "k"], ["v", "i"], largest=0, axis=0)], [vi("x", [3, 5])],
                         [vi("v", None), vi("i", None, I64)], [init("k", i64(1))], opset=11)
    assert calls[0].attrs["largest"] is False and mod.main.ret_type.fields[0] == T(1, 5)


def test_softmax_before_13_normalizes_over_all_trailing_axes():
    _, calls = convert([node("Softmax", ["x"], ["y"])], [vi("x", [2, 3, 4])], [vi("y", [2, 3, 4])], opset=11)
    assert [c.op for c in calls] == ["flatten", "nn.softmax", "reshape"]
    assert calls[0].type == T(2, 12) and calls[2].type == T(2, 3, 4)
    c, _ = one([node("Softmax", ["x"], ["y"], axis=-1)], [vi("x", [2, 3, 4])], [vi("y", None)], opset=11)
    assert c.attrs["axis"] == -1
    c, _ = one([node("LogSoftmax", ["x"], ["y"])], [vi("x", [2, 3, 4])], [vi("y", None)], opset=13)
    assert c.op == "nn.log_softmax" and c.attrs["axis"] == -1


@pytest.mark.parametrize("opset", [7, 12, 13])
def test_dropout_is_identity_with_a_full_mask(opset):
    mod, calls = convert([node("Dropout", ["x"], ["y", "m"])], [vi("x", [2, 3])], [vi("y", None),
                                                                                  vi("m", None, 9)], opset=opset)
    assert str(mod.main.ret_type) == "(Tensor[(2, 3), float32], Tensor[(2, 3), bool])"
    assert mod.main.body.fields[0] is mod.main.params[0]
    with pytest.raises(UnsupportedOpError, match="training mode"):
        convert([node("Dropout", ["x", "", "t"], ["y"])], [vi("x", [2])], [vi("y", None)],
                [init("t", np.array(True))], opset=13)


def test_gemm_becomes_dense_with_scaling_and_bias():
    _, calls = convert([node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0)],
                       [vi("a", [4, 3]), vi("b", [3, 5]), vi("c", [5])], [vi("y", [4, 5])])
    assert [c.op for c in calls] == ["transpose", "nn.dense", "multiply", "multiply", "add"]
    _, calls = convert([node("Gemm", ["a", "b"], ["y"], transA=1, transB=1)], [vi("a", [3, 4]), vi("b", [5, 3])],
                       [vi("y", None)])
    assert [c.op for c in calls] == ["transpose", "nn.dense"] and calls[-1].type == T(4, 5)


def test_conv_auto_pad_and_bias():
    _, calls = convert([node("Conv", ["x", "w", "b"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
                       [vi("x", [1, 3, 7, 7]), vi("w", [4, 3, 3, 3]), vi("b", [4])], [vi("y", None)])
    conv, bias = calls
    assert conv.attrs["padding"] == (1, 1, 1, 1) and bias.op == "nn.bias_add" and bias.type == T(1, 4, 4, 4)
    c, _ = one([node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2, 2])],
               [vi("x", [1, 3, 6, 6]), vi("w", [4, 3, 2, 2])], [vi("y", None)])
    assert c.attrs["padding"] == (0, 0, 0, 0)
    c, t = one([node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2, 2])],
               [vi("x", [1, 3, 6, 6]), vi("w", [4, 3, 3, 3])], [vi("y", None)])
    assert c.attrs["padding"] == (1, 1, 0, 0) and t == T(1, 4, 3, 3)
    c, t = one([node("Conv", ["x", "w"], ["y"])], [vi("x", [1, 2, 9]), vi("w", [4, 2, 3])], [vi("y", None)])
    assert c.op == "nn.conv1d" and t == T(1, 4, 7)


def test_conv_transpose_output_shape():
    c, t = one([node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], output_shape=[10, 8])],
               [vi("x", [1, 1, 3, 3]), vi("w", [1, 2, 3, 3])], [vi("y", None)])
    assert t == T(1, 2, 10, 8) and c.attrs["output_padding"] == (1, 1)
    # cropping a 5x5 full result to 4x4: the odd pad goes first, unless auto_pad is SAME_UPPER
    c, t = one([node("ConvTranspose", ["x", "w"], ["y"], output_shape=[4, 4])],
               [vi("x", [1, 1, 3, 3]), vi("w", [1, 2, 3, 3])], [vi("y", None)])
    assert c.attrs["padding"] == (1, 1, 0, 0) and t == T(1, 2, 4, 4)
    c, t = one([node("ConvTranspose", ["x", "w"], ["y"], output_shape=[4, 4], auto_pad="SAME_UPPER")],
               [vi("x", [1, 1, 3, 3]), vi("w", [1, 2, 3, 3])], [vi("y", None)])
    assert c.attrs["padding"] == (0, 0, 1, 1) and t == T(1, 2, 4, 4)


def test_pooling():
    c, t = one([node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
               [vi("x", [1, 1, 4, 4])], [vi("y", None)], opset=12)
    assert c.op == "nn.max_pool2d" and c.attrs["ceil_mode"] is True and t == T(1, 1, 2, 2)
    c, t = one([node("AveragePool", ["x"], ["y"], kernel_shape=[2], count_include_pad=1, pads=[1, 1])],
               [vi("x", [1, 1, 5])], [vi("y", None)])
    assert c.op == "nn.avg_pool1d" and c.attrs["count_include_pad"] is True and t == T(1, 1, 6)
    c, t = one([node("GlobalAveragePool", ["x"], ["y"])], [vi("x", ["n", 8, 7, 7])], [vi("y", None)])
    assert c.op == "nn.global_avg_pool2d" and t == T("n", 8, 1, 1)


def test_resize_across_opsets():
    c, t = one([node("Resize", ["x", "s"], ["y"], mode="nearest")], [vi("x", [1, 1, 2, 2])], [vi("y", None)],
               [init("s", np.array([1, 1, 2, 3], np.float32))], opset=10)
    assert c.attrs["coordinate_transformation_mode"] == "asymmetric" and t == T(1, 1, 4, 6)
    c, t = one([node("Resize", ["x", "", "", "sz"], ["y"], mode="linear")], [vi("x", [1, 1, 2, 2])], [vi("y", None)],
               [init("sz", i64(1, 1, 3, 5))], opset=13)
    assert c.attrs["method"] == "linear" and t == T(1, 1, 3, 5)
    c, t = one([node("Resize", ["x", "", "", "sz"], ["y"], axes=[2, 3], keep_aspect_ratio_policy="not_larger")],
               [vi("x", [1, 1, 2, 4])], [vi("y", None)], [init("sz", i64(4, 4))], opset=18)
    assert t == T(1, 1, 2, 4)  # scale min(2, 1) = 1
    c, t = one([node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 2.0])], [vi("x", [1, 1, 2, 2])],
               [vi("y", None)], opset=7)
    assert c.op == "resize" and c.attrs["nearest_mode"] == "floor" and t == T(1, 1, 4, 4)


def test_variadic_and_constants():
    mod, calls = convert([node("Mean", ["a", "b", "c"], ["y"])], [vi(n, [2]) for n in "abc"], [vi("y", None)])
    assert [c.op for c in calls] == ["add", "add", "divide"]
    mod, calls = convert([node("Constant", [], ["k"], value_ints=[1, 2]), node("Add", ["x", "k"], ["y"])],
                         [vi("x", [2], I64)], [vi("y", None, I64)])
    assert str(calls[0]).startswith("%0 = add(%x, const([1, 2], int64)) : Tensor[(2,), int64]")


def test_layer_norm_statistics_outputs():
    mod, calls = convert([node("LayerNormalization", ["x", "g"], ["y", "mean", "inv"], axis=1)],
                         [vi("x", [2, 3, 4]), vi("g", [3, 4])], [vi("y", None), vi("mean", None), vi("inv", None)])
    y, mean, inv = mod.main.ret_type.fields
    assert y == T(2, 3, 4) and mean == inv == T(2, 1, 1)


def test_shape_with_start_end_and_constant_of_shape():
    seven = numpy_helper.from_array(np.array([7], np.int32))
    mod, calls = convert([node("Shape", ["x"], ["s"], start=1), node("ConstantOfShape", ["s"], ["y"], value=seven)],
                         [vi("x", ["n", 3, 4])], [vi("y", None, 6)], opset=15)
    assert mod.main.ret_type == T(3, 4, dtype="int32")
    assert calls == [] and (mod.main.body.value == 7).all()  # small and static: folded at import
    # a symbolic shape is tracked at import: the result's shape attribute names the dim
    mod, calls = convert([node("Shape", ["x"], ["s"]), node("ConstantOfShape", ["s"], ["y"])],
                         [vi("x", ["n", 3])], [vi("y", None)], opset=15)
    assert [c.op for c in calls] == ["constant_of_shape"] and mod.main.ret_type == T("n", 3)


def test_normalizations_written_as_graph_ops():
    mod, calls = convert([node("RMSNormalization", ["x", "s"], ["y"], axis=-1)], [vi("x", [2, 5, 8]), vi("s", [8])],
                         [vi("y", None)], opset=23)
    assert mod.main.ret_type == T(2, 5, 8) and "rsqrt" in [c.op for c in calls]
    for opset, per in ((18, [2]), (21, [6])):
        mod, calls = convert([node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)],
                             [vi("x", [3, 6, 4, 4]), vi("s", per), vi("b", per)], [vi("y", None)], opset=opset)
        assert mod.main.ret_type == T(3, 6, 4, 4)
        assert any(c.op == "reshape" and c.type == T(3, 2, 48) for c in calls)  # (N, groups, rest)


@pytest.mark.parametrize("reduction, weighted, ignore, shape", [
    ("mean", False, None, ()), ("none", True, None, (4, 3)), ("sum", True, 1, ()), ("mean", False, -1, ())])
def test_losses(reduction, weighted, ignore, shape):
    attrs = {"reduction": reduction, **({"ignore_index": ignore} if ignore is not None else {})}
    ins = ["x", "t"] + (["w"] if weighted else [])
    mod, calls = convert([node("NegativeLogLikelihoodLoss", ins, ["y"], **attrs)],
                         [vi("x", [4, 5, 3]), vi("t", [4, 3], I64)] + ([vi("w", [5])] if weighted else []),
                         [vi("y", None)], opset=13)
    assert mod.main.ret_type == T(*shape)
    assert "gather_elements" in [c.op for c in calls] and ("where" in [c.op for c in calls]) == (ignore is not None)
    mod, calls = convert([node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y", "lp"], reduction=reduction)],
                         [vi("x", [4, 5]), vi("t", [4], I64)], [vi("y", None), vi("lp", None)], opset=13)
    assert mod.main.ret_type.fields[1] == T(4, 5) and calls[0].op == "nn.log_softmax"


def test_cumprod_and_eye_like():
    c, t = one([node("CumProd", ["x", "a"], ["y"], reverse=1)], [vi("x", [2, 3])], [vi("y", None)],
               [init("a", i64(1))], opset=26)
    assert c.op == "cumprod" and c.attrs == {"axis": 1, "exclusive": False, "reverse": True} and t == T(2, 3)
    c, t = one([node("EyeLike", ["x"], ["y"], k=1, dtype=I64)], [vi("x", ["n", 4])], [vi("y", None, I64)])
    assert c.op == "eye" and t == T("n", 4, dtype="int64")
