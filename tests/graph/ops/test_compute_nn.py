"""The NN op computes (convolutions, products, pools, normalizations) and their default
schedules, against numpy references.

Every case runs the graph compiler's contract for a fused kernel (:func:`fused_kernel`):
placeholders -> the op's compute (the *anchor*) -> an optional elementwise epilogue of the
anchor's shape (bias + relu, a residual add, an affine map), whose intermediate stages are
inlined -> the op's registered ``llvm`` schedule ``fn(s, anchor, out, target)`` (or the
naive schedule for a case marked so, which checks the compute alone). All kernels are built
into one module (one LLVM run) shared by the tests.
"""
import itertools
import math

import numpy as np
import pytest

import ember

from .conftest import build_all
import ember.graph.ops.compute  # noqa: F401  (registers the computes and the schedules)
from ember.errors import UnsupportedOpError
from ember.graph import TensorType
from ember.graph.ops import get_op, infer_type
from ember.graph.types import Dim
from ember.loop import compute as te
from ember.loop import dtype as dt
from ember.loop.expr import max_, min_
from ember.loop.schedule import Schedule

RNG = np.random.default_rng(11)
F = "float32"

# -- numpy references -------------------------------------------------------------------------


def conv_ref(x, w, strides=None, padding=None, dilation=None, groups=1):
    """Grouped cross-correlation, ONNX conventions (padding: all begins, then all ends)."""
    n = x.ndim - 2
    strides, dilation = strides or (1,) * n, dilation or (1,) * n
    padding = padding or (0,) * (2 * n)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(padding[i], padding[n + i]) for i in range(n)])
    f, cg, *k = w.shape
    out_sp = [(xp.shape[2 + i] - dilation[i] * (k[i] - 1) - 1) // strides[i] + 1 for i in range(n)]
    out = np.zeros((x.shape[0], f, *out_sp))
    fg = f // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for tap in itertools.product(*[range(kk) for kk in k]):
            sl = tuple(slice(tap[i] * dilation[i], tap[i] * dilation[i] + strides[i] * (out_sp[i] - 1) + 1,
                             strides[i]) for i in range(n))
            wt = w[g * fg:(g + 1) * fg][(slice(None), slice(None)) + tap].astype(np.float64)
            out[:, g * fg:(g + 1) * fg] += np.einsum("nc...,fc->nf...", xs[(slice(None), slice(None)) + sl], wt)
    return out


def pack_ref(w, block):
    """nn.pack_conv_weight: (F, C, k...) -> (ceil(F / block), C, k..., block), zeros past F."""
    f = w.shape[0]
    fp = -(-f // block) * block
    wp = np.zeros((fp,) + w.shape[1:], w.dtype)
    wp[:f] = w
    return np.moveaxis(wp.reshape((fp // block, block) + w.shape[1:]), 1, -1)


def unpack_ref(wp, channels):
    return np.moveaxis(wp, -1, 1).reshape((-1,) + wp.shape[1:-1])[:channels]


def block_ref(x, b):
    """N C H W -> N C/b H W b (the blocked channel layout)."""
    n, c, *sp = x.shape
    return np.moveaxis(x.reshape((n, c // b, b, *sp)), 2, -1)


def unblock_ref(x):
    return np.moveaxis(x, -1, 2).reshape((x.shape[0], -1) + x.shape[2:-1])


def per_block_ref(x, w, **kw):
    """A grouped nn.conv2d_nchwc: blocked x (N, C/b, H, W, b), weights (C/b, g, kh, kw, b);
    each output block the conv of its own input block in groups of g channels (depthwise when
    g is 1, the whole block when it is b)."""
    outs = []
    for bo in range(x.shape[1]):
        xb = np.moveaxis(x[:, bo], -1, 1)
        wb = np.moveaxis(w[bo], -1, 0)  # (b out, 1 or b in, kh, kw)
        outs.append(conv_ref(xb, wb, groups=xb.shape[1] // wb.shape[1], **kw))
    return np.stack([np.moveaxis(o, 1, -1) for o in outs], axis=1)


def unpack_matmul_ref(bp, n):
    """nn.pack_matmul_weight's panels (N/nr, K, nr) back to (K, N)."""
    return np.moveaxis(bp, 1, 0).reshape(bp.shape[1], -1)[:, :n]


def conv_transpose_ref(x, w, strides=None, padding=None, dilation=None, output_padding=None, groups=1):
    """Scatter definition: out[n, f, i*s - pad + k*d] += x[n, c, i] * w[c, f, k]."""
    n = x.ndim - 2
    strides, dilation = strides or (1,) * n, dilation or (1,) * n
    padding, outpad = padding or (0,) * (2 * n), output_padding or (0,) * n
    c, fg, *k = w.shape
    size = x.shape[2:]
    full = [(size[i] - 1) * strides[i] + dilation[i] * (k[i] - 1) + 1 + outpad[i] for i in range(n)]
    out = np.zeros((x.shape[0], fg * groups, *full))
    cg = c // groups
    for g in range(groups):
        for tap in itertools.product(*[range(kk) for kk in k]):
            sl = tuple(slice(tap[i] * dilation[i], tap[i] * dilation[i] + strides[i] * (size[i] - 1) + 1,
                             strides[i]) for i in range(n))
            wt = w[g * cg:(g + 1) * cg][(slice(None), slice(None)) + tap].astype(np.float64)
            out[(slice(None), slice(g * fg, (g + 1) * fg)) + sl] += np.einsum(
                "nc...,cf->nf...", x[:, g * cg:(g + 1) * cg].astype(np.float64), wt)
    return out[(slice(None), slice(None)) + tuple(slice(padding[i], full[i] - padding[n + i]) for i in range(n))]


def _windows(size, k, s, d, begin, end, ceil_mode):
    span = size + begin + end - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + begin:  # the last window would start in the end padding
        out -= 1
    return out


def pool_ref(x, kind, pool_size, strides=None, padding=None, dilation=None, ceil_mode=False,
             count_include_pad=False, p=2):
    """Window by window: the taps inside the input (max, sum |x|^p); an average divides by the
    taps inside the input, or inside the padded input with count_include_pad."""
    n = x.ndim - 2
    strides, dilation = strides or (1,) * n, dilation or (1,) * n
    padding = padding or (0,) * (2 * n)
    size = x.shape[2:]
    outs = [_windows(size[i], pool_size[i], strides[i], dilation[i], padding[i], padding[n + i], ceil_mode)
            for i in range(n)]
    out = np.zeros(x.shape[:2] + tuple(outs))
    for o in itertools.product(*[range(v) for v in outs]):
        vals, padded_taps = [], 0
        for tap in itertools.product(*[range(v) for v in pool_size]):
            pos = [o[i] * strides[i] - padding[i] + tap[i] * dilation[i] for i in range(n)]
            if all(-padding[i] <= pos[i] < size[i] + padding[n + i] for i in range(n)):
                padded_taps += 1
            if all(0 <= pos[i] < size[i] for i in range(n)):
                vals.append(x[(slice(None), slice(None)) + tuple(pos)].astype(np.float64))
        v = np.stack(vals)
        idx = (slice(None), slice(None)) + o
        if kind == "max":
            out[idx] = v.max(0)
        elif kind == "avg":
            out[idx] = v.sum(0) / (padded_taps if count_include_pad else len(vals))
        else:
            out[idx] = (np.abs(v) ** p).sum(0) ** (1 / p)
    return out.astype(x.dtype) if kind == "max" else out


def softmax_ref(x, axis=-1, log=False):
    x = x.astype(np.float64)
    m = x.max(axis, keepdims=True)
    s = np.exp(x - m).sum(axis, keepdims=True)
    return x - m - np.log(s) if log else np.exp(x - m) / s


def normalize_ref(x, axes, eps, scale, shift):
    x = x.astype(np.float64)
    mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + shift


def lrn_ref(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    x = x.astype(np.float64)
    sq = np.zeros_like(x)
    c = x.shape[1]
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c - 1, ch + math.ceil((size - 1) / 2))
        sq[:, ch] = (x[:, lo:hi + 1] ** 2).sum(1)
    return x / (bias + alpha / size * sq) ** beta


def _channel(v, ndim, axis=1):
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


# -- the compiler's contract ------------------------------------------------------------------

def _epilogue(kind: str, anchor: te.Tensor):
    """An elementwise epilogue of the anchor's shape: ``affine`` (anchor * 2 + 1),
    ``bias_relu`` / ``bias_relu_last`` (relu(anchor + bias) along the channel / the last axis),
    ``residual`` (min(relu(anchor + bias[c] + residual), 6): three inlined stages). Returns
    (extra placeholders, the stages to inline, out, numpy fn(reference, *extras))."""
    shape = tuple(d.value for d in anchor.shape)
    if kind == "affine":
        out = te.compute(anchor.shape, lambda *i: anchor[i] * 2.0 + 1.0, "epi")
        return [], [], out, lambda r: r * 2 + 1
    axis = len(shape) - 1 if kind == "bias_relu_last" else 1
    bias = te.placeholder((shape[axis],), anchor.dtype, "bias")
    t = te.compute(anchor.shape, lambda *i: anchor[i] + bias[i[axis]], "epi_bias")
    if kind in ("bias_relu", "bias_relu_last"):
        out = te.compute(anchor.shape, lambda *i: max_(t[i], 0.0), "epi_relu")
        return [bias], [t], out, lambda r, b: np.maximum(r + _channel(b, r.ndim, axis), 0)
    res = te.placeholder(anchor.shape, anchor.dtype, "residual")
    u = te.compute(anchor.shape, lambda *i: t[i] + res[i], "epi_res")
    v = te.compute(anchor.shape, lambda *i: max_(u[i], 0.0), "epi_relu")
    out = te.compute(anchor.shape, lambda *i: min_(v[i], 6.0), "epi_clip")
    return [bias, res], [t, u, v], out, lambda r, b, q: np.clip(r + _channel(b, r.ndim, axis) + q, 0, 6)


def fused_kernel(op: str, attrs: dict, types: list, epilogue=None, schedule: bool = True):
    """Build one fused kernel the way the graph compiler does; returns
    (schedule, args, anchor, out, extra inputs, numpy epilogue)."""
    out_type = infer_type(op, types, attrs)
    xs = [te.placeholder(tuple(d.name if isinstance(d, Dim) else d for d in t.shape), t.dtype, f"x{i}")
          for i, t in enumerate(types)]
    anchor = get_op(op).compute(attrs, xs, out_type)
    assert anchor.dtype == out_type.dtype
    # static dims agree; a symbolic one is the compute's expression of its input's sizes
    assert [getattr(d, "value", None) for d in anchor.shape] == \
        [None if isinstance(d, Dim) else d for d in out_type.shape]
    extra, inner, out, post = [], [], anchor, None
    if epilogue is not None:
        extra, inner, out, post = _epilogue(epilogue, anchor)
    s = Schedule(out)
    for t in inner:
        s[t].compute_inline()
    fn = get_op(op).schedule.get("llvm")
    if schedule and fn is not None:
        fn(s, anchor, out, None)
    return s, xs + extra + [out], anchor, out, extra, post


# -- cases: (op, attrs, [input shapes], reference(*arrays), epilogue, tolerance[, schedule]) -----

CASES = [
    # conv2d: groups, depthwise, dilation, stride 2, asymmetric padding
    ("nn.conv2d", {"padding": (1, 1, 1, 1)}, [(2, 5, 9, 10), (7, 5, 3, 3)],
     lambda x, w: conv_ref(x, w, padding=(1, 1, 1, 1)), "bias_relu", 1e-4),
    ("nn.conv2d", {"strides": (2, 2), "padding": (0, 1, 2, 1)}, [(1, 4, 11, 13), (6, 4, 3, 3)],
     lambda x, w: conv_ref(x, w, (2, 2), (0, 1, 2, 1)), None, 1e-4),
    ("nn.conv2d", {"groups": 3, "dilation": (2, 1), "padding": (2, 1, 2, 1)}, [(1, 6, 10, 9), (9, 2, 3, 3)],
     lambda x, w: conv_ref(x, w, None, (2, 1, 2, 1), (2, 1), 3), "residual", 1e-4),
    ("nn.conv2d", {"groups": 8, "padding": (1, 1, 1, 1), "strides": (2, 1)}, [(2, 8, 9, 12), (8, 1, 3, 3)],
     lambda x, w: conv_ref(x, w, (2, 1), (1, 1, 1, 1), None, 8), "bias_relu", 1e-4),  # depthwise
    ("nn.conv2d", {"groups": 4}, [(1, 4, 6, 7), (8, 1, 1, 1)],
     lambda x, w: conv_ref(x, w, groups=4), None, 1e-4),  # depthwise, channel multiplier 2
    ("nn.conv2d", {}, [(1, 16, 7, 7), (20, 16, 1, 1)], conv_ref, "bias_relu", 1e-4),
    ("nn.conv2d", {"groups": 2, "strides": (2, 2), "padding": (1, 0, 0, 1)}, [(1, 4, 8, 8), (6, 2, 2, 3)],
     lambda x, w: conv_ref(x, w, (2, 2), (1, 0, 0, 1), None, 2), None, 1e-4, False),  # the compute alone
    # weights packed at compile time (nn.pack_conv_weight; a padded last block of channels)
    ("nn.pack_conv_weight", {"block": 4}, [(7, 5, 3, 3)], lambda w: pack_ref(w, 4), None, 0),
    ("nn.conv2d", {"padding": (1, 1, 1, 1), "weight_block": 6, "channels": 7}, [(2, 5, 9, 10), (2, 5, 3, 3, 6)],
     lambda x, w: conv_ref(x, unpack_ref(w, 7), padding=(1, 1, 1, 1)), "bias_relu", 1e-4),
    ("nn.conv2d", {"groups": 3, "strides": (2, 2), "weight_block": 4, "channels": 9}, [(1, 6, 10, 9), (3, 2, 1, 1, 4)],
     lambda x, w: conv_ref(x, unpack_ref(w, 9), (2, 2), groups=3), "residual", 1e-4),
    # the blocked channel layout (nn.conv2d_nchwc): plain or blocked input, the row schedule
    # and (at most 64 output positions) the plane schedule, whose input channels run in chunks
    ("nn.conv2d_nchwc", {"padding": (1, 1, 1, 1)}, [(2, 5, 9, 10), (2, 5, 3, 3, 16)],
     lambda x, w: block_ref(conv_ref(x, unpack_ref(w, 32), padding=(1, 1, 1, 1)), 16), "bias_relu", 1e-4),
    ("nn.conv2d_nchwc", {"strides": (2, 2), "padding": (0, 1, 2, 1)}, [(1, 2, 11, 13, 8), (1, 16, 3, 3, 16)],
     lambda x, w: block_ref(conv_ref(unblock_ref(x), unpack_ref(w, 16), (2, 2), (0, 1, 2, 1)), 16), "residual", 1e-4),
    ("nn.conv2d_nchwc", {}, [(1, 3, 7, 7, 8), (2, 24, 1, 1, 16)],
     lambda x, w: block_ref(conv_ref(unblock_ref(x), unpack_ref(w, 32)), 16), "bias_relu", 1e-4),
    ("nn.conv2d_nchwc", {"padding": (1, 1, 1, 1), "dilation": (1, 2)}, [(1, 3, 6, 8), (1, 3, 3, 3, 16)],
     lambda x, w: block_ref(conv_ref(x, unpack_ref(w, 16), padding=(1, 1, 1, 1), dilation=(1, 2)), 16), None, 1e-4),
    # each block on its own: depthwise and block-diagonal (groups narrower than a block)
    ("nn.conv2d_nchwc", {"padding": (1, 1, 1, 1), "groups": 32}, [(1, 2, 9, 10, 16), (2, 1, 3, 3, 16)],
     lambda x, w: per_block_ref(x, w, padding=(1, 1, 1, 1)), "bias_relu", 1e-4),
    ("nn.conv2d_nchwc", {"strides": (2, 2), "padding": (2, 2, 2, 2), "groups": 24}, [(1, 3, 11, 9, 8), (3, 1, 5, 5, 8)],
     lambda x, w: per_block_ref(x, w, strides=(2, 2), padding=(2, 2, 2, 2)), None, 1e-4),
    ("nn.conv2d_nchwc", {"padding": (1, 1, 1, 1), "groups": 8}, [(1, 2, 7, 8, 16), (2, 16, 3, 3, 16)],
     lambda x, w: per_block_ref(x, w, padding=(1, 1, 1, 1)), "residual", 1e-4),
    # groups narrower than a vector (RegNetY's 8, ResNeXt's 4): each lane reads its group's
    # channels, a shuffle of the pixel's vector per channel
    ("nn.conv2d_nchwc", {"padding": (1, 1, 1, 1), "groups": 8}, [(1, 2, 7, 8, 16), (2, 4, 3, 3, 16)],
     lambda x, w: per_block_ref(x, w, padding=(1, 1, 1, 1)), "bias_relu", 1e-4),
    ("nn.conv2d_nchwc", {"strides": (2, 2), "padding": (1, 1, 1, 1), "groups": 4}, [(1, 2, 9, 11, 16), (2, 8, 3, 3, 16)],
     lambda x, w: per_block_ref(x, w, strides=(2, 2), padding=(1, 1, 1, 1)), "residual", 1e-4),
    ("nn.conv2d_nchwc", {"groups": 12}, [(1, 3, 5, 6, 8), (3, 2, 1, 1, 8)],
     lambda x, w: per_block_ref(x, w), None, 1e-4),
    # strided over planes larger than a task's: narrow groups pad rows per task, whole-vector
    # groups read their padding in place (the window unrolled)
    ("nn.conv2d_nchwc", {"strides": (2, 2), "padding": (1, 1, 1, 1), "groups": 8}, [(1, 2, 21, 23, 16), (2, 4, 3, 3, 16)],
     lambda x, w: per_block_ref(x, w, strides=(2, 2), padding=(1, 1, 1, 1)), "bias_relu", 1e-4),
    ("nn.conv2d_nchwc", {"strides": (2, 2), "padding": (1, 1, 1, 1), "groups": 2}, [(1, 2, 21, 23, 16), (2, 16, 3, 3, 16)],
     lambda x, w: per_block_ref(x, w, strides=(2, 2), padding=(1, 1, 1, 1)), None, 1e-4),
    # conv1d, conv3d
    ("nn.conv1d", {"strides": (2,), "padding": (1, 2), "dilation": (2,)}, [(2, 3, 17), (5, 3, 3)],
     lambda x, w: conv_ref(x, w, (2,), (1, 2), (2,)), "bias_relu", 1e-4),
    ("nn.conv1d", {"groups": 2}, [(1, 4, 9), (4, 2, 4)], lambda x, w: conv_ref(x, w, groups=2), None, 1e-4),
    ("nn.conv3d", {"padding": (0, 1, 1, 1, 0, 1)}, [(1, 3, 5, 6, 7), (4, 3, 2, 3, 2)],
     lambda x, w: conv_ref(x, w, padding=(0, 1, 1, 1, 0, 1)), "bias_relu", 1e-4),
    ("nn.conv3d", {"strides": (1, 2, 2), "groups": 2}, [(1, 4, 4, 7, 7), (2, 2, 1, 3, 3)],
     lambda x, w: conv_ref(x, w, (1, 2, 2), groups=2), None, 1e-4),
    # transposed convolutions
    ("nn.conv2d_transpose", {"strides": (2, 2), "padding": (1, 1, 1, 1), "output_padding": (1, 1)},
     [(1, 4, 5, 6), (4, 3, 3, 3)],
     lambda x, w: conv_transpose_ref(x, w, (2, 2), (1, 1, 1, 1), None, (1, 1)), "bias_relu", 1e-4),
    ("nn.conv2d_transpose", {"strides": (2, 1), "padding": (1, 0, 0, 2), "dilation": (1, 2), "groups": 2},
     [(2, 4, 4, 5), (4, 3, 2, 3)],
     lambda x, w: conv_transpose_ref(x, w, (2, 1), (1, 0, 0, 2), (1, 2), None, 2), None, 1e-4),
    ("nn.conv1d_transpose", {"strides": (3,), "padding": (2, 1), "dilation": (2,)}, [(1, 3, 7), (3, 2, 3)],
     lambda x, w: conv_transpose_ref(x, w, (3,), (2, 1), (2,)), None, 1e-4),
    ("nn.conv3d_transpose", {"strides": (1, 2, 2)}, [(1, 2, 3, 3, 4), (2, 3, 2, 2, 2)],
     lambda x, w: conv_transpose_ref(x, w, (1, 2, 2)), "bias_relu", 1e-4),
    # dense (x @ W^T): packed GEMM, dot products for a few rows, a vector input
    ("nn.dense", {}, [(37, 50), (23, 50)], lambda x, w: x @ w.T, "bias_relu_last", 1e-4),
    ("nn.dense", {}, [(3, 2, 70), (11, 70)], lambda x, w: x @ w.T, "bias_relu_last", 1e-4),
    ("nn.dense", {}, [(2, 6, 33), (19, 33)], lambda x, w: x @ w.T, "affine", 1e-4),
    ("nn.dense", {}, [(2, 40)], None, None, 1e-4),  # filled below: (M, K) with K-vector weight rows
    ("nn.dense", {}, [(45,), (7, 45)], lambda x, w: x @ w.T, None, 1e-4),
    # matmul: batched with broadcast batch dims, a shared 2-D operand, few rows, vectors
    ("nn.matmul", {}, [(2, 1, 13, 9), (3, 9, 21)], np.matmul, "bias_relu_last", 1e-4),
    ("nn.matmul", {}, [(4, 17, 12), (12, 30)], np.matmul, "affine", 1e-4),
    ("nn.matmul", {}, [(3, 2, 29), (29, 18)], np.matmul, "bias_relu_last", 1e-4),
    ("nn.matmul", {}, [(5, 1, 8, 16), (1, 3, 16, 8)], np.matmul, None, 1e-4),
    ("nn.matmul", {}, [(16,), (2, 16, 9)], np.matmul, None, 1e-4),
    # constant weights packed at compile time (nn.pack_matmul_weight), read as they are
    ("nn.pack_matmul_weight", {"nr": 16}, [(9, 21)], lambda b: pack_ref(b.T, 16), None, 0),
    ("nn.pack_matmul_weight", {"nr": 16, "trans": True}, [(21, 9)], lambda b: pack_ref(b, 16), None, 0),
    ("nn.matmul_packed", {"units": 30}, [(37, 12), (2, 12, 16)], lambda a, bp: a @ unpack_matmul_ref(bp, 30),
     "bias_relu_last", 1e-4),
    ("nn.matmul_packed", {"units": 16}, [(2, 9, 20), (1, 20, 16)], lambda a, bp: a @ unpack_matmul_ref(bp, 16),
     None, 1e-4),
    ("nn.matmul", {}, [(4, 7, 16), (16,)], np.matmul, None, 1e-4),
    ("nn.matmul", {}, [(16,), (16,)], np.matmul, None, 1e-4),
    # pooling: ceil_mode, count_include_pad, dilation, padding
    ("nn.max_pool2d", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}, [(2, 3, 11, 12)],
     lambda x: pool_ref(x, "max", (3, 3), (2, 2), (1, 1, 1, 1)), "bias_relu", 0),
    ("nn.max_pool2d", {"pool_size": (3, 2), "strides": (2, 2), "padding": (1, 0, 0, 1), "dilation": (1, 2),
                       "ceil_mode": True}, [(1, 3, 10, 11)],
     lambda x: pool_ref(x, "max", (3, 2), (2, 2), (1, 0, 0, 1), (1, 2), True), None, 0),
    ("nn.avg_pool2d", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1), "ceil_mode": True},
     [(2, 3, 9, 10)], lambda x: pool_ref(x, "avg", (3, 3), (2, 2), (1, 1, 1, 1), None, True), "bias_relu", 1e-5),
    ("nn.avg_pool2d", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1), "ceil_mode": True,
                       "count_include_pad": True}, [(2, 3, 9, 10)],
     lambda x: pool_ref(x, "avg", (3, 3), (2, 2), (1, 1, 1, 1), None, True, True), None, 1e-5),
    ("nn.avg_pool2d", {"pool_size": (2, 3), "padding": (0, 2, 1, 0), "dilation": (2, 2),
                       "count_include_pad": True}, [(1, 2, 8, 9)],
     lambda x: pool_ref(x, "avg", (2, 3), None, (0, 2, 1, 0), (2, 2), False, True), "affine", 1e-5),
    ("nn.avg_pool2d", {"pool_size": (2, 2), "strides": (2, 2)}, [(1, 4, 8, 8)],
     lambda x: pool_ref(x, "avg", (2, 2), (2, 2)), None, 1e-5, False),  # the compute alone
    # pooling in the blocked channel layout (the vectors along the block)
    ("nn.max_pool2d", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1), "blocked": True},
     [(1, 2, 11, 12, 16)], lambda x: block_ref(pool_ref(unblock_ref(x), "max", (3, 3), (2, 2), (1, 1, 1, 1)), 16),
     "residual", 1e-5),
    # (blocked max pools read their taps clamped into the input: ceil mode, uneven padding;
    # a dilated window keeps the padded copy)
    ("nn.max_pool2d", {"pool_size": (3, 2), "strides": (2, 3), "padding": (2, 0, 0, 1), "ceil_mode": True,
                       "blocked": True}, [(2, 1, 10, 11, 8)],
     lambda x: block_ref(pool_ref(unblock_ref(x), "max", (3, 2), (2, 3), (2, 0, 0, 1), None, True), 8), None, 0),
    ("nn.max_pool2d", {"pool_size": (3, 3), "padding": (1, 1, 1, 1), "dilation": (2, 1), "blocked": True},
     [(1, 1, 9, 7, 8)], lambda x: block_ref(pool_ref(unblock_ref(x), "max", (3, 3), None, (1, 1, 1, 1), (2, 1)), 8),
     None, 0),
    ("nn.avg_pool2d", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1), "ceil_mode": True,
                       "blocked": True}, [(2, 1, 9, 10, 8)],
     lambda x: block_ref(pool_ref(unblock_ref(x), "avg", (3, 3), (2, 2), (1, 1, 1, 1), None, True), 8), None, 1e-5),
    ("nn.avg_pool1d", {"pool_size": (4,), "strides": (3,), "padding": (2, 1), "count_include_pad": True},
     [(1, 2, 12)], lambda x: pool_ref(x, "avg", (4,), (3,), (2, 1), None, False, True), None, 1e-5),
    ("nn.max_pool1d", {"pool_size": (3,), "strides": (2,), "ceil_mode": True}, [(2, 3, 10)],
     lambda x: pool_ref(x, "max", (3,), (2,), None, None, True), "bias_relu", 0),
    ("nn.avg_pool3d", {"pool_size": (2, 3, 2), "strides": (1, 2, 2), "padding": (0, 1, 1, 1, 0, 1)},
     [(1, 2, 5, 6, 7)], lambda x: pool_ref(x, "avg", (2, 3, 2), (1, 2, 2), (0, 1, 1, 1, 0, 1)), None, 1e-5),
    ("nn.max_pool3d", {"pool_size": (2, 2, 2), "strides": (2, 2, 2), "ceil_mode": True}, [(1, 2, 5, 5, 5)],
     lambda x: pool_ref(x, "max", (2, 2, 2), (2, 2, 2), None, None, True), None, 0),
    ("nn.lp_pool2d", {"pool_size": (2, 3), "strides": (2, 2)}, [(1, 3, 8, 9)],
     lambda x: pool_ref(x, "lp", (2, 3), (2, 2)), "bias_relu", 1e-5),
    ("nn.lp_pool2d", {"pool_size": (2, 2), "p": 3, "padding": (1, 1, 0, 0)}, [(1, 3, 6, 7)],
     lambda x: pool_ref(x, "lp", (2, 2), None, (1, 1, 0, 0), p=3), None, 1e-5),
    ("nn.lp_pool1d", {"pool_size": (3,), "p": 1}, [(1, 2, 9)], lambda x: pool_ref(x, "lp", (3,), p=1), None, 1e-5),
    ("nn.lp_pool3d", {"pool_size": (2, 2, 2), "strides": (1, 2, 2)}, [(1, 2, 3, 5, 6)],
     lambda x: pool_ref(x, "lp", (2, 2, 2), (1, 2, 2)), None, 1e-5),
    # global pools
    ("nn.global_avg_pool2d", {}, [(2, 3, 7, 7)], lambda x: x.mean((2, 3), keepdims=True), "bias_relu", 1e-5),
    ("nn.global_max_pool2d", {}, [(2, 5, 9, 17)], lambda x: x.max((2, 3), keepdims=True), None, 0),
    ("nn.global_avg_pool3d", {}, [(2, 5, 3, 4, 19)], lambda x: x.mean((2, 3, 4), keepdims=True), None, 1e-5),
    ("nn.global_max_pool1d", {}, [(2, 5, 19)], lambda x: x.max(2, keepdims=True), "bias_relu", 0),
    ("nn.global_avg_pool1d", {}, [(1, 4, 16)], lambda x: x.mean(2, keepdims=True), None, 1e-5),
    ("nn.global_max_pool3d", {}, [(1, 3, 2, 3, 9)], lambda x: x.max((2, 3, 4), keepdims=True), "affine", 0),
    # softmax on several axes
    ("nn.softmax", {}, [(3, 4, 37)], softmax_ref, "affine", 1e-5),
    ("nn.softmax", {"axis": 1}, [(3, 4, 37)], lambda x: softmax_ref(x, 1), None, 1e-5),
    ("nn.softmax", {"axis": 0}, [(5, 6)], lambda x: softmax_ref(x, 0), "affine", 1e-5),
    ("nn.softmax", {"axis": -1}, [(8, 16)], softmax_ref, None, 1e-5, False),  # the compute alone
    ("nn.log_softmax", {}, [(6, 19)], lambda x: softmax_ref(x, -1, True), None, 1e-5),
    ("nn.log_softmax", {"axis": 1}, [(2, 5, 3, 11)], lambda x: softmax_ref(x, 1, True), "affine", 1e-5),
    # normalizations
    ("nn.layer_norm", {}, [(5, 40), (40,), (40,)],
     lambda x, g, b: normalize_ref(x, (1,), 1e-5, g, b), "affine", 1e-4),
    ("nn.layer_norm", {"axis": 1, "epsilon": 1e-3}, [(4, 3, 13), (3, 13), (13,)],
     lambda x, g, b: normalize_ref(x, (1, 2), 1e-3, g, b), None, 1e-4),
    ("nn.layer_norm", {"axis": -1}, [(2, 3, 9), (9,)],
     lambda x, g: normalize_ref(x, (2,), 1e-5, g, 0), None, 1e-4),
    ("nn.instance_norm", {}, [(2, 3, 5, 7), (3,), (3,)],
     lambda x, g, b: normalize_ref(x, (2, 3), 1e-5, _channel(g, 4), _channel(b, 4)), "bias_relu", 1e-4),
    ("nn.instance_norm", {"epsilon": 1e-2}, [(1, 2, 20), (2,), (2,)],
     lambda x, g, b: normalize_ref(x, (2,), 1e-2, _channel(g, 3), _channel(b, 3)), None, 1e-4),
    ("nn.batch_norm", {"epsilon": 1e-3}, [(2, 3, 4, 5), (3,), (3,), (3,), (3,)], None, None, 1e-5),
    ("nn.bias_add", {}, [(2, 3, 4), (3,)], lambda x, b: x + _channel(b, 3), None, 1e-6),
    ("nn.bias_add", {"axis": -1}, [(2, 3, 4), (4,)], lambda x, b: x + b, None, 1e-6),
    ("nn.lrn", {"size": 3}, [(2, 5, 3, 4)], lambda x: lrn_ref(x, 3), None, 1e-5),
    ("nn.lrn", {"size": 4, "alpha": 0.01, "beta": 0.5, "bias": 2.0}, [(1, 6, 7)],
     lambda x: lrn_ref(x, 4, 0.01, 0.5, 2.0), None, 1e-5),
    ("nn.lrn", {"size": 5}, [(1, 9, 5, 19)], lambda x: lrn_ref(x, 5), "bias_relu", 1e-5),  # sums inside the rows
    ("nn.lrn", {"size": 3, "beta": 0.6}, [(1, 4, 3, 5)], lambda x: lrn_ref(x, 3, beta=0.6), None, 1e-5),  # exp/log
    ("nn.lp_normalize", {}, [(3, 10)], lambda x: x / np.sqrt((x.astype(np.float64) ** 2).sum(-1, keepdims=True)),
     None, 1e-5),
    ("nn.lp_normalize", {"axis": 0, "p": 1}, [(4, 3, 2)], lambda x: x / np.abs(x).sum(0, keepdims=True),
     None, 1e-5),
]


def _batch_norm_ref(x, g, b, mean, var):
    return (x - _channel(mean, 4)) / np.sqrt(_channel(var, 4) + 1e-3) * _channel(g, 4) + _channel(b, 4)


def _fill(case):
    """Cases whose reference depends on their inputs' roles."""
    op, attrs, shapes, ref, *rest = case
    if op == "nn.batch_norm":
        return (op, attrs, shapes, _batch_norm_ref, *rest)
    if op == "nn.dense" and ref is None:
        return (op, attrs, [(2, 40), (13, 40)], lambda x, w: x @ w.T, *rest)
    return case


CASES = [_fill(c) for c in CASES]


def _gen(op, i, shape):
    if op == "nn.batch_norm" and i == 4:  # a variance
        return (RNG.random(shape) + 0.5).astype(np.float32)
    return RNG.standard_normal(shape).astype(np.float32)


def _case_id(case):
    op, attrs, shapes, _, epi, _, *sched = case
    a = ",".join(f"{k}={v}" for k, v in attrs.items())
    return f"{op}[{a}]{'x'.join(map(str, shapes[0]))}" + (f"+{epi}" if epi else "") + ("-naive" if sched else "")


def _make(i, case):
    op, attrs, shapes, _, epi, _, *sched = case
    types = [TensorType(s, F) for s in shapes]
    s, args, anchor, out, extra, post = fused_kernel(op, attrs, types, epi, schedule=not sched)
    return (s, args, f"k{i}"), (anchor, out, extra, post)


@pytest.fixture(scope="module")
def built():
    return build_all(CASES, _make, "nn_computes")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[_case_id(c) for c in CASES])
