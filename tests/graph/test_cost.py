"""FLOPs of graph calls: the figures a profiler divides by time."""
from ember.graph import Call, Var, const
from ember.graph.cost import call_flops, function_flops
from ember.graph.infer import infer_types
from ember.graph.ir import Function
from ember.graph.types import TensorType

import numpy as np


def typed(op, *args, **attrs):
    return infer_types(Function([a for a in args if isinstance(a, Var)], Call(op, args, attrs))).body


def test_conv_counts_two_flops_per_multiply_add():
    x = Var("x", TensorType((1, 4, 10, 10), "float32"))
    w = const(np.zeros((6, 2, 3, 3), "float32"))  # two groups of 2 input channels
    c = typed("nn.conv2d", x, w, strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=2)
    assert call_flops(c) == 2 * (1 * 6 * 10 * 10) * (2 * 3 * 3)


def test_dense_pool_elementwise_and_data_movement():
    x = Var("x", TensorType((4, 32), "float32"))
    d = typed("nn.dense", x, const(np.zeros((16, 32), "float32")))
    assert call_flops(d) == 2 * 4 * 16 * 32
    y = Var("y", TensorType((1, 2, 8, 8), "float32"))
    p = typed("nn.max_pool2d", y, pool_size=(2, 2), strides=(2, 2), padding=(0, 0, 0, 0), dilation=(1, 1))
    assert call_flops(p) == 1 * 2 * 4 * 4 * 4
    assert call_flops(typed("nn.relu", y)) == 128
    assert call_flops(typed("transpose", y, axes=(0, 2, 3, 1))) == 0
    f = infer_types(Function([y], Call("nn.relu", [Call("exp", [y])])))
    assert function_flops(f) == 128 + 4 * 128


def test_a_recurrence_counts_each_steps_product_and_gates():
    from ember.frontend.recurrence import SIGMOID, TANH

    xw = Var("xw", TensorType((10, 2, 2 * 288), "float32"))  # a bidirectional GRU of 96: 288 gate inputs
    h = Var("h", TensorType((2, 2, 96), "float32"))
    r = typed("nn.recurrence", xw, h, const(np.zeros((2, 96, 288), "float32")), const(np.zeros((2, 288), "float32")),
              cell="GRU", acts=(SIGMOID, TANH) * 2, direction="bidirectional")
    assert call_flops(r) == 10 * 2 * 2 * 288 * (2 * 96 + 5)
    # an LSTM's weights in panels: the same work
    xl, hl = Var("xw", TensorType((7, 1, 512), "float32")), Var("h", TensorType((1, 1, 128), "float32"))
    c = Var("c", TensorType((1, 1, 128), "float32"))
    r = typed("nn.recurrence", xl, hl, c, const(np.zeros((1, 16, 128, 32), "float32")), const(np.zeros((1, 512), "float32")),
              cell="LSTM", acts=(SIGMOID, TANH, TANH))
    assert call_flops(r) == 7 * 512 * (2 * 128 + 5)
