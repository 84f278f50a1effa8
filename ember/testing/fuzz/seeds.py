"""The seed corpus: small ONNX models with random weights (each compiles in about a second,
cold), the inputs every case mutates."""
from __future__ import annotations

import math
from typing import Callable, Dict

import numpy as np


def _models():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def make(nodes, inputs, outputs, inits, name, opset=17):
        graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        try:  # value_info gives the structure-aware mutators more to mutate
            m = onnx.shape_inference.infer_shapes(m)
        except Exception:  # pragma: no cover - onnx's inference is a nicety here
            pass
        return m

    return onnx, TensorProto, helper, numpy_helper, make


def conv_net_model(rng: np.random.Generator):
    """Conv/Relu/MaxPool, a second conv, Flatten/Gemm/Softmax on a 1x3x16x16 image."""
    onnx, TP, h, nh, make = _models()
    f32 = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    inits = [nh.from_array(f32(8, 3, 3, 3), "w1"), nh.from_array(f32(8), "b1"),
             nh.from_array(f32(8, 8, 1, 1), "w2"), nh.from_array(f32(10, 128), "fc"),
             nh.from_array(f32(10), "fc_b")]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[1, 1]),
             h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             h.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", group=1),
             h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             h.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Flatten", ["p2"], ["f"], name="flatten", axis=1),
             h.make_node("Gemm", ["f", "fc", "fc_b"], ["g"], name="fc", transB=1, alpha=1.0),
             h.make_node("Softmax", ["g"], ["y"], name="softmax", axis=1)]
    return make(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 16, 16])],
                [h.make_tensor_value_info("y", TP.FLOAT, [1, 10])], inits, "conv_net")


def shape_ops_model(rng: np.random.Generator):
    """Shape/Gather/Unsqueeze/Concat -> Reshape, Transpose, ConstantOfShape, Expand, Slice."""
    onnx, TP, h, nh, make = _models()
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    inits = [nh.from_array(np.array(0, dtype=np.int64), "idx0"), nh.from_array(i64(0), "axes0"),
             nh.from_array(i64(-1), "minus1"), nh.from_array(rng.standard_normal((1, 2)).astype(np.float32), "bias"),
             nh.from_array(i64(0), "starts"), nh.from_array(i64(6), "ends"), nh.from_array(i64(0), "slice_axes")]
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Gather", ["s", "idx0"], ["d0"], name="gather", axis=0),
             h.make_node("Unsqueeze", ["d0", "axes0"], ["d0u"], name="unsqueeze"),
             h.make_node("Concat", ["d0u", "minus1"], ["shp"], name="concat_shape", axis=0),
             h.make_node("Reshape", ["x", "shp"], ["r"], name="reshape"),
             h.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[1, 0]),
             h.make_node("Shape", ["t"], ["ts"], name="shape_t"),
             h.make_node("ConstantOfShape", ["ts"], ["half"], name="const_of_shape",
                         value=h.make_tensor("v", TP.FLOAT, [1], [0.5])),
             h.make_node("Expand", ["bias", "ts"], ["e"], name="expand"),
             h.make_node("Add", ["t", "half"], ["a"], name="add"),
             h.make_node("Mul", ["a", "e"], ["m"], name="mul"),
             h.make_node("Slice", ["m", "starts", "ends", "slice_axes"], ["sl"], name="slice"),
             h.make_node("Concat", ["sl", "sl"], ["y"], name="concat", axis=0)]
    return make(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [2, 3, 4])],
                [h.make_tensor_value_info("y", TP.FLOAT, [12, 2])], inits, "shape_ops")