def test_compute(built, i):
    mod, info = built
    op, attrs, shapes, ref, epi, tol, *_ = CASES[i]
    anchor, out_t, extra, post = info[i]
    arrays = [_gen(op, k, s) for k, s in enumerate(shapes)]
    extras = [RNG.standard_normal(tuple(d.value for d in p.shape)).astype(np.float32) for p in extra]
    out = np.zeros(tuple(d.value for d in out_t.shape), np.float32)
    mod[f"k{i}"](*arrays, *extras, out)
    want = np.asarray(ref(*arrays), np.float64)
    if post is not None:
        want = post(want, *extras)
    if tol:
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(out, want.astype(np.float32))


def test_every_nn_op_has_a_compute_and_a_case():
    from ember.graph.ops import list_ops

    family = [n for n in list_ops() if get_op(n).infer.__module__ == "ember.graph.ops.nn" and n != "einsum"]
    assert len(family) > 30
    # hardmax: the index family's compute and tests; conv2d_integer (uint8 x int8 inputs):
    # tests/graph/passes/test_integer_products.py, blocked and plain; the products by codes
    # (uint8): tests/kernels/test_weight_only.py and tests/graph/passes/test_weight_only.py;
    # nn.matmul_mma, a GPU's loop program (a kernel hook, no compute): tests/loop/test_gpu_mma.py
    covered = {c[0] for c in CASES} | {"nn.hardmax", "nn.conv2d_integer", "nn.matmul_nbits", "nn.matmul_nbits_packed"}
    assert [n for n in family if (get_op(n).compute is None and get_op(n).kernel is None) or
            (n not in covered and n != "nn.matmul_mma")] == []


