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
