"""``aten.scaled_dot_product_attention``, kept whole by the frontend's decompositions.

torch's own decomposition of it returns a tensor whose strides differ from eager's, and a
model that views the result (GPT-2's ``attn_output.view(-1, ...)``) then fails to re-trace;
kept, it becomes ``softmax(q @ k^T * scale + mask) @ v`` here: two batched products and a
softmax that Ember fuses with the scaling and the mask.
"""
from __future__ import annotations

import math

from ...graph.ops import dims as D
from .table import converter


def _check(fx_node):
    args = list(fx_node.args) + [None] * 5
    p = fx_node.kwargs.get("dropout_p", args[4]) or 0.0
    return f"dropout_p={p} (training): call model.eval()" if p else None


def _repeat_heads(node, t, times: int):
    """``t`` (B, H, S, E) with each head repeated ``times`` times (grouped-query attention)."""
    b, h, s, e = t.type.shape
    t = node.call("unsqueeze", t, axes=(2,))
    t = node.call("expand", t, shape=(b, h, times, s, e))
    return node.call("reshape", t, newshape=(b, D.dim_mul(h, times), s, e))


@converter("aten.scaled_dot_product_attention.default", check=_check)
def _sdpa(node):
    q, k, v = node.tensor(0), node.tensor(1), node.tensor(2)
    mask = node.arg("attn_mask", None)
    causal = bool(node.arg("is_causal", False))
    scale = node.arg("scale", None)
    d = q.type.dtype
    e = q.type.shape[-1]
    if node.arg("enable_gqa", False) and q.type.ndim == 4 and q.type.shape[1] != k.type.shape[1]:
        times = q.type.shape[1] // k.type.shape[1]
        k, v = _repeat_heads(node, k, times), _repeat_heads(node, v, times)
    nd = k.type.ndim
    kt = node.call("transpose", k, axes=tuple(range(nd - 2)) + (nd - 1, nd - 2))
    s = node.call("nn.matmul", q, kt)
    if scale is None:
        factor = node.call("rsqrt", node.as_tensor(e, d)) if not isinstance(e, int) else node.scalar(1 / math.sqrt(e), d)
    else:
        factor = node.scalar(float(scale), d)
    s = node.call("multiply", s, factor)
    if causal:  # keep column j <= row i (the upper-left-aligned triangle, as torch does)
        rows, cols = s.type.shape[-2], s.type.shape[-1]
        i = node.call("reshape", node.call("range", start=0, stop=rows, dtype="int64"), newshape=(rows, 1))
        j = node.call("range", start=0, stop=cols, dtype="int64")
        s = node.call("where", node.call("less_equal", j, i), s, node.scalar(-math.inf, d))
    if mask is not None:
        if mask.type.dtype == "bool":
            s = node.call("where", mask, s, node.scalar(-math.inf, d))
        else:
            s = node.call("add", s, node.as_tensor(mask, d))
    p = node.call("nn.softmax", s, axis=-1)
    return node.call("nn.matmul", p, v)