def test_the_performance_ops_have_schedules():
    for op in ("nn.conv2d", "nn.dense", "nn.matmul", "nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d",
               "nn.global_max_pool2d", "nn.softmax", "nn.log_softmax"):
        assert callable(get_op(op).schedule.get("llvm")), op


@pytest.mark.parametrize("i", [i for i, c in enumerate(CASES) if c[4] and get_op(c[0]).schedule.get("llvm")
                               and len(c) == 6], ids=lambda i: _case_id(CASES[i]))
def test_epilogue_runs_inside_the_anchor_tile(i):
    # the contract: with an epilogue, the anchor is computed inside out's loops (its register
    # block or row), never as a separate pass over memory
    (s, _, _), (anchor, out, _, _) = _make(i, CASES[i])
    st = s[anchor]
    assert st.attach[0] in ("at", "inline")
    if st.attach[0] == "at":
        assert st.attach[1] is s[out]
    else:  # an elementwise anchor (the average's division, softmax's scaling): its reduction is placed
        inner = [t for t in anchor.op.input_tensors() if isinstance(t.op, te.ComputeOp)]
        assert inner and all(s[t].attach[0] == "at" for t in inner)


def test_raw_attributes_get_their_defaults():
    x = te.placeholder((1, 3, 8, 8), F, "x")
    w = te.placeholder((4, 3, 3, 3), F, "w")
    out = get_op("nn.conv2d").compute({}, [x, w], TensorType((1, 4, 6, 6), F))
    assert tuple(d.value for d in out.shape) == (1, 4, 6, 6)
    p = get_op("nn.max_pool2d").compute({"pool_size": (2, 2)}, [x], TensorType((1, 3, 7, 7), F))
    assert tuple(d.value for d in p.shape) == (1, 3, 7, 7)


