"""Converters of ONNX Runtime's contrib ops (domain ``com.microsoft``) that its transformer
optimizer and quantizer write into the files people ship: fused GELUs, the skip-and-bias layer
norms, BERT's embedding layer norm and its fused self-attention, rotary embeddings.

Each becomes the graph ops a model written out by hand would use, so it reaches the same
kernels and fusions (a GELU fuses into the product before it, a layer norm's residual add into
the norm). Semantics follow ONNX Runtime, which the tests compare against: masks in fused
attention add ``mask_filter_value`` (-10000 by default), not -inf.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...graph.ops import dims as D
from . import attention as onnx_attention
from .table import CONTRIB, converter


def _contrib(*ops, **kw):
    return converter(*ops, domain=CONTRIB, **kw)


def _add(node, *xs):
    out = xs[0]
    for x in xs[1:]:
        if x is not None:
            out = node.call("add", out, x)
    return out


# -- activations ------------------------------------------------------------------------------------

@_contrib("Gelu")
def _gelu(node):
    return [node.call("nn.gelu", node.input(0), approximate="none")]


@_contrib("BiasGelu")
def _bias_gelu(node):
    return [node.call("nn.gelu", node.call("add", node.input(0), node.input(1)), approximate="none")]


@_contrib("FastGelu")
def _fast_gelu(node):
    """The tanh approximation of GELU, of ``x + bias``."""
    x = _add(node, node.input(0), node.input(1) if node.has(1) else None)
    return [node.call("nn.gelu", x, approximate="tanh")]


@_contrib("QuickGelu")
def _quick_gelu(node):
    x = node.input(0)
    alpha = node.const_like(node.attr("alpha", 1.702), x.type.dtype)
    return [node.call("multiply", x, node.call("sigmoid", node.call("multiply", x, alpha)))]


@_contrib("BiasAdd")
def _bias_add(node):
    return [_add(node, node.input(0), node.input(1), node.input(2))]


# -- normalizations ---------------------------------------------------------------------------------

def _rms(node, x, gamma, eps: float):
    """``x / sqrt(mean(x^2) + eps) * gamma`` over the last axis, statistics in float32."""
    xs = x if x.type.dtype == "float32" else node.call("cast", x, dtype="float32")
    ms = node.call("mean", node.call("multiply", xs, xs), axis=(-1,), keepdims=True)
    inv = node.call("rsqrt", node.call("add", ms, node.const_like(eps, "float32")))
    y = node.call("multiply", xs, inv)
    if y.type.dtype != x.type.dtype:
        y = node.call("cast", y, dtype=x.type.dtype)
    return node.call("multiply", y, gamma), inv


def _skip_norm(simplified: bool):
    def convert(node):
        """input + skip (+ bias), normalized; outputs: the result, mean and inverse std (unused
        by the optimizer's graphs: given as the norm computes them), and the sum."""
        x = _add(node, node.input(0), node.input(1), node.input(3 if simplified else 4) if node.has(3 if simplified else 4) else None)
        eps = node.attr("epsilon", 1e-12 if not simplified else 1e-6)
        if simplified:
            y, inv = _rms(node, x, node.input(2), eps)
            mean = None
        else:
            args = [x, node.input(2)] + ([node.input(3)] if node.has(3) else [])
            y = node.call("nn.layer_norm", *args, axis=-1, epsilon=eps)
            mean, inv = None, None
            if node.wants(1) or node.wants(2):
                xs = x if x.type.dtype == "float32" else node.call("cast", x, dtype="float32")
                mean = node.call("mean", xs, axis=(-1,), keepdims=True)
                c = node.call("subtract", xs, mean)
                var = node.call("mean", node.call("multiply", c, c), axis=(-1,), keepdims=True)
                inv = node.call("rsqrt", node.call("add", var, node.const_like(eps, "float32")))
        if (node.wants(1) and mean is None) or (node.wants(2) and inv is None):
            raise UnsupportedOpError("the mean output of a simplified (RMS) layer norm is not defined")
        return [y, mean, inv, x][:max(1, node.num_outputs)]
    return convert


_contrib("SkipLayerNormalization")(_skip_norm(False))
_contrib("SkipSimplifiedLayerNormalization")(_skip_norm(True))


@converter("SimplifiedLayerNormalization")  # (ONNX Runtime registers it in the ONNX domain)
@_contrib("SimplifiedLayerNormalization")
def _simplified_layer_norm(node):
    x = node.input(0)
    if node.attr("axis", -1) not in (-1, x.type.ndim - 1):
        raise UnsupportedOpError(f"SimplifiedLayerNormalization over axis {node.attr('axis')} (only the last)")
    y, inv = _rms(node, x, node.input(1), node.attr("epsilon", 1e-5))
    return [y, inv][:max(1, node.num_outputs)]


@_contrib("EmbedLayerNormalization")
def _embed_layer_norm(node):
    """BERT's embeddings: word + position (+ segment) rows, layer-normalized; the mask index is
    each batch row's count of mask ones (int32), the key lengths the fused Attention reads."""
    ids = node.input(0)
    b, s = ids.type.shape
    word = node.call("gather", node.input(2), ids, axis=0)
    if node.has(8):
        pos_ids = node.input(8)
    else:
        pos_ids = node.call("reshape", node.call("range", start=0, stop=s, step=1, dtype="int64"), newshape=(1, s))
    pos = node.call("gather", node.input(3), pos_ids, axis=0)
    seg = node.call("gather", node.input(4), node.input(1), axis=0) if node.has(1) and node.has(4) else None
    emb = _add(node, word, pos, seg)
    beta = [node.input(6)] if node.has(6) else []
    y = node.call("nn.layer_norm", emb, node.input(5), *beta, axis=-1, epsilon=node.attr("epsilon", 1e-12))
    if node.has(7):
        mask = node.call("sum", node.call("cast", node.input(7), dtype="int32"), axis=(1,), keepdims=False)
    else:
        mask = node.call("expand", node.const_like(np.array([s] if isinstance(s, int) else 0, np.int32), "int32"),
                         shape=(b,)) if isinstance(s, int) else None
        if mask is None and node.wants(1):
            raise UnsupportedOpError("EmbedLayerNormalization without a mask over a symbolic sequence")
    return [y, mask, emb][:max(1, node.num_outputs)]


# -- attention --------------------------------------------------------------------------------------

def _mask_filter(node, m, sq, skv, dtype):
    """The contrib Attention's mask_index as an additive bias broadcasting to (b, h, sq, skv):
    key lengths (b,), a raw 0/1 mask (b, skv) or (b, sq, skv); masked: mask_filter_value."""
    fill = node.const_like(node.attr("mask_filter_value", -10000.0), dtype)
    zero = node.const_like(0, dtype)
    if m.type.ndim == 1:
        b = m.type.shape[0]
        cols = node.call("reshape", node.call("range", start=0, stop=skv, step=1, dtype="int64"), newshape=(1, skv))
        lens = node.call("reshape", node.call("cast", m, dtype="int64"), newshape=(b, 1))
        bias = node.call("where", node.call("less", cols, lens), zero, fill)
        return node.call("reshape", bias, newshape=(b, 1, 1, skv))
    if m.type.ndim in (2, 3):
        keep = node.call("not_equal", m, node.const_like(0, m.type.dtype))
        bias = node.call("where", keep, zero, fill)
        shape = (m.type.shape[0], 1, 1, skv) if m.type.ndim == 2 else (m.type.shape[0], 1, sq, skv)
        return node.call("reshape", bias, newshape=shape)
    raise UnsupportedOpError(f"a mask_index of rank {m.type.ndim} ({m.type}) is not supported")


@_contrib("Attention")
def _attention(node):
    """BERT's fused self-attention: one product for Q, K and V, per-head attention with the mask
    (and past, and causality when unidirectional), heads merged back."""
    if node.attr("do_rotary", 0):
        raise UnsupportedOpError("Attention with do_rotary=1 is not supported")
    x, w = node.input(0), node.input(1)
    heads = node.attr("num_heads")
    qkv = node.call("nn.matmul", x, w)
    if node.has(2):
        qkv = node.call("add", qkv, node.input(2))
    b, s, total = qkv.type.shape
    sizes = tuple(node.attr("qkv_hidden_sizes") or ())
    if not sizes:
        if not isinstance(total, int) or total % 3:
            raise ShapeError(f"the QKV width {total} is not three equal parts")
        sizes = (total // 3,) * 3
    q, k, v = _split3(node, qkv, sizes)
    q, k, v = (onnx_attention._heads(node, t, heads, what) for t, what in ((q, "query"), (k, "key"), (v, "value")))
    present = None
    past_len = 0
    if node.has(4):  # past: (2, b, heads, past, head)
        past = node.input(4)
        pk = node.call("squeeze", node.call("strided_slice", past, begin=(0,), end=(1,), axes=(0,)), axis=(0,))
        pv = node.call("squeeze", node.call("strided_slice", past, begin=(1,), end=(2,), axes=(0,)), axis=(0,))
        past_len = past.type.shape[3]
        k, v = node.call("concat", pk, k, axis=2), node.call("concat", pv, v, axis=2)
    if node.wants(1):
        present = node.call("concat", node.call("unsqueeze", k, axes=(0,)), node.call("unsqueeze", v, axes=(0,)), axis=0)
    y = _attend(node, q, k, v, past_len, 3, 5)
    return [y, present][:max(1, node.num_outputs)]


@_contrib("MultiHeadAttention")
def _multi_head_attention(node):
    """Attention over separate (batch, seq, hidden) query, key and value (optional bias for all
    three, a key padding mask, an additive attention bias, past and present keys and values);
    packed forms (QKV in one input, or K and V already split into heads) are not supported."""
    q, k, v = node.input(0), node.input(1) if node.has(1) else None, node.input(2) if node.has(2) else None
    if k is None or v is None or q.type.ndim != 3 or k.type.ndim != 3 or v.type.ndim != 3:
        raise UnsupportedOpError("MultiHeadAttention with packed QKV or KV, or keys already split into heads, "
                                 "is not supported")
    heads = node.attr("num_heads")
    if node.has(3):  # bias: (q_hidden + k_hidden + v_hidden)
        parts = _split3(node, node.input(3), (q.type.shape[2], k.type.shape[2], v.type.shape[2]), axis=0)
        q, k, v = (node.call("add", t, b) for t, b in zip((q, k, v), parts))
    q, k, v = (onnx_attention._heads(node, t, heads, what) for t, what in ((q, "query"), (k, "key"), (v, "value")))
    past_len = 0
    if node.has(6) and node.has(7):
        past_len = node.type(6).shape[2]
        k = node.call("concat", node.input(6), k, axis=2)
        v = node.call("concat", node.input(7), v, axis=2)
    y = _attend(node, q, k, v, past_len, 4, 5)
    return [y, k, v][:max(1, node.num_outputs)]


@_contrib("GroupQueryAttention")
def _group_query_attention(node):
    """Grouped-query attention as ONNX Runtime's LLM exports write it: query, key and value
    (or packed QKV), a past of the kv heads prepended, rotary embeddings from the caches at each
    token's position (``do_rotary``), causal attention over the keys each sequence has
    (``seqlens_k[b] + 1`` of them, the queries its last ones), a local window, a softcap.
    The past and present are separate buffers of the past's and the total length (a shared
    buffer is not supported)."""
    heads, kv_heads = node.attr("num_heads"), node.attr("kv_num_heads")
    q = node.input(0)
    dtype = q.type.dtype
    b, s, width = q.type.shape
    if node.has(1) and node.has(2):
        k, v = node.input(1), node.input(2)
        head = D.dim_div_exact(width, heads)
    else:  # packed: (b, s, (heads + 2 * kv_heads) * head)
        head = D.dim_div_exact(width, heads + 2 * kv_heads)
        q, k, v = _split3(node, q, (heads * head, kv_heads * head, kv_heads * head))
    if head is None or not isinstance(head, int):
        raise ShapeError(f"the head size of {q.type} for {heads} heads must be a static whole number")
    q, k, v = (onnx_attention._heads(node, t, n, what) for t, n, what in
               ((q, heads, "query"), (k, kv_heads, "key"), (v, kv_heads, "value")))
    if node.attr("do_rotary", 0):
        if node.has(9):
            positions = node.input(9)
        else:  # each token's position: the past's length on (a size that may be symbolic)
            positions = node.call("reshape", node.call("range", start=0, stop=s, step=1, dtype="int64"), newshape=(1, s))
            if node.has(3):
                offset = node.call("strided_slice", node.call("shape_of", node.input(3)), begin=(2,), end=(3,), axes=(0,))
                positions = node.call("add", positions, node.call("reshape", offset, newshape=(1, 1)))
        cos, sin = node.input(7), node.input(8)
        q, k = (onnx_attention.rotary(node, t, cos, sin, positions, interleaved=node.attr("rotary_interleaved", 0),
                                      dim=0)[0] for t in (q, k))
    if node.has(3):
        k = node.call("concat", node.input(3), k, axis=2)
        v = node.call("concat", node.input(4), v, axis=2)
    present_k, present_v = k, v
    if heads != kv_heads:
        k, v = (onnx_attention._repeat_heads(node, t, heads // kv_heads) for t in (k, v))
    scale = node.attr("scale") or 1.0 / math.sqrt(head)
    scores = node.call("multiply", node.call("nn.matmul", q, node.call("transpose", k, axes=(0, 1, 3, 2))),
                       node.const_like(scale, dtype))
    cap = node.attr("softcap", 0.0) or 0.0
    if cap > 0:
        c = node.const_like(cap, dtype)
        scores = node.call("multiply", node.call("tanh", node.call("divide", scores, c)), c)
    skv = scores.type.shape[3]
    # query i of batch b sits at position seqlens_k[b] + 1 - s + i; it sees the keys up to it
    last = node.call("reshape", node.call("cast", node.input(5), dtype="int64"), newshape=(b, 1, 1, 1))
    rows = node.call("reshape", node.call("range", start=0, stop=s, step=1, dtype="int64"), newshape=(1, 1, s, 1))
    cols = node.call("reshape", node.call("range", start=0, stop=skv, step=1, dtype="int64"), newshape=(1, 1, 1, skv))
    length = node.call("strided_slice", node.call("shape_of", node.input(0)), begin=(1,), end=(2,), axes=(0,))
    start = node.call("subtract", node.call("add", last, node.const_like(np.array(1, np.int64), "int64")),
                      node.call("reshape", length, newshape=(1, 1, 1, 1)))
    pos = node.call("add", start, rows)
    seen = node.call("less_equal", cols, pos)
    window = node.attr("local_window_size", -1)
    if window is not None and window > 0:
        seen = node.call("logical_and", seen, node.call("greater", cols, node.call(
            "subtract", pos, node.const_like(np.array(window, np.int64), "int64"))))
    logits = node.call("where", seen, scores, node.const_like(-np.inf, dtype))
    y = node.call("nn.matmul", node.call("nn.softmax", logits, axis=-1), v)
    y = node.call("reshape", node.call("transpose", y, axes=(0, 2, 1, 3)), newshape=(b, s, heads * head))
    return [y, present_k, present_v][:max(1, node.num_outputs)]


def _split3(node, x, sizes, axis: int = 2):
    """``x`` cut along ``axis`` into consecutive parts of ``sizes``."""
    out, start = [], 0
    for n in sizes:
        out.append(node.call("strided_slice", x, begin=(start,), end=(start + n,), axes=(axis,)))
        start += n
    return out


def _attend(node, q, k, v, past_len, mask_input: int, bias_input: int):
    """The fused attention ops' core, heads split (b, h, s, d): scaled scores, the mask (input
    ``mask_input``) and attention bias (``bias_input``) added, causality when unidirectional
    (all masking by ``mask_filter_value``), softmax, and the heads merged back (b, s, h*d)."""
    dtype = q.type.dtype
    scale = node.attr("scale") or 1.0 / math.sqrt(q.type.shape[3])
    scores = node.call("multiply", node.call("nn.matmul", q, node.call("transpose", k, axes=(0, 1, 3, 2))),
                       node.const_like(scale, dtype))
    sq, skv = scores.type.shape[2], scores.type.shape[3]
    bias = _mask_filter(node, node.input(mask_input), sq, skv, dtype) if node.has(mask_input) else None
    if node.has(bias_input):
        bias = _add(node, node.input(bias_input), bias) if bias is not None else node.input(bias_input)
    if node.attr("unidirectional", 0):
        diff = onnx_attention._diff(node, sq, skv, past_len)
        causal = node.call("where", node.call("greater_equal", diff, node.const_like(0, "int64")),
                           node.const_like(0, dtype), node.const_like(node.attr("mask_filter_value", -10000.0), dtype))
        bias = causal if bias is None else node.call("add", bias, causal)
    logits = node.call("add", scores, bias) if bias is not None else scores
    y = node.call("nn.matmul", node.call("nn.softmax", logits, axis=-1), v)
    b, h, s, d = y.type.shape
    return node.call("reshape", node.call("transpose", y, axes=(0, 2, 1, 3)), newshape=(b, s, D.dim_mul(h, d)))


@_contrib("RotaryEmbedding")
def _rotary(node):
    """The contrib RotaryEmbedding: (input, position_ids, cos_cache, sin_cache), as the ONNX op
    of opset 23; position ids of one element are the first position, counting up the sequence."""
    x, pos = node.input(0), node.input(1)
    if node.attr("is_packed_batching", 0):
        raise UnsupportedOpError("RotaryEmbedding with is_packed_batching=1 is not supported")
    if pos.type.ndim == 1 and pos.type.shape == (1,):
        s = x.type.shape[1] if x.type.ndim == 3 else x.type.shape[2]
        start = node.call("cast", pos, dtype="int64")
        pos = node.call("add", node.call("reshape", node.call("range", start=0, stop=s, step=1, dtype="int64"),
                                         newshape=(1, s)), node.call("reshape", start, newshape=(1, 1)))
    return onnx_attention.rotary(node, x, node.input(2), node.input(3), pos)
