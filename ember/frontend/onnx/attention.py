"""The ONNX ``Attention`` op (opset 23 on), lowered to the graph ops a model written out by hand
would use: per-head reshapes, ``nn.matmul`` for Q Kᵀ and P V, a softmax, and additive biases for
the mask and causality -- so it reaches the same kernels (and fusions) as an exported
``scaled_dot_product_attention``.

Semantics follow the ONNX reference: Q and K are each scaled by ``sqrt(scale)`` (default
``1/sqrt(head_size)``); ``past_key``/``past_value`` are prepended along the sequence; a mask
shorter than the keys is padded (``-inf``/``False``); causal masking is bottom-right aligned
(a query ``i`` sees keys ``j <= i + past length``); grouped-query attention repeats each KV head;
``softcap`` is ``c * tanh(x / c)`` before the mask; a row whose bias masks every key gives 0.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...graph.ops import dims as D
from .table import converter


def _check(attrs, opset, proto):
    for key in ("left_window_size", "right_window_size"):
        if attrs.get(key, -1) != -1:
            return f"Attention with {key} (a sliding window) is not supported"
    if len(proto.input) > 6 and proto.input[6]:
        return "Attention with nonpad_kv_seqlen (an external KV cache) is not supported"
    return None


def _heads(node, x, heads: int, what: str):
    """(b, s, heads*d) -> (b, heads, s, d)."""
    b, s, hidden = x.type.shape
    d = D.dim_div_exact(hidden, heads)
    if d is None:
        raise ShapeError(f"the {what}'s hidden size {hidden} is not a multiple of its {heads} heads")
    return node.call("transpose", node.call("reshape", x, newshape=(b, s, heads, d)), axes=(0, 2, 1, 3))


def _neg_inf(node, dtype):
    return node.const_like(-np.inf, dtype)


@converter("Attention", since=23, check=_check)
def _attention(node):
    q, k, v = node.input(0), node.input(1), node.input(2)
    dtype = q.type.dtype
    rank = q.type.ndim
    if rank == 3:
        qh, kvh = node.attr("q_num_heads"), node.attr("kv_num_heads")
        if not qh or not kvh:
            raise ShapeError("3-D Q, K, V need the q_num_heads and kv_num_heads attributes")
        q, k, v = _heads(node, q, qh, "query"), _heads(node, k, kvh, "key"), _heads(node, v, kvh, "value")
    elif rank != 4:
        raise ShapeError(f"Q must be 3-D or 4-D, got {q.type}")
    head = q.type.shape[3]
    scale = node.attr("scale")
    if scale is None:
        if not isinstance(head, int):
            raise UnsupportedOpError(f"the default scale needs a static head size, got {head}")
        scale = 1.0 / math.sqrt(head)
    root = node.const_like(math.sqrt(scale), dtype)
    if node.has(4) != node.has(5):
        raise ShapeError("past_key and past_value come together")
    past = node.type(4).shape[2] if node.has(4) else 0
    present_k = node.call("concat", node.input(4), k, axis=2) if node.has(4) else k
    present_v = node.call("concat", node.input(5), v, axis=2) if node.has(5) else v
    keys, values = present_k, present_v
    hq, hk = q.type.shape[1], keys.type.shape[1]
    if hq != hk:  # grouped-query attention: each KV head serves hq // hk query heads, in turn
        if not (isinstance(hq, int) and isinstance(hk, int) and hq % hk == 0):
            raise ShapeError(f"{hq} query heads cannot share {hk} key/value heads")
        keys, values = (_repeat_heads(node, t, hq // hk) for t in (keys, values))
    scores = node.call("nn.matmul", node.call("multiply", q, root),
                       node.call("transpose", node.call("multiply", keys, root), axes=(0, 1, 3, 2)))
    softcap = node.attr("softcap", 0.0) or 0.0
    if softcap > 0:
        c = node.const_like(softcap, dtype)
        scores = node.call("multiply", node.call("tanh", node.call("divide", scores, c)), c)
    sq, skv = scores.type.shape[2], scores.type.shape[3]
    bias = _mask_bias(node, sq, skv, dtype) if node.has(3) else None
    if node.attr("is_causal", 0):
        causal = _causal_bias(node, sq, skv, past, dtype)
        bias = causal if bias is None else node.call("add", bias, causal)
    logits = node.call("add", scores, bias) if bias is not None else scores
    probs = node.call("nn.softmax", logits, axis=-1)
    if bias is not None:  # a row whose bias masks every key attends to nothing: 0, not NaN
        none = node.call("equal", node.call("max", bias, axis=(-1,), keepdims=True), _neg_inf(node, dtype))
        probs = node.call("where", none, node.const_like(0, dtype), probs)
    y = node.call("nn.matmul", probs, values)
    if rank == 3:
        b, h, s, d = y.type.shape
        y = node.call("reshape", node.call("transpose", y, axes=(0, 2, 1, 3)), newshape=(b, s, D.dim_mul(h, d)))
    mode = node.attr("qk_matmul_output_mode", 0)
    qk = {2: logits, 3: probs}.get(mode, scores)
    return [y, present_k, present_v, qk]


def _repeat_heads(node, t, rep: int):
    """(b, h, s, d) -> (b, h*rep, s, d) with each head repeated ``rep`` times in place."""
    b, h, s, d = t.type.shape
    one = node.call("reshape", t, newshape=(b, h, 1, s, d))
    return node.call("reshape", node.call("expand", one, shape=(b, h, rep, s, d)),
                     newshape=(b, D.dim_mul(h, rep), s, d))


def _mask_bias(node, sq, skv, dtype):
    """The attention mask as an additive bias (a boolean one: 0 where True, -inf where False),
    padded with -inf past its last key."""
    m = node.input(3)
    last = m.type.shape[-1]
    if last != skv:
        width = D.dim_sub(skv, last)
        if not isinstance(width, int):
            raise UnsupportedOpError(f"a mask of {last} keys for {skv} keys needs static sizes")
        pads = [0] * (2 * m.type.ndim)
        pads[2 * m.type.ndim - 1] = width
        fill = False if m.type.dtype == "bool" else -np.inf
        m = node.call("pad", m, pad_width=tuple(pads), mode="constant", pad_value=fill)
    if m.type.dtype == "bool":
        return node.call("where", m, node.const_like(0, dtype), _neg_inf(node, dtype))
    return m if m.type.dtype == dtype else node.call("cast", m, dtype=dtype)


def _causal_bias(node, sq, skv, past, dtype):
    """0 where key ``j <= i + past`` for query ``i``, else -inf: a (sq, skv) bias."""
    rows = node.call("reshape", node.call("range", start=0, stop=sq, step=1, dtype="int64"), newshape=(sq, 1))
    cols = node.call("reshape", node.call("range", start=0, stop=skv, step=1, dtype="int64"), newshape=(1, skv))
    limit = node.call("add", rows, node.const_like(past, "int64")) if not isinstance(past, int) or past else rows
    if not isinstance(past, int):
        raise UnsupportedOpError("causal attention over a past of symbolic length is not supported yet")
    allowed = node.call("less_equal", cols, limit)
    return node.call("where", allowed, node.const_like(0, dtype), _neg_inf(node, dtype))


@converter("RotaryEmbedding", since=23)
def _rotary_embedding(node):
    """Rotary position embedding (opset 23): the first ``rotary_embedding_dim`` features of each
    head rotate by the angles in the cos/sin caches (indexed by ``position_ids`` when given),
    as halves or as interleaved pairs; elementwise ops that fuse."""
    x, cos, sin = node.input(0), node.input(1), node.input(2)
    rank = x.type.ndim
    if rank == 4:  # (batch, heads, seq, head) -> (batch, seq, heads, head)
        x = node.call("transpose", x, axes=(0, 2, 1, 3))
    elif rank == 3:
        heads = node.attr("num_heads", 0)
        hidden = x.type.shape[2]
        if not heads or not isinstance(hidden, int) or hidden % heads:
            raise ShapeError(f"a 3-D input needs num_heads dividing its hidden size, got {heads} for {x.type}")
        b, s = x.type.shape[:2]
        x = node.call("reshape", x, newshape=(b, s, heads, hidden // heads))
    else:
        raise ShapeError(f"the input must be 3-D or 4-D, got {x.type}")
    head = x.type.shape[3]
    if not isinstance(head, int):
        raise ShapeError(f"the head size must be static, got {x.type}")
    rot = node.attr("rotary_embedding_dim", 0) or head
    half = rot // 2
    if node.has(3):  # caches indexed by position: (max position, half) -> (batch, seq, half)
        cos = node.call("gather", cos, node.input(3), axis=0)
        sin = node.call("gather", sin, node.input(3), axis=0)
    if cos.type.shape[-1] != half or sin.type.shape[-1] != half:
        raise ShapeError(f"the caches' last dimension must be rotary_embedding_dim / 2 = {half}, "
                         f"got {cos.type} and {sin.type}")
    cos = node.call("unsqueeze", cos, axes=(2,))
    sin = node.call("unsqueeze", sin, axes=(2,))

    def part(begin, end, step=1):
        return node.call("strided_slice", x, begin=(begin,), end=(end,), axes=(3,), strides=(step,))

    if node.attr("interleaved", 0):
        x1, x2 = part(0, rot, 2), part(1, rot, 2)
    else:
        x1, x2 = part(0, half), part(half, rot)
    real = node.call("subtract", node.call("multiply", cos, x1), node.call("multiply", sin, x2))
    imag = node.call("add", node.call("multiply", sin, x1), node.call("multiply", cos, x2))
    if node.attr("interleaved", 0):
        pairs = node.call("concat", node.call("unsqueeze", real, axes=(4,)), node.call("unsqueeze", imag, axes=(4,)),
                          axis=4)
        rotated = node.call("reshape", pairs, newshape=tuple(x.type.shape[:3]) + (rot,))
    else:
        rotated = node.call("concat", real, imag, axis=3)
    out = rotated if rot == head else node.call("concat", rotated, part(rot, head), axis=3)
    if rank == 4:
        return [node.call("transpose", out, axes=(0, 2, 1, 3))]
    return [node.call("reshape", out, newshape=tuple(node.input(0).type.shape))]
