"""Parallel convolutions of one input, added, as one convolution.

Convolution is linear in its weights: ``conv(x, W1) + conv(x, W2) = conv(x, W1 + W2)`` when
both windows line up, a smaller kernel embedded at its offset in the larger one (a 1x1 at the
center of a 3x3 "same" conv), and a per-channel ``x * s + t`` is the conv of ``x`` by a kernel
holding ``s`` at the center of each channel's own filter. Multi-branch blocks made to train
well and run as one conv -- RepVGG's 3x3 + 1x1 + identity batch norm, MobileOne's, ACNet's
and DBB's -- are often exported with their branches (timm exports RepVGG so): each branch then
reads the input and writes its output once more, and the adds read them back. Here the sum of
the branches becomes one convolution, its weights and bias graph expressions over the
branches' constants (``fold_constant`` computes them), the reparameterization those models'
authors do by hand.

Merged pairwise, bottom-up, so a chain of adds merges whole. Only branches read nowhere else
(their work would be done twice), float32, constant weights, the same strides and groups,
dilation 1 where the kernels differ, and windows that line up (the same output; the smaller
kernel's padding a part of the larger's).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import Call, Constant, Module
from ..types import TensorType
from ..visit import use_counts
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call
from .pack_conv_weights import _constant_valued


class _Term:
    """``conv(x, w) + bias`` (``w`` None: ``x * scale + bias``, an identity branch), with the
    conv's geometry; ``bias``/``scale`` are (C,) expressions or None."""

    def __init__(self, x, w, bias, scale=None, conv: Optional[Call] = None):
        self.x, self.w, self.bias, self.scale, self.conv = x, w, bias, scale, conv


def _channels(e, C: int):
    """``e`` as a (C,) expression when it holds one value per channel of an ``N C H W`` tensor
    (shaped ``C``, ``C 1 1`` or ``1 C 1 1``) and reads no variable; else None."""
    t = e.type
    if not isinstance(t, TensorType) or t.dtype != "float32" or not _constant_valued(e):
        return None
    if tuple(t.shape) == (C,):
        return e
    if tuple(t.shape) in ((C, 1, 1), (1, C, 1, 1)):
        return _call("reshape", [e], {"newshape": (C,)}, None)
    return None


def _term(e) -> Optional[_Term]:
    """``e`` as a branch: a 2-D conv by constant weights plus an optional per-channel bias, or
    ``x * s (+ t)`` per channel; None otherwise."""
    if not isinstance(e.type, TensorType) or e.type.dtype != "float32" or e.type.ndim != 4 \
            or not isinstance(e.type.shape[1], int):
        return None
    C = e.type.shape[1]
    bias = None
    if isinstance(e, Call) and e.op in ("nn.bias_add", "add") and len(e.args) == 2:
        inner, b = e.args
        if e.op == "nn.bias_add" and e.attr("axis", 1) not in (1, -3):
            return None
        bias = _channels(b, C)
        if bias is None and e.op == "add":
            inner, b = b, inner
            bias = _channels(b, C)
        if bias is not None:
            e = inner
    if isinstance(e, Call) and e.op == "nn.conv2d" and _constant_valued(e.args[1]) \
            and isinstance(e.args[1].type, TensorType) and e.args[1].type.is_static:
        return _Term(e.args[0], e.args[1], bias, conv=e)
    if isinstance(e, Call) and e.op == "multiply":
        for x, s in (e.args, e.args[::-1]):
            sc = _channels(s, C)
            if sc is not None and isinstance(x.type, TensorType) and tuple(x.type.shape) == tuple(e.type.shape):
                return _Term(x, None, bias, scale=sc)
    return None