def test_unsupported_cases_name_the_op():
    xi = te.placeholder((1, 2, 6, 6), "int32", "x")
    with pytest.raises(UnsupportedOpError, match="nn.avg_pool2d.*float"):
        get_op("nn.avg_pool2d").compute({"pool_size": (2, 2)}, [xi], TensorType((1, 2, 5, 5), "int32"))
    with pytest.raises(UnsupportedOpError, match="nn.softmax.*float"):
        get_op("nn.softmax").compute({}, [xi], TensorType((1, 2, 6, 6), "int32"))
    xc, w = te.placeholder((1, "c", 6, 6), F, "x"), te.placeholder((4, 2, 3, 3), F, "w")
    with pytest.raises(UnsupportedOpError, match="channels must be static"):
        get_op("nn.conv2d").compute({}, [xc, w], TensorType((1, 4, 4, 4), F))


def test_other_dtypes():
    # max pooling of integers pads with the dtype's minimum; float64 and float16 (which also
    # accumulates in float16, hence the tolerance) through the computes and their schedules
    cases = [
        ("nn.max_pool2d", {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}, [((1, 2, 5, 6), "int32")],
         lambda x: pool_ref(x, "max", (3, 3), None, (1, 1, 1, 1)), 0),
        ("nn.global_max_pool2d", {}, [((2, 3, 4, 11), "int8")], lambda x: x.max((2, 3), keepdims=True), 0),
        ("nn.conv2d", {"padding": (1, 1, 1, 1), "groups": 2}, [((1, 4, 6, 5), "float64"), ((4, 2, 3, 3), "float64")],
         lambda x, w: conv_ref(x, w, None, (1, 1, 1, 1), None, 2), 1e-12),
        ("nn.softmax", {"axis": 1}, [((3, 7, 2), "float64")], lambda x: softmax_ref(x, 1), 1e-12),
        ("nn.dense", {}, [((9, 16), "float64"), ((5, 16), "float64")], lambda x, w: x @ w.T, 1e-12),
        ("nn.conv2d", {"padding": (1, 1, 1, 1)}, [((1, 3, 6, 7), "float16"), ((4, 3, 3, 3), "float16")],
         lambda x, w: conv_ref(x, w, padding=(1, 1, 1, 1)), 5e-2),
        ("nn.softmax", {}, [((3, 20), "float16")], softmax_ref, 2e-3),
        ("nn.avg_pool2d", {"pool_size": (2, 2)}, [((1, 2, 5, 6), "float16")], lambda x: pool_ref(x, "avg", (2, 2)), 2e-3),
        ("nn.layer_norm", {}, [((3, 20), "float16"), ((20,), "float16"), ((20,), "float16")],
         lambda x, g, b: normalize_ref(x, (1,), 1e-5, g, b), 3e-2),
    ]
    kernels = []
    for i, (op, attrs, ins, _, _) in enumerate(cases):
        s, args, *_ = fused_kernel(op, attrs, [TensorType(sh, d) for sh, d in ins])
        kernels.append((s, args, f"d{i}"))
    mod = ember.build(kernels, name="nn_dtypes")
    for i, (op, attrs, ins, ref, tol) in enumerate(cases):
        arrays = [(RNG.integers(-100, 100, sh) if "int" in d else RNG.standard_normal(sh)).astype(dt.numpy_dtype(d))
                  for sh, d in ins]
        want = np.asarray(ref(*[a.astype(np.float64) if "float" in str(a.dtype) else a for a in arrays]))
        out = np.zeros(want.shape, arrays[0].dtype)
        mod[f"d{i}"](*arrays, out)
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol, err_msg=f"{op} {ins[0][1]}")


