"""The blocked channel layout (NCHW[b]c) for convolutional regions.

A 2-D convolution with constant weights (a trained model's) and output channels in whole
blocks becomes ``unblock_channels(nn.conv2d_nchwc(x, nn.pack_conv_weight(W, block=FB)))``:
its kernel writes ``N F/FB H W FB``, vectorized over output channels
(``ember.kernels.conv_nchwc``), and ``fold_constant`` (run next) packs the weights once. Then,
bottom-up, the layout change moves past what works as well on blocks:

- ``conv2d_nchwc(unblock_channels(y))`` reads ``y`` itself (any block);
- an elementwise or broadcast op whose operands are ``unblock_channels`` of the same blocked
  shape, scalars, per-channel values (a bias ``C 1 1``, or ``nn.bias_add``'s) or plain tensors of the result's
  shape (a residual from outside the region) runs on the blocks -- those operands blocked
  too (``block_channels``, folded when constant) -- and is unblocked after;
- a ``concat`` along the channels of such operands (plain ones in whole blocks) concatenates
  the blocks, and one along H or W of operands blocked alike concatenates them there; a
  ``split`` along the channels into whole blocks splits the blocks;
- a max or average pool of a blocked operand pools the blocks (``blocked=True``);
- a reduction over spatial axes that keeps them (squeeze-excitation's global mean) reduces
  the blocks, and an elementwise op may broadcast such a ``N C/b 1 1 b`` result back over the
  plane;
- a depthwise conv, or a grouped one whose groups lie within blocks, filters each block on
  its own (``groups``; each filter reads only its group's channels);
- a GroupNorm of one group (``reshape -> instance_norm -> reshape``) normalizes the blocks as
  they lie (its statistics take every element of a sample).

So a ResNet's convolutions, biases, activations and residual adds, and a MobileNet's or an
EfficientNet's depthwise convs and squeeze-excitations, all stay blocked, and the layout
changes only where something else reads the region (a flatten, the model's output, a conv
with few filters). Output channels that are not a multiple of the block pad the last block
with zero filters; ``unblock_channels(y, channels=F)`` keeps the first F. Elementwise ops,
pools and reductions carry the padding along lane by lane, and a conv reads it against zero
weights -- where the padding is finite (:func:`_finite_padding`: it came from zero filters
or zero fill through ops that keep finite values finite); otherwise the conv reads the plain
layout. A concat along the channels stops padding. Convolutions that do not qualify (groups
across blocks, 1-D/3-D, runtime weights, fewer channels than a vector, not float32) keep the
plain layout; a conv of fewer channels than a block (two vectors) is blocked by one vector.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import Call, Constant, Module, Tuple, TupleGetItem
from ..ops import get_op
from ..ops.reduce import reduced_axes
from ..ops.registry import Pattern
from ..types import TensorType
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call
from .integer_products import _value, integer_dot
from .pack_conv_weights import _constant_valued
from .sink_reshapes import VIEWED as _VIEWED  # (their attributes name an axis or shape of the plain layout)

_FLOW = (Pattern.ELEMWISE, Pattern.BROADCAST)
# ops whose result is finite where their operands are (overflow aside): padding lanes that
# went only through these stay finite, so zero weights cancel them
_FINITE = {"add", "subtract", "multiply", "maximum", "minimum", "negative", "abs", "clip", "cast",
           "sigmoid", "tanh", "erf", "floor", "ceil", "round", "sign", "nn.relu", "nn.leaky_relu", "nn.prelu",
           "nn.hard_sigmoid", "nn.hard_swish", "nn.gelu", "nn.elu", "nn.celu", "nn.selu", "nn.mish",
           "nn.softsign", "nn.shrink", "nn.thresholded_relu", "nn.bias_add", "where"}
_REDUCE = ("mean", "sum", "max", "min")


def _blocked(e):
    """``y`` when ``e`` is ``unblock_channels(y)``, else None."""
    return e.args[0] if isinstance(e, Call) and e.op == "unblock_channels" else None


def _padded(e) -> bool:
    """``e`` is ``unblock_channels(y)`` of a ``y`` whose last block is padded."""
    return _blocked(e) is not None and e.attr("channels", 0) != 0


def _unblock(y, plain: TensorType, span) -> Call:
    """``y`` back in the plain layout of ``plain``: the first ``plain``'s channels of its blocks."""
    padded = y.type.shape[1] * y.type.shape[-1] != plain.shape[1]
    return _call("unblock_channels", [y], {"channels": plain.shape[1]} if padded else {}, span)


