"""Converters of the ops state-space and linear-attention models bring (opset 27):
CausalConvWithState, the short causal depthwise convolution Mamba and Gated DeltaNet run
before their recurrence, with its carried state for token-by-token decoding."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...graph import Constant
from .table import converter


@converter("CausalConvWithState", since=27)
def _causal_conv_with_state(node):
    """``[past_state (or zeros), input]`` along the length, convolved per channel by its k taps
    with no padding (each output sees only its own and earlier positions), SiLU if asked; the
    present state is the last k - 1 positions of that concatenation."""
    x, w = node.input(0), node.input(1)
    act = node.attr("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise UnsupportedOpError(f"activation {act!r} is not one of 'none', 'silu', 'swish'")
    if x.type.ndim != 3 or w.type.ndim != 3:
        raise ShapeError(f"input and weight must be rank 3 (batch, channels, length), got {x.type} and {w.type}")
    b, c, _ = x.type.shape
    k = w.type.shape[2]
    if not isinstance(k, int):
        raise ShapeError(f"the kernel's length must be static, got {k}")
    if node.has(3):
        past = node.input(3)
    else:
        zero = Constant(np.zeros((1, 1, 1), np.dtype(x.type.dtype) if x.type.dtype != "bfloat16" else np.float32))
        zero = zero if x.type.dtype != "bfloat16" else node.call("cast", zero, dtype="bfloat16")
        past = node.call("expand", zero, shape=(b, c, k - 1))
    padded = node.call("concat", past, x, axis=2) if k > 1 or node.has(3) else x
    groups = w.type.shape[0]  # (the channels, as the weight has them: static)
    if not isinstance(groups, int):
        raise ShapeError(f"the weight's channels must be static, got {w.type}")
    y = node.call("nn.conv1d", padded, w, groups=groups, strides=(1,), dilation=(1,), padding=(0, 0))
    if node.has(2):
        y = node.call("nn.bias_add", y, node.input(2), axis=1)
    if act != "none":
        yf = y if y.type.dtype == "float32" else node.call("cast", y, dtype="float32")
        yf = node.call("multiply", yf, node.call("sigmoid", yf))
        y = yf if y.type.dtype == "float32" else node.call("cast", yf, dtype=y.type.dtype)
    state = (node.call("strided_slice", padded, begin=(-(k - 1),), end=(2 ** 62,), axes=(2,)) if k > 1
             else node.call("strided_slice", padded, begin=(0,), end=(0,), axes=(2,)))
    return [y, state]
