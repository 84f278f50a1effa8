"""Arithmetic work of graph calls: the FLOPs a profiler divides by time.

A FLOP is one multiply, add, compare or transcendental on one element, counted the usual way
(a multiply-add is 2). The figures are what the operator needs, not what a schedule executes
(padding, recomputation and the zeros a transposed convolution multiplies are not counted),
so achieved GFLOP/s compares schedules honestly. Ops that only move data count 0.
"""
from __future__ import annotations

import math

from ..loop.intrinsics import PACKED_DOTS

from .ir import Call, Function
from .ops import dims as D
from .ops import get_op
from .ops.registry import Pattern
from .types import TensorType
from .visit import post_order

# per output element, for ops whose work is a small fixed amount per element
_PER_ELEMENT = {"nn.softmax": 5, "nn.log_softmax": 5, "nn.layer_norm": 8, "nn.instance_norm": 8,
                "nn.lp_normalize": 3, "nn.hardmax": 2, "nn.gelu": 8, "nn.mish": 6, "sigmoid": 4,
                "tanh": 6, "erf": 8, "exp": 4, "log": 4}


def _numel(t):
    return D.prod(t.shape) if isinstance(t, TensorType) else 0


def _prod(*factors):
    out = 1
    for f in factors:
        out = D.dim_mul(out, f)
    return out


def call_flops(call: Call):
    """FLOPs of one call of a registered op (0 when the op only moves data); a symbolic dim
    when the shapes are symbolic."""
    op = call.op
    out = _numel(call.type)
    ins = [a.type for a in call.args]
    # a packed dot's operands are words of g values each: g products per word of the contraction
    g = PACKED_DOTS[call.attr("dot")][2] if call.attr("dot", None) else 1
    if op.startswith("nn.conv"):
        x, w = ins[0], ins[1]
        packed = call.attr("weight_block", 0) or op == "nn.conv2d_nchwc"
        dims = w.shape[1:-1] if packed else w.shape[1:]  # packed: (.., block)
        per = D.prod(dims)  # input channels per group x window
        # transposed: every input element is multiplied into a window of each output channel
        base = _numel(x) if op.endswith("_transpose") else out
        return _prod(2 * g, base, per)
    if op in ("nn.dense", "nn.matmul", "nn.matmul_packed", "nn.matmul_nbits", "nn.matmul_nbits_packed"):
        return _prod(2 * g, out, ins[0].shape[-1])
    if op == "nn.recurrence":
        # per gate input of each step (xw's elements): a product by the state, hidden long (rt
        # follows the states: (dirs, [panels,] hidden, ...)), then ~5 for its gate
        hidden = ins[3 if call.attr("cell") == "LSTM" else 2].shape[-2]
        return _prod(_numel(ins[0]), 2 * hidden + 5)
    if op.startswith(("nn.max_pool", "nn.avg_pool", "nn.lp_pool")):
        return _prod(out, math.prod(int(k) for k in call.attr("pool_size")))
    if op.startswith(("nn.global_", "nn.lrn")):
        return _numel(ins[0])
    if op in _PER_ELEMENT:
        return _prod(_PER_ELEMENT[op], out)
    pattern = get_op(op).pattern
    if pattern == Pattern.REDUCTION:
        return _numel(ins[0])
    if pattern in (Pattern.ELEMWISE, Pattern.BROADCAST):
        return 0 if op in ("cast", "copy", "expand", "constant_of_shape") else out
    return 0


def function_flops(fn: Function):
    """FLOPs of a fused group: the sum over its calls."""
    total = 0
    for n in post_order(fn.body):
        if isinstance(n, Call):
            total = D.dim_add(total, call_flops(n))
    return total


def function_dot(fn: Function):
    """The packed dot (``ember.loop.intrinsics.PACKED_DOTS``) a fused group's products run on,
    or None (float32 FMAs): which peak its speed is measured against."""
    for n in post_order(fn.body):
        if isinstance(n, Call) and n.attrs and n.attr("dot", None):
            return n.attr("dot")
    return None


def function_ops(fn: Function) -> list:
    """The ops of a fused group in dataflow order (``["nn.conv2d", "add", "nn.relu"]``)."""
    return [n.op for n in post_order(fn.body) if isinstance(n, Call)]


__all__ = ["call_flops", "function_dot", "function_flops", "function_ops"]
