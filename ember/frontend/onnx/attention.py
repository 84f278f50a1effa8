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
from ...graph import Constant
from ...graph.ops import dims as D
from .table import converter


def _check(attrs, opset, proto):
    if len(proto.input) > 6 and proto.input[6] and len(proto.input) > 4 and proto.input[4]:
        return "Attention with both nonpad_kv_seqlen and a past key/value is invalid"
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
    nonpad = node.input(6) if node.has(6) else None  # an external cache: keys past it per batch are padding
    if node.attr("is_causal", 0):
        causal = _causal_bias(node, sq, skv, past, dtype, nonpad)
        bias = causal if bias is None else node.call("add", bias, causal)
    left, right = node.attr("left_window_size", -1), node.attr("right_window_size", -1)
    if left >= 0 or right >= 0:
        window = _window_bias(node, sq, skv, past, dtype, left, right, nonpad)
        bias = window if bias is None else node.call("add", bias, window)
    if nonpad is not None:
        cols = node.call("reshape", node.call("range", start=0, stop=skv, step=1, dtype="int64"),
                         newshape=(1, 1, 1, skv))
        valid = node.call("less", cols, _per_batch(node, nonpad))
        pad = node.call("where", valid, node.const_like(0, dtype), _neg_inf(node, dtype))
        bias = pad if bias is None else node.call("add", bias, pad)
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


def _per_batch(node, nonpad):
    """The valid key counts, (batch,) -> (batch, 1, 1, 1) int64."""
    n = node.call("cast", nonpad, dtype="int64") if nonpad.type.dtype != "int64" else nonpad
    return node.call("reshape", n, newshape=(nonpad.type.shape[0], 1, 1, 1))


def _diff(node, sq, skv, past, nonpad=None):
    """``(i + offset) - j`` for query ``i`` and key ``j``: how far key ``j`` lies before the
    query's absolute position. ``offset`` is the past's length, or with an external cache
    ``nonpad[b] - sq`` per batch (then a (batch, 1, sq, skv) tensor, else (sq, skv))."""
    if not isinstance(past, int) or not isinstance(sq, int):
        raise UnsupportedOpError("causal or windowed attention needs a static query and past length")
    rows = node.call("reshape", node.call("range", start=0, stop=sq, step=1, dtype="int64"), newshape=(sq, 1))
    cols = node.call("reshape", node.call("range", start=0, stop=skv, step=1, dtype="int64"), newshape=(1, skv))
    if nonpad is not None:
        offset = node.call("subtract", _per_batch(node, nonpad), Constant(np.array(sq, np.int64)))
        rows = node.call("add", rows, offset)
    elif past:
        rows = node.call("add", rows, Constant(np.array(past, np.int64)))
    return node.call("subtract", rows, cols)


def _allowed_bias(node, allowed, dtype):
    return node.call("where", allowed, node.const_like(0, dtype), _neg_inf(node, dtype))


def _causal_bias(node, sq, skv, past, dtype, nonpad=None):
    """0 where key ``j <= i + offset`` for query ``i``, else -inf (bottom-right aligned)."""
    diff = _diff(node, sq, skv, past, nonpad)
    return _allowed_bias(node, node.call("greater_equal", diff, Constant(np.array(0, np.int64))), dtype)


def _window_bias(node, sq, skv, past, dtype, left: int, right: int, nonpad=None):
    """0 where ``-right <= (i + offset) - j <= left`` (a side of -1 is unbounded), else -inf."""
    diff = _diff(node, sq, skv, past, nonpad)
    conds = []
    if left >= 0:
        conds.append(node.call("less_equal", diff, Constant(np.array(left, np.int64))))
    if right >= 0:
        conds.append(node.call("greater_equal", diff, Constant(np.array(-right, np.int64))))
    allowed = conds[0] if len(conds) == 1 else node.call("logical_and", *conds)
    return _allowed_bias(node, allowed, dtype)


@converter("RotaryEmbedding", since=23)
def _rotary_embedding(node):
    """Rotary position embedding (opset 23): the first ``rotary_embedding_dim`` features of each
    head rotate by the angles in the cos/sin caches (indexed by ``position_ids`` when given),
    as halves or as interleaved pairs; elementwise ops that fuse."""
    return rotary(node, node.input(0), node.input(1), node.input(2), node.input(3) if node.has(3) else None)


def rotary(node, x, cos, sin, positions, interleaved=None, dim=None):
    """The rotation of :func:`_rotary_embedding` (attributes from ``node`` unless given): shared
    with the contrib ops, whose inputs come in another order (GroupQueryAttention's attributes
    have other names)."""
    interleaved = node.attr("interleaved", 0) if interleaved is None else interleaved
    rank, shape = x.type.ndim, x.type.shape
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
    rot = (node.attr("rotary_embedding_dim", 0) if dim is None else dim) or head
    half = rot // 2
    if positions is not None:  # caches indexed by position: (max position, half) -> (batch, seq, half)
        cos = node.call("gather", cos, positions, axis=0)
        sin = node.call("gather", sin, positions, axis=0)
    if cos.type.shape[-1] != half or sin.type.shape[-1] != half:
        raise ShapeError(f"the caches' last dimension must be rotary_embedding_dim / 2 = {half}, "
                         f"got {cos.type} and {sin.type}")
    cos = node.call("unsqueeze", cos, axes=(2,))
    sin = node.call("unsqueeze", sin, axes=(2,))

    def part(begin, end, step=1):
        return node.call("strided_slice", x, begin=(begin,), end=(end,), axes=(3,), strides=(step,))

    if interleaved:
        x1, x2 = part(0, rot, 2), part(1, rot, 2)
    else:
        x1, x2 = part(0, half), part(half, rot)
    real = node.call("subtract", node.call("multiply", cos, x1), node.call("multiply", sin, x2))
    imag = node.call("add", node.call("multiply", sin, x1), node.call("multiply", cos, x2))
    if interleaved:
        pairs = node.call("concat", node.call("unsqueeze", real, axes=(4,)), node.call("unsqueeze", imag, axes=(4,)),
                          axis=4)
        rotated = node.call("reshape", pairs, newshape=tuple(x.type.shape[:3]) + (rot,))
    else:
        rotated = node.call("concat", real, imag, axis=3)
    out = rotated if rot == head else node.call("concat", rotated, part(rot, head), axis=3)
    if rank == 4:
        return [node.call("transpose", out, axes=(0, 2, 1, 3))]
    return [node.call("reshape", out, newshape=tuple(shape))]