def test_symbolic_sizes():
    # a symbolic batch size (or image height): the kernel takes it as an argument
    cases = [
        ("nn.conv2d", {"padding": (1, 1, 1, 1), "strides": (2, 2)}, [(1, 3, "n", 7), (4, 3, 3, 3)],
         lambda x, w: conv_ref(x, w, (2, 2), (1, 1, 1, 1))),
        ("nn.conv2d", {"padding": (1, 1, 1, 1)}, [("n", 3, 6, 7), (4, 3, 3, 3)],
         lambda x, w: conv_ref(x, w, padding=(1, 1, 1, 1))),
        ("nn.dense", {}, [("n", 20), (9, 20)], lambda x, w: x @ w.T),
        # a sequence of symbolic length (SqueezeBERT's 1x1 convs, a speech model's frames)
        ("nn.conv1d", {}, [(1, 8, "n"), (16, 8, 1)], conv_ref),
        ("nn.conv1d", {"padding": (1, 1), "groups": 2}, [(2, 8, "n"), (8, 4, 3)],
         lambda x, w: conv_ref(x, w, padding=(1, 1), groups=2)),
        ("nn.matmul", {}, [("n", 5, 20), (20, 9)], np.matmul),
        ("nn.max_pool2d", {"pool_size": (2, 2), "strides": (2, 2)}, [("n", 3, 6, 7)],
         lambda x: pool_ref(x, "max", (2, 2), (2, 2))),
        ("nn.global_avg_pool2d", {}, [("n", 3, 5, 5)], lambda x: x.mean((2, 3), keepdims=True)),
        ("nn.global_avg_pool2d", {}, [(1, 3, "n", "n")], lambda x: x.mean((2, 3), keepdims=True)),
        ("nn.global_max_pool1d", {}, [(2, 3, "n")], lambda x: x.max(2, keepdims=True)),
        # pools over a symbolic length or plane (SEW's squeeze of its frames, an image of any size)
        ("nn.avg_pool1d", {"pool_size": (2,), "strides": (2,)}, [(2, 3, "n")],
         lambda x: pool_ref(x, "avg", (2,), (2,))),
        ("nn.max_pool2d", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}, [(1, 2, "n", "n")],
         lambda x: pool_ref(x, "max", (3, 3), (2, 2), (1, 1, 1, 1))),
        ("nn.avg_pool2d", {"pool_size": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1)}, [(1, 2, 5, "n")],
         lambda x: pool_ref(x, "avg", (3, 3), (1, 1), (1, 1, 1, 1))),
        ("nn.softmax", {}, [("n", 13)], softmax_ref),
        ("nn.layer_norm", {}, [("n", 12), (12,), (12,)], lambda x, g, b: normalize_ref(x, (1,), 1e-5, g, b)),
        # the normalized axis itself symbolic (wav2vec2's group norm over its frames)
        ("nn.instance_norm", {}, [(2, 3, "n"), (3,), (3,)],
         lambda x, g, b: normalize_ref(x, (2,), 1e-5, _channel(g, 3), _channel(b, 3))),
    ]
    kernels = []
    for i, (op, attrs, shapes, _) in enumerate(cases):
        types = [TensorType(tuple(Dim(d) if isinstance(d, str) else d for d in sh), F) for sh in shapes]
        s, args, *_ = fused_kernel(op, attrs, types)
        kernels.append((s, args, f"s{i}"))
    mod = ember.build(kernels, name="nn_symbolic")
    for n in (1, 3, 37):
        for i, (op, attrs, shapes, ref) in enumerate(cases):
            arrays = [RNG.standard_normal(tuple(n if d == "n" else d for d in sh)).astype(np.float32) for sh in shapes]
            want = np.asarray(ref(*arrays))
            out = np.zeros(want.shape, np.float32)
            mod[f"s{i}"](*arrays, out)
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=f"{op} n={n}")