def _static(*types) -> bool:
    """Tensors whose channels (axis 1) are a known number: the batch and the spatial sizes
    may be symbolic (a dynamic batch keeps the blocked layout)."""
    return all(isinstance(t, TensorType) and (t.ndim < 2 or isinstance(t.shape[1], int)) for t in types)


def _finite_padding(y) -> bool:
    """The padding lanes of blocked ``y`` hold finite values: they come from zero filters (a
    blocked conv's), zero fill (``block_channels``) or an unpadded region, through ops that
    keep finite values finite. A conv may then read them against zero weights."""
    def sources(e):
        """The blocked operands ``e``'s padding comes from, or whether it is finite outright."""
        if isinstance(e, Call):
            if e.op == "block_channels":
                return True
            if e.op == "nn.conv2d_nchwc":
                return [a for a in e.args[:1] if a.type.ndim == 5]
            if e.op in _FINITE or e.op in _POOLS or e.op in _REDUCE or e.op in ("concat", "reshape", "bitcast"):
                return [a for a in e.args if a.type.ndim == 5]
            return False
        return e.type.ndim != 5  # a plain or constant operand: broadcast lanes hold real values

    # (an explicit stack: a region runs through hundreds of convs, past Python's recursion limit)
    seen: dict = {}
    stack = [y]
    while stack:
        e = stack[-1]
        if id(e) in seen:
            stack.pop()
            continue
        src = sources(e)
        if isinstance(src, bool):
            seen[id(e)] = src
        elif any(id(a) not in seen for a in src):
            stack.extend(a for a in src if id(a) not in seen)
            continue
        else:
            seen[id(e)] = all(seen[id(a)] for a in src)
        stack.pop()
    return seen[id(y)]