def transformer_model(rng: np.random.Generator):
    """An embedding lookup (Gather of token ids given at run time: the random inputs are 0 to
    2), one attention head and an MLP on 1x8x16: MatMul/Transpose/Div/Softmax, Add,
    LayerNormalization, an Erf GELU, and a ReduceMean/Sub/Pow/Sqrt layer norm."""
    onnx, TP, h, nh, make = _models()
    f32 = lambda *s: (rng.standard_normal(s) * 0.25).astype(np.float32)  # noqa: E731
    sc = lambda name, v: nh.from_array(np.array(v, dtype=np.float32), name)  # noqa: E731
    inits = [nh.from_array(f32(16, 16), n) for n in ("wq", "wk", "wv")]
    inits += [nh.from_array(f32(16, 32), "w1"), nh.from_array(f32(32), "b1"), nh.from_array(f32(32, 16), "w2"),
              nh.from_array(f32(16), "b2"), nh.from_array(np.ones(16, np.float32), "ln_s"),
              nh.from_array(np.zeros(16, np.float32), "ln_b"), sc("four", 4.0), sc("half", 0.5), sc("one", 1.0),
              sc("rsqrt2", 1 / math.sqrt(2)), sc("two", 2.0), sc("eps", 1e-5),
              nh.from_array(np.array([-1], dtype=np.int64), "last")]
    inits.append(nh.from_array(f32(10, 16), "embedding"))
    n = h.make_node
    nodes = [n("Gather", ["embedding", "ids"], ["emb"], name="embed", axis=0),
             n("Add", ["x0", "emb"], ["x"], name="add_embedding"),
             n("MatMul", ["x", "wq"], ["q"], name="q"), n("MatMul", ["x", "wk"], ["k"], name="k"),
             n("MatMul", ["x", "wv"], ["v"], name="v"),
             n("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
             n("MatMul", ["q", "kt"], ["s"], name="scores"), n("Div", ["s", "four"], ["s2"], name="scale"),
             n("Softmax", ["s2"], ["att"], name="softmax", axis=-1), n("MatMul", ["att", "v"], ["o"], name="attend"),
             n("Add", ["x", "o"], ["h"], name="residual1"),
             n("LayerNormalization", ["h", "ln_s", "ln_b"], ["ln"], name="ln1", axis=-1, epsilon=1e-5),
             n("MatMul", ["ln", "w1"], ["m1"], name="mlp1"), n("Add", ["m1", "b1"], ["m1b"], name="mlp1_bias"),
             n("Mul", ["m1b", "rsqrt2"], ["gs"], name="gelu_scale"), n("Erf", ["gs"], ["ge"], name="gelu_erf"),
             n("Add", ["ge", "one"], ["g1"], name="gelu_add"), n("Mul", ["m1b", "g1"], ["g2"], name="gelu_mul"),
             n("Mul", ["g2", "half"], ["g"], name="gelu_half"),
             n("MatMul", ["g", "w2"], ["m2"], name="mlp2"), n("Add", ["m2", "b2"], ["m2b"], name="mlp2_bias"),
             n("Add", ["ln", "m2b"], ["h2"], name="residual2"),
             n("ReduceMean", ["h2"], ["mu"], name="mean", axes=[-1], keepdims=1),
             n("Sub", ["h2", "mu"], ["d"], name="center"), n("Pow", ["d", "two"], ["d2"], name="square"),
             n("ReduceMean", ["d2"], ["var"], name="var", axes=[-1], keepdims=1),
             n("Add", ["var", "eps"], ["ve"], name="var_eps"), n("Sqrt", ["ve"], ["sd"], name="std"),
             n("Div", ["d", "sd"], ["y"], name="normalize")]
    return make(nodes, [h.make_tensor_value_info("x0", TP.FLOAT, [1, 8, 16]),
                        h.make_tensor_value_info("ids", TP.INT64, [1, 8])],
                [h.make_tensor_value_info("y", TP.FLOAT, [1, 8, 16])], inits, "transformer")


SEED_MODELS: Dict[str, Callable] = {"conv_net": conv_net_model, "shape_ops": shape_ops_model,
                                    "transformer": transformer_model}


def seed_models(seed: int = 0) -> Dict[str, bytes]:
    """The seed ONNX models, serialized (random weights from ``seed``)."""
    return {name: fn(np.random.default_rng([seed, k])).SerializeToString()
            for k, (name, fn) in enumerate(SEED_MODELS.items())}
