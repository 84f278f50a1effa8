"""Fold a per-channel scale of a blocked convolution's input into the convolution.

A squeeze-excitation block (EfficientNet, MobileNetV3, RegNetY) ends in ``x * s``: the
depthwise conv's output scaled by one factor per channel, read only by the 1x1 projection
conv that follows. As its own kernel that product is a pass over ``x`` (read, written, read
again by the conv) and one more parallel region per block -- 5-6% of EfficientNet-B0.
``conv(x * s, W) = sum_c x_c (s_c W_c)``: the conv takes ``s`` as a third operand and scales
its weight vectors as it reads them, one product per weight vector and block of columns
(``nn.conv2d_nchwc``'s ``scale``).

Only where those products are cheap against the pass they save: a plane larger than one
task's (``SMALL_PLANE``: a small plane is read whole per output-channel block, each weight
vector scaled for a few columns; measured 1.05x slower at 7x7, 0.89-0.92x at 56x56, even at
14x14), and a projection that narrows the channels at least 2x (an inverted residual's, after
its expansion: the pass over the wide input is large against the conv's work per output
channel -- on RegNetY's, as wide out as in, the products cost more than the pass: 28x28 convs
1.1-1.25x slower against 0.13x saved); no spatial padding (the padding is zero in ``x * s``
whatever ``s`` is), groups of 1, and ``x * s`` read by nothing else. EfficientNet-B0: 11
products folded, 0.988x the time.
"""
from __future__ import annotations

from typing import Optional

from ..ir import Call, Module
from ..ops import infer_type
from ..visit import use_counts
from .context import PassContext, graph_pass, rewrite_main


def _per_channel(s, x) -> bool:
    """``s`` is one value per channel (and sample) of blocked ``x``: ``N|1 C/b 1 1 b``."""
    a, b = s.type, x.type
    return a.ndim == 5 and b.ndim == 5 and tuple(a.shape[1:]) == (b.shape[1], 1, 1, b.shape[4]) \
        and a.shape[0] in (1, b.shape[0]) and a.dtype == b.dtype


def _operands(n: Call, uses: dict) -> Optional[tuple]:
    """``(x, s)`` when ``n`` (of the unrewritten graph, whose use counts ``uses`` holds) is a
    conv to fold ``x * s`` into, else None."""
    from ...kernels.common import likely_int
    from ...kernels.conv_nchwc import SMALL_PLANE

    if n.op != "nn.conv2d_nchwc" or len(n.args) != 2 or n.attr("groups", 1) != 1 or any(n.attr("padding", None) or ()):
        return None
    m = n.args[0]
    if not (isinstance(m, Call) and m.op == "multiply" and uses.get(m) == 1 and m.type.ndim == 5):
        return None
    # (a symbolic plane -- dynamic height and width -- at its likely size)
    oh, ow = (d if isinstance(d, int) else likely_int(d.expr) for d in n.type.shape[2:4])
    if not (oh is not None and ow is not None and oh * ow > SMALL_PLANE):
        return None
    if m.type.shape[1] * m.type.shape[4] < 2 * n.type.shape[1] * n.type.shape[4]:
        return None  # not a narrowing projection
    for x, s in (m.args, m.args[::-1]):
        if tuple(x.type.shape) == tuple(m.type.shape) and _per_channel(s, x):
            return x, s
    return None


@graph_pass("fold_channel_scale", opt_level=2)
def fold_channel_scale(mod: Module, ctx: PassContext) -> Module:
    """Fold ``nn.conv2d_nchwc(x * s, W)``, ``s`` per channel, into the conv (see the module
    docstring)."""
    uses = use_counts(mod.main.body)  # (of the graph as it was: a fold rebuilds the nodes above it)

    def fold(new, n, get):
        found = _operands(n, uses) if isinstance(n, Call) else None
        if found is None:
            return None
        args = [get(found[0]), new.args[1], get(found[1])]
        return Call(n.op, args, n.attrs, infer_type(n.op, [a.type for a in args], n.attrs), span=n.span)

    return rewrite_main(mod, fold, original=True)


__all__ = ["fold_channel_scale"]