def _bf16_conv(src, w, fb: int, attrs: dict, span):
    """The blocked conv of float32 ``src`` (``N C/cb H W cb``) by constant ``w`` as packed dots
    over bfloat16 pairs of channels (``precision="bf16"``): the data cast (an epilogue of its
    producer where it fuses) and read as int32 words, ``N C/cb H W cb/2`` (a view); the
    weights cast and packed with each output lane's two channels in one word, at compile time;
    float32 sums. None where a block holds an odd number of channels."""
    if src.type.dtype != "float32" or src.type.shape[-1] % 2:
        return None
    data = _call("bitcast", [_call("cast", [src], {"dtype": "bfloat16"}, span)], {"dtype": "int32"}, span)
    packed = _call("nn.pack_conv_weight", [_call("cast", [w], {"dtype": "bfloat16"}, span)], {"block": fb}, span)
    fo, c, kh, kw, b = packed.type.shape
    pairs = _call("reshape", [packed], {"newshape": (fo, c // 2, 2, kh, kw, b)}, span)
    pairs = _call("transpose", [pairs], {"axes": (0, 1, 3, 4, 5, 2)}, span)  # (a lane's two channels together)
    words = _call("bitcast", [pairs], {"dtype": "int32"}, span)
    words = _call("reshape", [words], {"newshape": (fo, c // 2, kh, kw, b)}, span)
    return _call("nn.conv2d_nchwc", [data, words], {**attrs, "dot": "dot_bf16x2"}, span)


def _reads_padding(attrs: dict) -> bool:
    """Whether a conv with these attributes reads its pad value. Without padding it never does
    (the columns a tile reads past a row's end make outputs it does not store), so a quantized
    conv pads with 0 there, not its zero point: convs of every zero point then share a kernel
    (EfficientNet-B0 QDQ's 1x1s, at both tiers)."""
    return any(attrs.get("padding") or ())


def _integer_conv(n: Call, target, saturating: bool = False, channels_last: tuple = ()):
    """``nn.conv2d_integer`` on blocked uint8 data as packed dots over four channels
    (``vpdpbusd``): the data read as int32 words (a view; blocked here if its producer was not),
    the weights packed in numpy with each lane's four channels in one word, the padding at the
    zero point and ``zero * colsum`` taken from the sums after; None where the blocks cannot be
    read as words (the plain kernel then runs it)."""
    from ...kernels.conv_nchwc import channel_block

    x, w = n.args
    if not _static(x.type, n.type) or not isinstance(w, Constant):
        return None
    F, C, kh, kw = w.type.shape
    dot = integer_dot(target, w.value, axis=1, saturating=saturating)
    if dot is None:
        return None
    fb = channel_block("int32", target, F)
    if dot in channels_last and F % fb == 0:
        # one block of all the channels: (N, 1, H, W, C) is nhwc, the layout an offload
        # backend's quantized kernels on this dot read (``Backend.int8_channels_last``)
        fb = F
        if C % 4 == 0 and (_blocked(x) is None or _blocked(x).type.shape[1] != 1):
            x = _call("unblock_channels", [_call("block_channels", [x], {"block": C}, n.span)], {}, n.span)
    src = _blocked(x)
    if src is None:
        # a stem's few channels (three) in one block of four: one word per pixel, the fourth
        # channel's weights zero
        block = fb if C % fb == 0 else -(-C // 4) * 4 if C < 4 else None
        if block is None:
            return None
        src = _call("block_channels", [x], {"block": block}, n.span)
    cb = src.type.shape[-1]
    if cb % 4:
        return None
    cp = src.type.shape[1] * cb  # (the blocks' channels: zero weights for a padded last block)
    wv = np.zeros((-(-F // fb) * fb, cp, kh, kw), np.int8)
    wv[:F, :C] = w.value
    if dot == "dot_i16x2":
        # int16 pairs: block word i's channels (4i, 4i+2) at i, (4i+1, 4i+3) at cb/4 + i, as the
        # conv's copy of the data widens them (conv2d_nchwc's pairs)
        blocks = wv.reshape(-1, fb, cp // cb, cb // 4, 2, 2, kh, kw)  # (.., block, i, pair slot, half, ..)
        packed = blocks.transpose(0, 2, 5, 3, 6, 7, 1, 4).astype(np.int16)  # (.., block, half, i, kh, kw, fb, slot)
        packed = packed.reshape(packed.shape[0], cp // 2, kh, kw, fb, 2)
    else:
        packed = wv.reshape(-1, fb, cp // 4, 4, kh, kw).transpose(0, 2, 4, 5, 1, 3)  # (F/fb, C/4, kh, kw, fb, 4)
    words = np.ascontiguousarray(packed).view(np.int32).reshape(packed.shape[:-1])
    zero = n.attr("zero")
    data = _call("bitcast", [src], {"dtype": "int32"}, n.span)
    attrs = {k: n.attr(k, None) for k in ("strides", "padding", "dilation")}
    pad = int(np.array([zero] * 4, np.uint8).view(np.int32)[0]) if _reads_padding(attrs) else 0
    conv = _call("nn.conv2d_nchwc", [data, Constant(words)],
                 {**attrs, "dot": dot, "pad_value": pad, "pairs": dot == "dot_i16x2"}, n.span)
    colsum = wv.astype(np.int64).sum(axis=(1, 2, 3)) * zero  # (every tap, the padding's included)
    corr = Constant(colsum.astype(np.int32).reshape(1, -1, 1, 1, fb))
    return _unblock(_call("subtract", [conv, corr], {}, n.span), n.type, n.span)


def _conv(n: Call, target, precision: str = "fp32", block: Optional[int] = None):
    from ...kernels.conv_nchwc import channel_block

    x, w = n.args
    if n.attr("weight_block", 0) or not _static(x.type, n.type) \
            or not (isinstance(w.type, TensorType) and w.type.is_static):
        return None
    if n.type.dtype != "float32" or not _constant_valued(w):
        return None
    fb = block or channel_block(n.type.dtype, target, n.type.shape[1])
    attrs = {k: n.attr(k, None) for k in ("strides", "padding", "dilation")}
    groups = n.attr("groups", 1)
    if groups != 1:
        return _grouped(n, x, w, fb, attrs)
    if w.type.shape[0] < fb:
        return None  # mostly padding
    src = _blocked(x)
    if src is not None and _padded(x):
        if not _finite_padding(src):
            src = None  # read the plain input: the padding would reach the sums
        else:  # zero weights for the padding lanes of the input's last block
            extra = src.type.shape[1] * src.type.shape[-1] - w.type.shape[1]
            w = _call("pad", [w], {"pad_width": (0, 0, 0, 0, 0, extra, 0, 0)}, n.span)
    if precision == "bf16" and src is None and x.type.shape[1] < 4:
        # a stem's few channels (three) in one block of four, as the integer stem's: two words
        # a pixel, the fourth channel's weights zero (plain, it ran in float32: ResNet-50's
        # stem was 1.45x OpenVINO's bf16 one)
        src = _call("block_channels", [x], {"block": 4}, n.span)
        w = _call("pad", [w], {"pad_width": (0, 0, 0, 0, 0, 4 - x.type.shape[1], 0, 0)}, n.span)
    if precision == "bf16" and src is not None:
        conv = _bf16_conv(src, w, fb, attrs, n.span)
        if conv is not None:
            return _unblock(conv, n.type, n.span)
    packed = _call("nn.pack_conv_weight", [w], {"block": fb}, n.span)  # filters past F are zero
    conv = _call("nn.conv2d_nchwc", [src if src is not None else x, packed], attrs, n.span)
    return _unblock(conv, n.type, n.span)


def _grouped(n: Call, x, w, fb: int, attrs: dict):
    """A grouped conv whose groups lie within blocks runs on the blocks, each output block
    reading its own input block: depthwise (one filter per channel), or groups of ``g``
    channels (RegNetX's 16, RegNetY's 8, ResNeXt's 4-32) with each filter reading its own
    group's channels, the kernel's input lane ``(lane // g) g + c`` (a shuffle of the pixel's
    vector where groups are narrower than one; block-diagonal weights, zero between groups,
    would do ``block / g`` times the FLOPs) -- when its input is already blocked, or its
    window is large enough to pay for blocking it."""
    C, F, groups = x.type.shape[1], n.type.shape[1], n.attr("groups")
    cg, fg = w.type.shape[1], F // groups
    src = _blocked(x)
    if src is not None and src.type.shape[-1] != fb and src.type.shape[-1] % cg == 0 and C >= src.type.shape[-1]:
        # the producer's block, whichever this conv would choose (MixNet's 96-channel depthwise
        # conv after a concat of 48-channel blocks of 16): re-blocking would cost a copy each way
        fb = src.type.shape[-1]
    if F != C or C < fb or cg != fg or fb % cg:
        return None
    if src is not None and (src.type.shape[-1] != fb or cg > 1 and _padded(x) and not _finite_padding(src)):
        src = None  # (a depthwise conv keeps its lanes apart: padding never reaches the sums)
    if src is None:
        # a plain input: blocking it here and unblocking after costs more than the blocked
        # kernel saves on a small window (ShuffleNet's 3x3 depthwise convs between plain
        # grouped 1x1 convs), less on a large one (ConvNeXt's 7x7: 49 taps per element)
        if w.type.shape[2] * w.type.shape[3] < 25:
            return None
        src = _call("block_channels", [x], {"block": fb}, n.span)
    narrow = _codes(src, w)
    if narrow is not None:  # (a quantized model's: read its bytes, not their float copy)
        src, zero, corr = narrow
        attrs = {**attrs, "pad_value": zero if _reads_padding(attrs) else 0}
    packed = _call("nn.pack_conv_weight", [w], {"block": fb}, n.span)
    conv = _call("nn.conv2d_nchwc", [src, packed], {**attrs, "groups": groups}, n.span)
    if narrow is not None and corr is not None:
        blocks = np.zeros((-(-F // fb) * fb,), np.float32)
        blocks[:F] = corr
        conv = _call("subtract", [conv, Constant(blocks.reshape(1, -1, 1, 1, fb))], {}, n.span)
    return _unblock(conv, n.type, n.span)


def _codes(src, w):
    """``(q, zero, zero * the weights' sums or None)`` where blocked ``src`` is ``cast(q,
    float32) - zero`` (or the cast alone), ``q`` uint8 and ``zero`` a constant in its range (a
    dequantization, ``integer_products``' depthwise conv): a grouped conv reads ``q``, widened
    as each task pads its rows with ``zero``, and takes ``zero`` times each filter's sum of
    weights from its sums (every tap is computed, the padding's too); else None."""
    zero = 0
    if isinstance(src, Call) and src.op == "subtract":
        zv = _value(src.args[1])
        if zv is None or np.asarray(zv).size != 1:
            return None
        z = float(np.asarray(zv).reshape(()))
        if z != int(z) or not 0 <= z <= 255:
            return None
        zero, src = int(z), src.args[0]
    if not (isinstance(src, Call) and src.op == "cast" and src.type.dtype == "float32"
            and src.args[0].type.dtype == "uint8" and src.args[0].type.ndim == 5):
        return None
    if not zero:
        return src.args[0], 0, None
    wv = _value(w)
    if wv is None:
        return None
    return src.args[0], zero, zero * np.asarray(wv, np.float64).sum(axis=(1, 2, 3))


def _as_blocked(a, out: TensorType, block: int, span):
    """Operand ``a`` of an elementwise op with result ``out`` (N C H W), made to broadcast
    against the blocked result: a scalar as it is, a per-channel value or a whole plain
    tensor blocked; else None (it broadcasts along H or W)."""
    if not _static(a.type) or a.type.ndim > out.ndim:
        return None
    if tuple(a.type.shape) == tuple(out.shape):
        return _call("block_channels", [a], {"block": block}, span)
    full = (1,) * (out.ndim - a.type.ndim) + tuple(a.type.shape)
    if any(d != 1 for i, d in enumerate(full) if i != 1):
        return None
    if full[1] == 1:
        return a
    if full[1] != out.shape[1]:
        return None
    col = _call("reshape", [a], {"newshape": (1, full[1]) + (1,) * (out.ndim - 2)}, span)
    return _call("block_channels", [col], {"block": block}, span)


def _bias_add(n: Call):
    """``nn.bias_add`` along the channels is the add of a per-channel value."""
    x, b = n.args
    if _blocked(x) is None or not _static(x.type, b.type) or n.attr("axis", 1) not in (1, 1 - x.type.ndim):
        return None
    col = _call("reshape", [b], {"newshape": (b.type.shape[0], 1, 1)}, n.span)
    return _elementwise(_call("add", [x, col], {}, n.span))


def _elementwise(n: Call):
    opdef = get_op(n.op)
    if opdef.pattern not in _FLOW or n.op in _VIEWED or not _static(n.type) or n.type.ndim != 4:
        return None
    sources = [_blocked(a) for a in n.args]
    blocked = [s for s in sources if s is not None]
    if not blocked or len({(s.type.shape[1], s.type.shape[-1]) for s in blocked}) != 1:
        return None
    block = blocked[0].type.shape[-1]
    args = []
    for a, src in zip(n.args, sources):
        if src is not None:
            # a blocked operand may broadcast over the batch and the plane (a squeeze-excitation
            # scale), never over the channels
            if a.type.ndim != 4 or a.type.shape[1] != n.type.shape[1]:
                return None
            args.append(src)
        else:
            b = _as_blocked(a, n.type, block, n.span)
            if b is None:
                return None
            args.append(b)
    out = _call(n.op, args, dict(n.attrs), n.span)
    if tuple(out.type.shape[2:4]) != tuple(n.type.shape[2:4]):
        return None
    return _unblock(out, n.type, n.span)


def _reduce(n: Call):
    """A reduction over spatial axes that keeps them reduces the blocks (lane by lane)."""
    src = _blocked(n.args[0])
    if src is None or not n.attr("keepdims", False) or n.args[0].type.ndim != 4:
        return None
    axes = reduced_axes(n.attr("axis", None), 4)
    if not axes or any(a < 2 for a in axes):
        return None
    return _unblock(_call(n.op, [src], {**n.attrs, "axis": axes}, n.span), n.type, n.span)


def _concat(n: Call):
    """``concat`` along the channels of blocked operands (and plain ones in whole blocks), or
    along a spatial axis of operands blocked alike."""
    if not _static(n.type) or n.type.ndim != 4:
        return None
    if n.attr("axis") in (2, 3, -2, -1):
        return _spatial_concat(n)
    if n.attr("axis") not in (1, -3):
        return None
    sources = [_blocked(a) for a in n.args]
    blocks = {s.type.shape[-1] for s in sources if s is not None}
    if len(blocks) != 1 or any(_padded(a) for a in n.args):
        return None  # (a padded block would put its padding between the channels)
    block = blocks.pop()
    args = []
    for a, src in zip(n.args, sources):
        if src is None:
            if not _static(a.type) or a.type.shape[1] % block:
                return None
            src = _call("block_channels", [a], {"block": block}, n.span)
        args.append(src)
    return _unblock(_call("concat", args, {"axis": 1}, n.span), n.type, n.span)


def _spatial_concat(n: Call):
    """``concat`` along H or W of operands blocked alike (the bands ``trim_conv_taps`` cuts a
    dilated conv's output into): the blocks concatenate along the same axis, padding and all
    (every operand pads the same lanes). Read through the plain layout instead, each band's
    vector of channels was a gather (DeepLabV3's pyramid: 0.4 ms)."""
    sources = [_blocked(a) for a in n.args]
    if any(s is None for s in sources) or len({(s.type.shape[1], s.type.shape[-1]) for s in sources}) != 1 \
            or len({a.attr("channels", 0) for a in n.args}) != 1:
        return None
    axis = n.attr("axis") % 4
    return _unblock(_call("concat", sources, {"axis": axis}, n.span), n.type, n.span)


def _split(n: Call):
    """A ``split`` along the channels of a blocked operand, every part whole blocks, splits the
    blocks: each part stays blocked (MixNet's mixed depthwise convs read their own parts and
    concatenate the blocks after; through the plain layout each part was unblocked, split and
    blocked again, three copies for one)."""
    x = n.args[0]
    src = _blocked(x)
    if src is None or _padded(x) or x.type.ndim != 4 or n.attr("axis") not in (1, -3):
        return None
    b = src.type.shape[-1]
    sizes = [t.shape[1] for t in n.type.fields]
    if any(not isinstance(c, int) or c % b for c in sizes):
        return None
    parts = _call("split", [src], {"axis": 1, "sizes": tuple(c // b for c in sizes)}, n.span)
    return Tuple([_unblock(TupleGetItem(parts, i), t, n.span) for i, t in enumerate(n.type.fields)])


def _pool(n: Call):
    """A max or average pool of a blocked operand pools the blocks."""
    src = _blocked(n.args[0])
    if src is None or n.attr("blocked", False):
        return None
    return _unblock(_call(n.op, [src], {**n.attrs, "blocked": True}, n.span), n.type, n.span)


_POOLS = ("nn.max_pool2d", "nn.avg_pool2d")


def _one_group_norm(n: Call):
    """``reshape(instance_norm(reshape(x, (N, 1, C*H*W))), (N, C, H, W))`` -- how PyTorch's
    exporter writes GroupNorm with one group (PoolFormer's): its statistics are over every
    element of a sample, whatever their order, so a blocked ``x`` (no padded lanes) is
    normalized as it lies and stays blocked. Through the plain layout, each such norm cost
    an unblocking copy whose flattening gathered every element (PoolFormer-S12: 27% of its time)."""
    inorm = n.args[0]
    if not (isinstance(inorm, Call) and inorm.op == "nn.instance_norm") or n.type.ndim != 4 or not _static(n.type):
        return None
    flat = inorm.args[0]
    if not (isinstance(flat, Call) and flat.op == "reshape") or flat.type.ndim != 3 or flat.type.shape[1] != 1:
        return None
    src = _blocked(flat.args[0])
    if src is None or _padded(flat.args[0]) or tuple(flat.args[0].type.shape) != tuple(n.type.shape):
        return None
    flat_b = _call("reshape", [src], {"newshape": tuple(flat.type.shape)}, flat.span)
    normed = _call("nn.instance_norm", [flat_b] + list(inorm.args[1:]), dict(inorm.attrs), inorm.span)
    return _unblock(_call("reshape", [normed], {"newshape": tuple(src.type.shape)}, n.span), n.type, n.span)


@graph_pass("block_layout", opt_level=2)
def block_layout(mod: Module, ctx: PassContext) -> Module:
    """Run convolutional regions in the blocked channel layout (see the module docstring)."""
    target = ctx.config.get("target")
    precision = getattr(ctx.config.get("options"), "precision", "fp32")
    saturating = getattr(ctx.config.get("options"), "saturating_int8", False)
    # (the block an offload backend's kernels read: ``ember.offload.layout_block``, given by
    # the compiler, a layer above)
    block = ctx.config.get("channel_block")
    int8_last = ctx.config.get("int8_channels_last", ())

    def visit(n):
        if isinstance(n, TupleGetItem) and isinstance(n.tuple, Tuple):  # (a split's blocked parts)
            return n.tuple.fields[n.index]
        if not isinstance(n, Call):
            return None
        if n.op == "split":
            return _split(n)
        if n.op == "nn.conv2d":
            return _conv(n, target, precision, block)
        if n.op == "nn.conv2d_integer":
            return _integer_conv(n, target, saturating, int8_last)
        if n.op == "concat":
            return _concat(n)
        if n.op in _POOLS:
            return _pool(n)
        if n.op == "nn.bias_add":
            return _bias_add(n)
        if n.op == "reshape":
            return _one_group_norm(n)
        if n.op in _REDUCE:
            return _reduce(n)
        return _elementwise(n)

    return rewrite_main(mod, visit)


__all__ = ["block_layout"]