def _window(conv: Call) -> tuple:
    """(kernel (kh, kw), strides, padding (t, l, b, r), dilation, groups) of a 2-D conv."""
    k = tuple(conv.args[1].type.shape[2:])
    return (k, tuple(conv.attr("strides", None) or (1, 1)), tuple(conv.attr("padding", None) or (0, 0, 0, 0)),
            tuple(conv.attr("dilation", None) or (1, 1)), conv.attr("groups", 1))


def _offset(big: tuple, small: tuple) -> Optional[tuple]:
    """Where kernel ``small`` sits inside ``big`` (windows as :func:`_window`), or None where
    their windows do not line up."""
    (K, S, P, D, G), (k, s, p, d, g) = big, small
    if S != s or G != g:
        return None
    if (k != (1, 1) and d != D) or (k != K and D != (1, 1)):
        return None  # (a 1x1 kernel's dilation is moot; an embedded one needs contiguous taps)
    off = []
    for i in range(2):
        o = P[i] - p[i]
        if o < 0 or o + k[i] > K[i] or P[i] + P[i + 2] - K[i] != p[i] + p[i + 2] - k[i]:
            return None
        off.append(o)
    return tuple(off)


def _merge(a: _Term, b: _Term, out: TensorType) -> Optional[Call]:
    if a.w is None:
        a, b = b, a
    if a.w is None or a.x is not b.x:
        return None
    big = _window(a.conv)
    C = out.shape[1]
    if b.w is not None:
        small = _window(b.conv)
        if small[0][0] * small[0][1] > big[0][0] * big[0][1]:
            a, b, big, small = b, a, small, big
        off = _offset(big, small)
        if off is None:
            return None
        extra = b.w
    else:  # x * s: the conv of x by s at the center of each channel's own filter
        if tuple(a.x.type.shape) != tuple(out.shape):
            return None
        cg = a.w.type.shape[1]
        off = _offset(big, ((1, 1), big[1], (0, 0, 0, 0), (1, 1), big[4]))
        if off is None or big[1] != (1, 1):
            return None
        mask = np.zeros((C, cg, 1, 1), np.float32)
        mask[np.arange(C), np.arange(C) % cg] = 1.0
        extra = _call("multiply", [Constant(mask), _call("reshape", [b.scale], {"newshape": (C, 1, 1, 1)}, None)],
                      {}, None)
    kh, kw = big[0]
    eh, ew = extra.type.shape[2:]
    if (eh, ew) != (kh, kw):
        pads = (0, 0, off[0], off[1], 0, 0, kh - eh - off[0], kw - ew - off[1])
        extra = _call("pad", [extra], {"pad_width": pads}, None)
    w = _call("add", [a.w, extra], {}, None)
    conv = _call("nn.conv2d", [a.x, w], dict(a.conv.attrs), a.conv.span)
    biases = [t.bias for t in (a, b) if t.bias is not None]
    if not biases:
        return conv if conv.type == out else None
    bias = biases[0] if len(biases) == 1 else _call("add", biases, {}, None)
    merged = _call("nn.bias_add", [conv, bias], {"axis": 1}, None)
    return merged if merged.type == out else None


@graph_pass("merge_branches", opt_level=2)
def merge_branches(mod: Module, ctx: PassContext) -> Module:
    """Add the weights of parallel convolutions of one input, added (see the module docstring)."""
    uses = use_counts(mod.main.body)

    def visit(new, old, get):
        if not (isinstance(new, Call) and new.op == "add" and len(new.args) == 2) \
                or any(uses.get(o, 0) != 1 for o in old.args):
            return None
        a, b = (_term(e) for e in new.args)
        if a is None or b is None:
            return None
        # (a branch's conv read by anything else would run twice)
        for o in old.args:
            inner = o.args[0] if isinstance(o, Call) and o.op in ("nn.bias_add", "add") else o
            if isinstance(inner, Call) and inner.op == "nn.conv2d" and uses.get(inner, 0) > 1:
                return None
        return _merge(a, b, new.type)

    return rewrite_main(mod, visit, original=True)


__all__ = ["merge_branches"]
