"""Converters of ONNX neural-network ops: Conv, ConvTranspose, Gemm, MatMul, Einsum, the
normalizations, pooling (and MaxUnpool) and Softmax/LogSoftmax/Hardmax."""
from __future__ import annotations

import math

from ...errors import ShapeError, UnsupportedOpError
from ...graph.ops import dims as D
from .table import converter

_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _spatial_name(n: int) -> str:
    if n not in (1, 2, 3):
        raise UnsupportedOpError(f"{n} spatial dimensions are not supported (1 to 3 are)")
    return f"{n}d"


def _check_window(attrs, opset, proto):
    if attrs.get("auto_pad", "NOTSET") not in _AUTO_PADS:
        return f"auto_pad {attrs['auto_pad']!r} is not one of {', '.join(_AUTO_PADS)}"
    return None


def window_padding(node, sizes, kernel, strides, dilations) -> tuple:
    """ONNX ``pads`` resolved from ``auto_pad``: all begins, then all ends."""
    n = len(kernel)
    auto = node.attr("auto_pad", "NOTSET")
    if auto == "VALID":
        return (0,) * (2 * n)
    if auto == "NOTSET":
        pads = tuple(node.attr("pads", (0,) * (2 * n)))
        if len(pads) != 2 * n:
            raise ShapeError(f"pads {pads} must have {2 * n} values")
        return pads
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        span = (k - 1) * d + 1
        if isinstance(size, int):
            out = -(-size // s)
            total = max(0, (out - 1) * s + span - size)
        elif s == 1:
            total = span - 1  # output = input whatever the size
        else:
            raise UnsupportedOpError(f"auto_pad {auto} with stride {s} needs a static input size, got {size}")
        small = total // 2
        begins.append(small if auto == "SAME_UPPER" else total - small)
        ends.append(total - begins[-1])
    return tuple(begins + ends)


def _window_attrs(node, x_type, kernel):
    n = len(kernel)
    strides = tuple(node.attr("strides", (1,) * n))
    dilations = tuple(node.attr("dilations", (1,) * n))
    pads = window_padding(node, x_type.shape[2:], kernel, strides, dilations)
    return {"strides": strides, "dilation": dilations, "padding": pads}


# -- convolution ----------------------------------------------------------------------------------

@converter("Conv", check=_check_window)
def _conv(node):
    x, w = node.input(0), node.input(1)
    kernel = tuple(node.attr("kernel_shape", w.type.shape[2:]))
    n = len(kernel)
    out = node.call(f"nn.conv{_spatial_name(n)}", x, w, groups=node.attr("group", 1),
                    **_window_attrs(node, x.type, kernel))
    if node.has(2):
        out = node.call("nn.bias_add", out, node.input(2), axis=1)
    return [out]


@converter("ConvTranspose", check=_check_window)
def _conv_transpose(node):
    x, w = node.input(0), node.input(1)
    kernel = tuple(node.attr("kernel_shape", w.type.shape[2:]))
    n = len(kernel)
    strides = tuple(node.attr("strides", (1,) * n))
    dilations = tuple(node.attr("dilations", (1,) * n))
    out_pad = tuple(node.attr("output_padding", (0,) * n))
    auto = node.attr("auto_pad", "NOTSET")
    target = node.attr("output_shape")
    if target is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        sizes = x.type.shape[2:]
        if not all(isinstance(s, int) for s in sizes):
            raise UnsupportedOpError(f"output_shape/auto_pad need a static input size, got {x.type}")
        if target is None:
            target = [s * st for s, st in zip(sizes, strides)]
        target = tuple(target)[-n:]
        begins, ends = [], []
        for i in range(n):
            total = strides[i] * (sizes[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - target[i]
            if total < 0:  # the output is larger than the full result: the rest is output padding
                out_pad = out_pad[:i] + (out_pad[i] - total,) + out_pad[i + 1:]
                total = 0
            small = total // 2  # the ONNX spec: SAME_UPPER puts the odd pad at the end, all else at the start
            begins.append(small if auto == "SAME_UPPER" else total - small)
            ends.append(total - begins[-1])
        pads = tuple(begins + ends)
    elif auto == "VALID":
        pads = (0,) * (2 * n)
    else:
        pads = tuple(node.attr("pads", (0,) * (2 * n)))
    out = node.call(f"nn.conv{_spatial_name(n)}_transpose", x, w, groups=node.attr("group", 1), strides=strides,
                    dilation=dilations, padding=pads, output_padding=out_pad)
    if node.has(2):
        out = node.call("nn.bias_add", out, node.input(2), axis=1)
    return [out]


@converter("Col2Im", since=18, const_inputs=(1, 2))
def _col2im(node):
    """Blocks (N, C * prod(block), L) summed back into an image (N, C, *image_shape) -- torch's
    ``fold`` -- as the transposed convolution it is: C groups, each scattering its prod(block)
    channels by a one-hot weight (one tap per channel), stride, dilation and pads as given."""
    import numpy as np

    from ...graph import Constant

    x = node.input(0)
    image = node.ints(1, "image shape")
    block = node.ints(2, "block shape")
    n = len(block)
    if len(image) != n:
        raise ShapeError(f"image_shape {image} and block_shape {block} have different ranks")
    strides = tuple(node.attr("strides", (1,) * n))
    dilations = tuple(node.attr("dilations", (1,) * n))
    pads = tuple(node.attr("pads", (0,) * (2 * n)))
    taps = int(np.prod(block))
    cols = x.type.shape[1]
    if not isinstance(cols, int) or cols % taps:
        raise ShapeError(f"the input's {cols} channels must be a static multiple of the block's {taps} elements")
    channels = cols // taps
    counts = [(image[i] + pads[i] + pads[n + i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(n)]
    if min(counts) < 1:
        raise ShapeError(f"no block of {block} fits the image {image} (pads {pads}, strides {strides})")
    reach = [(counts[i] - 1) * strides[i] + dilations[i] * (block[i] - 1) + 1 - pads[i] - pads[n + i] for i in range(n)]
    dtype = x.type.dtype
    weight = np.zeros((cols, 1) + block, dtype=np.dtype(dtype))
    for c in range(channels):
        for t in range(taps):
            weight[(c * taps + t, 0) + np.unravel_index(t, block)] = 1
    grid = node.call("reshape", x, newshape=(0, cols) + tuple(counts))
    out = node.call(f"nn.conv{_spatial_name(n)}_transpose", grid, Constant(weight), groups=channels, strides=strides,
                    dilation=dilations, padding=pads, output_padding=tuple(image[i] - reach[i] for i in range(n)))
    return [out]


# -- gemm, matmul, einsum -------------------------------------------------------------------------

@converter("Gemm")
def _gemm(node):
    a, b = node.input(0), node.input(1)
    if node.attr("transA", 0):
        a = node.call("transpose", a, axes=(1, 0))
    # one canonical op: dense takes the weight as (units, K); transB=0 gets a transpose that
    # constant folding removes when B is a weight
    if not node.attr("transB", 0):
        b = node.call("transpose", b, axes=(1, 0))
    out = node.call("nn.dense", a, b)
    dtype = out.type.dtype
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if alpha != 1.0:
        out = node.call("multiply", out, node.const_like(alpha, dtype))
    if node.has(2) and beta != 0.0:
        c = node.input(2)
        if beta != 1.0:
            c = node.call("multiply", c, node.const_like(beta, dtype))
        out = node.call("add", out, c)
    return [out]


@converter("MatMul")
def _matmul(node):
    a, b = node.input(0), node.input(1)
    if b.type.ndim == 2 and a.type.ndim > 2:
        # (..., M, K) @ (K, N) is one (rows, K) @ (K, N) product: a batch of small products
        # (nn.MultiheadAttention's (seq, 1, E) projections: M = 1) would run as matrix-vector
        # products
        lead, k = tuple(a.type.shape[:-1]), a.type.shape[-1]
        flat = node.call("reshape", a, newshape=(D.prod(lead), k))
        y = node.call("nn.matmul", flat, b)
        return [node.call("reshape", y, newshape=lead + (b.type.shape[1],))]
    return [node.call("nn.matmul", a, b)]


@converter("Einsum")
def _einsum(node):
    return [node.call("einsum", *[node.input(i) for i in range(len(node.inputs))], equation=node.attr("equation"))]


# -- normalization --------------------------------------------------------------------------------

def _check_bn(attrs, opset, proto):
    if opset < 9 and attrs.get("spatial", 1) == 0:
        return "BatchNormalization with spatial=0 is not supported"
    if attrs.get("training_mode", 0):
        return None  # (the batch's statistics: _batch_norm_training)
    if len([o for o in proto.output[1:] if o]) and opset >= 9:
        return "BatchNormalization's running statistics outputs (training before opset 14) are not supported"
    return None


@converter("BatchNormalization", check=_check_bn)
def _batch_norm(node):
    args = [node.input(i) for i in range(5)]
    if node.attr("training_mode", 0):
        return _batch_norm_training(node, *args)
    return [node.call("nn.batch_norm", *args, axis=1, epsilon=node.attr("epsilon", 1e-5))]


def _batch_norm_training(node, x, scale, bias, mean, var) -> list:
    """Training mode (opset 14): normalized by the batch's mean and (population) variance per
    channel; the running statistics blend the given ones with the batch's by ``momentum``."""
    axes = tuple(a for a in range(x.type.ndim) if a != 1)
    batch_mean = node.call("mean", x, axis=axes, keepdims=True)
    centered = node.call("subtract", x, batch_mean)
    batch_var = node.call("mean", node.call("multiply", centered, centered), axis=axes, keepdims=True)
    batch_mean, batch_var = (node.call("squeeze", t, axis=axes) for t in (batch_mean, batch_var))
    y = node.call("nn.batch_norm", x, scale, bias, batch_mean, batch_var, axis=1, epsilon=node.attr("epsilon", 1e-5))
    momentum = float(node.attr("momentum", 0.9))

    def blend(running, batch):
        keep, take = (node.const_like(v, running.type.dtype) for v in (momentum, 1.0 - momentum))
        return node.call("add", node.call("multiply", running, keep), node.call("multiply", batch, take))
    return [y, blend(mean, batch_mean), blend(var, batch_var)]


@converter("InstanceNormalization")
def _instance_norm(node):
    return [node.call("nn.instance_norm", node.input(0), node.input(1), node.input(2),
                      epsilon=node.attr("epsilon", 1e-5))]


@converter("LRN")
def _lrn(node):
    return [node.call("nn.lrn", node.input(0), size=node.attr("size"), alpha=node.attr("alpha", 1e-4),
                      beta=node.attr("beta", 0.75), bias=node.attr("bias", 1.0), axis=1)]


@converter("LpNormalization")
def _lp_norm(node):
    return [node.call("nn.lp_normalize", node.input(0), axis=node.attr("axis", -1), p=node.attr("p", 2))]


@converter("LayerNormalization")
def _layer_norm(node):
    x = node.input(0)
    axis, eps = node.attr("axis", -1), node.attr("epsilon", 1e-5)
    args = [x, node.input(1)] + ([node.input(2)] if node.has(2) else [])
    outs = [node.call("nn.layer_norm", *args, axis=axis, epsilon=eps)]
    if node.wants(1) or node.wants(2):
        # the statistics, in the stash type (float32 by default), over the normalized axes
        axes = tuple(range(axis % x.type.ndim, x.type.ndim))
        stash = "float32" if node.attr("stash_type", 1) == 1 else x.type.dtype
        xs = x if x.type.dtype == stash else node.call("cast", x, dtype=stash)
        mean = node.call("mean", xs, axis=axes, keepdims=True)
        centered = node.call("subtract", xs, mean)
        var = node.call("mean", node.call("multiply", centered, centered), axis=axes, keepdims=True)
        inv_std = node.call("rsqrt", node.call("add", var, node.const_like(eps, stash)))
        outs += [mean, inv_std]
    return outs


def _stash(node, x):
    """``x`` in the stash type that statistics are computed in (float32 unless said otherwise)."""
    stash = "float32" if node.attr("stash_type", 1) == 1 else x.type.dtype
    return x if x.type.dtype == stash else node.call("cast", x, dtype=stash)


@converter("RMSNormalization")
def _rms_norm(node):
    # y = x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale
    x = node.input(0)
    axes = tuple(range(node.attr("axis", -1) % x.type.ndim, x.type.ndim))
    xs = _stash(node, x)
    ms = node.call("mean", node.call("multiply", xs, xs), axis=axes, keepdims=True)
    inv = node.call("rsqrt", node.call("add", ms, node.const_like(node.attr("epsilon", 1e-5), xs.type.dtype)))
    y = node.call("multiply", xs, inv)
    if y.type.dtype != x.type.dtype:
        y = node.call("cast", y, dtype=x.type.dtype)
    return [node.call("multiply", y, node.input(1))]


@converter("GroupNormalization")
def _group_norm(node):
    # statistics per (sample, group) over the group's channels and all spatial positions
    x = node.input(0)
    shape = x.type.shape
    groups = node.attr("num_groups")
    xs = _stash(node, x)
    grouped = node.call("reshape", xs, newshape=(shape[0], groups, -1))
    mean = node.call("mean", grouped, axis=(2,), keepdims=True)
    centered = node.call("subtract", grouped, mean)
    var = node.call("mean", node.call("multiply", centered, centered), axis=(2,), keepdims=True)
    eps = node.const_like(node.attr("epsilon", 1e-5), xs.type.dtype)
    normed = node.call("multiply", centered, node.call("rsqrt", node.call("add", var, eps)))
    y = node.call("reshape", normed, newshape=shape)
    if y.type.dtype != x.type.dtype:
        y = node.call("cast", y, dtype=x.type.dtype)
    scale, bias = node.input(1), node.input(2)
    if node.opset < 21:  # scale and bias per group: repeat each over the group's channels
        per = D.dim_div_exact(shape[1], groups)
        if per is None:
            raise ShapeError(f"{shape[1]} channels do not divide into {groups} groups")
        scale, bias = (node.call("reshape", node.call("tile", node.call("unsqueeze", p, axes=(1,)), reps=(1, per)),
                                 newshape=(shape[1],)) for p in (scale, bias))
    trailing = (1,) * (len(shape) - 2)  # per channel: broadcast over the spatial dims
    scale, bias = (node.call("reshape", p, newshape=(shape[1],) + trailing) for p in (scale, bias))
    return [node.call("add", node.call("multiply", y, scale), bias)]


@converter("MeanVarianceNormalization")
def _mvn(node):
    # ONNX's definition: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)
    x = node.input(0)
    axes = tuple(node.attr("axes", (0, 2, 3)))
    dtype = x.type.dtype
    mean = node.call("mean", x, axis=axes, keepdims=True)
    mean_sq = node.call("mean", node.call("multiply", x, x), axis=axes, keepdims=True)
    std = node.call("sqrt", node.call("subtract", mean_sq, node.call("multiply", mean, mean)))
    denom = node.call("add", std, node.const_like(1e-9, dtype))
    return [node.call("divide", node.call("subtract", x, mean), denom)]


def _softmax(op):
    def convert(node):
        x = node.input(0)
        nd = x.type.ndim
        if node.opset >= 13:
            return [node.call(op, x, axis=node.attr("axis", -1))]
        # before opset 13 the input is viewed as 2-D at axis and normalized over all trailing dims
        axis = node.attr("axis", 1)
        axis = axis + nd if axis < 0 else axis
        if axis == nd - 1:
            return [node.call(op, x, axis=-1)]
        flat = node.call("flatten", x, axis=axis)
        return [node.call("reshape", node.call(op, flat, axis=1), newshape=x.type.shape)]
    return convert


converter("Softmax")(_softmax("nn.softmax"))
converter("LogSoftmax")(_softmax("nn.log_softmax"))
converter("Hardmax")(_softmax("nn.hardmax"))


# -- pooling ------------------------------------------------------------------------------------

def _check_pool(attrs, opset, proto):
    return _check_window(attrs, opset, proto)


def _pool(op):
    def convert(node):
        x = node.input(0)
        kernel = tuple(node.attr("kernel_shape"))
        attrs = _window_attrs(node, x.type, kernel)
        extra = {"ceil_mode": bool(node.attr("ceil_mode", 0))}
        if op == "avg":
            extra["count_include_pad"] = bool(node.attr("count_include_pad", 0))
        if op == "lp":
            extra["p"] = int(node.attr("p", 2))
        y = node.call(f"nn.{op}_pool{_spatial_name(len(kernel))}", x, pool_size=kernel, **attrs, **extra)
        if op == "max" and node.wants(1):  # (where each maximum lies)
            from .pool_indices import max_pool_indices

            return [y, max_pool_indices(node, x, y, kernel, attrs["strides"], attrs["dilation"], attrs["padding"],
                                        node.attr("storage_order", 0))]
        return [y]
    return convert


converter("MaxPool", check=_check_pool)(_pool("max"))
converter("AveragePool", check=_check_pool)(_pool("avg"))
converter("LpPool", check=_check_pool)(_pool("lp"))


def _global_pool(op):
    def convert(node):
        x = node.input(0)
        return [node.call(f"nn.global_{op}_pool{_spatial_name(x.type.ndim - 2)}", x)]
    return convert


converter("GlobalAveragePool")(_global_pool("avg"))
converter("GlobalMaxPool")(_global_pool("max"))


@converter("GlobalLpPool")
def _global_lp_pool(node):
    """The p-norm over each channel's plane: ``(sum |x|^p) ^ (1/p)``, kept as 1x1."""
    x = node.input(0)
    p = node.attr("p", 2)
    axes = tuple(range(2, x.type.ndim))
    if p in (1, 2):
        return [node.call("l1_norm" if p == 1 else "l2_norm", x, axis=axes, keepdims=True)]
    powered = node.call("power", node.call("abs", x), node.const_like(float(p), x.type.dtype))
    return [node.call("power", node.call("sum", powered, axis=axes, keepdims=True),
                      node.const_like(1.0 / p, x.type.dtype))]

__all__ = ["window_padding"]


@converter("MaxUnpool", since=9, const_inputs=(2,))
def _max_unpool(node):
    """MaxPool's values written back where its indices say (flat indices into the unpooled
    tensor), zeros elsewhere; an ``output_shape`` larger than the unpooled one pads at the end."""
    x, idx = node.input(0), node.input(1)
    kernel = node.attr("kernel_shape")
    nd = len(kernel)
    strides = node.attr("strides") or [1] * nd
    pads = node.attr("pads") or [0] * (2 * nd)
    shape = list(x.type.shape[:2]) + [(x.type.shape[2 + d] - 1) * strides[d] - pads[d] - pads[nd + d] + kernel[d]
                                      for d in range(nd)]
    if not all(isinstance(d, int) for d in shape):
        raise ShapeError(f"MaxUnpool needs static sizes, got {x.type}")
    flat = node.call("constant_of_shape", shape=(math.prod(shape),), value=0.0, dtype=x.type.dtype)
    y = node.call("scatter_elements", flat, node.call("reshape", node.call("cast", idx, dtype="int64"), newshape=(-1,)),
                  node.call("reshape", x, newshape=(-1,)), axis=0)
    y = node.call("reshape", y, newshape=tuple(shape))
    if node.has(2):
        want = node.ints(2, "output_shape")
        if len(want) != len(shape) or any(w < s for w, s in zip(want, shape)):
            raise ShapeError(f"output_shape {want} is smaller than the unpooled shape {tuple(shape)}")
        if tuple(want) != tuple(shape):
            y = node.call("pad", y, pad_width=tuple([0] * len(shape) + [w - s for w, s in zip(want, shape)]),
                          mode="constant", pad_value=0.0)
    return [y]
