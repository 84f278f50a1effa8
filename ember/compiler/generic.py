"""Shape-generic kernels: one kernel for every call of a group that differs only in sizes.

A fused group is compiled for the shapes of its parameters. Many groups of a model differ
only there (the slices, pads and transposes of each stage of a Swin transformer; the transposes
and scatters of its constant-folding program), so one kernel over *symbolic* sizes serves them
all: :func:`generalize` replaces the static dims of a group's parameters (other than 1, which
broadcasting reads) by size symbols, each distinct value its own symbol, and infers the body's
types again. Each call then passes its sizes as the kernel's size arguments (the program's
``scalars``), as a dynamic model passes its batch.

A group generalizes only when its types follow from its parameters' with conditions this
call's sizes meet: what a shape rule had to *assume* of the new symbols (split sizes must sum
to the axis) is checked for each call with its own sizes, so every call that
shares the kernel meets it; where a call does not (a reshape to a fixed shape its sizes do not
give), it keeps a static kernel, and so do groups with tensor constants (fixed sizes) and ops
whose computes need static sizes (anchors: convolutions, products, pools, reductions).
:func:`generic_kernels` (a context) says which groups: a model's elementwise ones by default
(DenseNet's 61 batch-norm-and-ReLU kernels are one), every group it can for the
constant-folding program, whose kernels run once and whose compile is the cost.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Optional

from ..graph.infer import infer_types
from ..graph.ir import Call, Constant, Function, Var
from ..graph.ops import dims as D
from ..graph.ops import get_op
from ..graph.ops.registry import Pattern
from ..graph.types import Dim, TensorType
from ..graph.visit import post_order, rewrite, substitute
from ..kernels.common import vector_lanes

# ops whose computes take symbolic sizes as well as static ones, by how much of a group goes
# generic: "elementwise" (a model's own kernels: an element's index is the same expression
# with sizes as arguments; index remapping -- transposes, slices, reshapes -- would divide by
# a runtime size per element, measured 16% slower on Swin-T) or "all" (constant folding,
# which runs once)
_GENERIC = contextvars.ContextVar("ember_generic_kernels", default="elementwise")
_PATTERNS = {"elementwise": (Pattern.ELEMWISE, Pattern.BROADCAST),
             "all": (Pattern.ELEMWISE, Pattern.BROADCAST, Pattern.INJECTIVE),
             # tier-0 kernels (:mod:`.tier0`): anchors too, where their shape rules and computes
             # take symbolic sizes (pools, reductions, softmax, products by a runtime operand)
             "any": tuple(Pattern)}
# injective ops whose index maps are affine in the sizes (no division by one)
_AFFINE = ("strided_slice", "concat", "pad", "transpose", "expand", "squeeze", "unsqueeze")
_ALSO = {"elementwise": _AFFINE, "all": ("scatter_nd", "scatter_elements"), "any": ()}
_SHAPE_ATTRS = {"reshape": "newshape", "expand": "shape", "unblock_channels": "channels"}
# layout ops whose block is a size where bounds are (``generalize(bounds=True)``): the folding
# program packs the weights of a conv of any block with one kernel (ShuffleNet's 2, 14, 16, 17)
_BLOCKS = ("nn.pack_conv_weight", "block_channels")
# attributes that are sizes in tier 0's kernels alone: a packed product's columns (its weight's
# panels are sizes already), so that one kernel serves the products of every width -- each
# transformer's projections and MLPs (a model's kernels keep them static: their last panel's
# columns masked at run time cost tier 1 its unmasked stores); where the product is the group's
# result (tier 0 runs a static program's anchors apart). A multiple of 4, 3 or 2 vectors
# stays one, ``64*s``: tier 0 then keeps that many accumulators (:func:`.tier0._accumulate`)
_ANY = {"nn.matmul_packed": "units"}
# pools whose window is sizes in tier 0's kernels alone (its size, strides and padding; floor
# mode): one kernel for the pools of every window -- a max pool of 3x3 by 2 and one
# of 2x2 by 2 --, where a model's keep theirs static (unrolled taps, de-interleaved strides)
_WINDOWED = ("nn.max_pool2d", "nn.avg_pool2d")
# injective ops whose computes need static sizes: resize's taps and weights are per position
# of a resized axis (YOLOS's constant-folded position embeddings, resized 14x14 -> 14x14)
_STATIC = ("resize",)
_END = 2 ** 63 - 1  # a slice's end past every axis (ONNX's INT64_MAX)
_SMALL = 1 << 15  # elements of a model's group below which it keeps its static kernel (MobileNetV3's
                  # squeeze-excitation ops ran 3% slower generic)


@contextlib.contextmanager
def generic_kernels(which: str = "all"):
    """Compile the programs built inside with shape-generic kernels for ``which`` groups:
    ``"all"`` it can, ``"elementwise"`` (the default) or ``"none"``; ``"any"`` (tier 0) also
    tries groups with an anchor."""
    if which not in ("any", "all", "elementwise", "none"):
        raise ValueError(f"generic_kernels: {which!r} is not 'any', 'all', 'elementwise' or 'none'")
    token = _GENERIC.set(which)
    try:
        yield
    finally:
        _GENERIC.reset(token)


def enabled() -> bool:
    return _GENERIC.get() != "none"


def mode() -> str:
    """Which groups go generic now: ``"all"``, ``"elementwise"`` or ``"none"``."""
    return _GENERIC.get()


def _symbols(fn: Function) -> set:
    names: set = set()
    for n in post_order(fn):
        t = getattr(n, "type", None)
        if isinstance(t, TensorType):
            for d in t.shape:
                if isinstance(d, Dim):
                    names |= {v.name for v in D._symbols(d.expr)}
    return names


def generalize(fn: Function, keep: frozenset = frozenset(), from_axis: int = 0,
               apart: bool = False, short: bool = True, ones: bool = False,
               bounds: bool = True, lead: bool = False) -> Optional[tuple]:
    """``(generic function, sizes)``: ``fn`` with its parameters' static dims (other than 1) as
    size symbols and ``sizes`` their values for this call -- or None where ``fn`` keeps its
    static kernel (see the module docstring). The parameters at the positions in ``keep``
    (a group's constant weights, whose shape rules want them static) keep their dims from
    axis ``from_axis`` on (a packed conv weight's window and block, its filters and channels
    going generic with ``from_axis=2``). ``apart``: each dim of each parameter its own symbol,
    not each distinct value (a conv's filter blocks that happen to equal its rows would make a
    kernel of their own); the shape rules then assume the equalities they need, and each call
    checks them. ``short``: a short last axis stays static (see below). ``ones``: dims of 1 go
    symbolic too (an anchor alone, whose operands do not broadcast: one channel block, one
    block of filters; a symbolic size is never broadcast, so a rule that would broadcast assumes
    it equal and the call's check refuses), but an activation's first (a batch of one: a
    symbolic one changed the order of a tier-0 conv's sums, its results then a bit off tier 1's)
    unless ``lead`` (a slice's outer axis, which only offsets its copy).
    ``bounds`` (the folding program's and tier 0's kernels): a pad's widths and a slice's bounds
    are sizes too, each its own (a slice's made absolute first), so that pads and slices of
    every width share a kernel: the windows a dilated conv's trimmed taps keep, the channels a
    weight is padded to, Swin's even and odd rows."""
    which = _GENERIC.get()
    if which == "none":
        return None
    calls = [n for n in post_order(fn.body) if isinstance(n, Call)]
    if not calls or any(get_op(c.op).pattern not in _PATTERNS[which] and c.op not in _ALSO[which]
                        or c.op in _STATIC for c in calls):
        return None
    if which == "elementwise" and any(isinstance(t, TensorType) and t.is_static and math.prod(t.shape) < _SMALL
                                      for t in _results(fn.body.type)):
        return None  # (a small kernel's time is its fixed costs, which sizes in registers raise)
    if any(isinstance(n, Constant) and n.type.ndim for n in post_order(fn.body)):
        return None  # (a tensor constant has fixed sizes: its operand would have to match them)
    # a model's kernels keep a short last axis static (``short``): their vectors run along it,
    # and over a few vectors a symbolic extent's loop and masked tail cost (the blocked
    # layout's block of 16 or 32: 4-5% on MobileNet and EfficientNet); a long one (Swin's
    # 96-768 channels) pays little for them. (Tier 0 tries without first: sharing pays there.)
    def short_last(t, k) -> bool:
        return short and which in ("elementwise", "any") and k == t.ndim - 1 and isinstance(t.shape[k], int) \
            and t.shape[k] <= 64
    static = {i: (lambda t, k: k >= from_axis or short_last(t, k)) if i in keep else short_last
              for i in range(len(fn.params))}
    if not all(isinstance(p.type, TensorType) for p in fn.params):
        return None
    # the dims that go symbolic, as keys of their symbols: their value, or (apart) their place
    where = {(i, k): (i, k) if apart else d for i, p in enumerate(fn.params)
             for k, d in enumerate(p.type.shape)
             if isinstance(d, int) and (d > 1 or ones and d == 1 and (k > 0 or lead or i in keep))
             and not static[i](p.type, k)}
    keys = list(dict.fromkeys(where.values()))
    if not keys:
        return None
    taken = _symbols(fn)
    names, k = [], 0
    while len(names) < len(keys):
        if f"s{k}" not in taken:
            names.append(f"s{k}")
        k += 1
    sym = {key: Dim(n) for key, n in zip(keys, names)}
    params = [Var(p.name, TensorType(tuple(sym[where[i, k]] if (i, k) in where else d
                                           for k, d in enumerate(p.type.shape)), p.type.dtype))
              for i, p in enumerate(fn.params)]
    value = {where[ik]: fn.params[ik[0]].type.shape[ik[1]] for ik in where}
    values = [value[key] for key in keys]
    by_value = {v: sym[key] for key, v in zip(keys, values)}  # (a shape attribute names sizes by value)
    fresh: dict = {}  # tier 0: a shape attribute's other sizes -> sizes of their own (value -> name)
    own: list = []  # (name, value) of the pad widths' and slice bounds' sizes (``bounds``)
    # (a slice's bounds are sizes in a model's kernels too: they only offset its copy; a pad's
    # widths and a block would cost a model's kernels the loops they split and unroll)
    slices, bounds = bounds, bounds and which in ("all", "any")
    # (an anchor alone, as tier 0 runs a static program's: an epilogue would pin its columns)
    alone = which == "any" and isinstance(fn.body, Call) and fn.body.op in _ANY
    windowed = which == "any" and isinstance(fn.body, Call) and fn.body.op in _WINDOWED \
        and not fn.body.attr("ceil_mode", False)
    # (a convolution alone whose weights keep only their block, ``from_axis=4``: its window,
    # strides and dilation sizes too, ember.kernels.conv_window)
    windowed = windowed or which == "any" and isinstance(fn.body, Call) and fn.body.op == "nn.conv2d_nchwc" \
        and from_axis >= 4 and fn.body.attr("groups", 1) == 1 and fn.body.attr("dot", None) is None \
        and len(fn.body.args) == 2

    def unused() -> str:
        used = taken | set(names) | set(fresh.values()) | {n for n, _ in own}
        return next(f"s{k}" for k in range(len(used) + 1) if f"s{k}" not in used)

    def own_size(d: int) -> Dim:
        own.append((unused(), d))
        return Dim(own[-1][0])

    def own_count(d: int):
        """A count that may be 0 (a pad's width, a slice's start) as a size less one: sizes are
        at least 1, so the arithmetic knows it is at least 0 -- a 0 taken for a size had a
        vectorized concat's select proved one-sided (ResNet-18's 2x2 map from its 1x1 pieces
        read out of bounds) -- and one kernel serves zero and other widths alike."""
        return D.dim_sub(own_size(d + 1), 1)

    def size(d: int):
        if d in by_value:
            return by_value[d]
        if which not in ("any", "all") or d <= 1:
            return d
        # (Swin's windows, (1, 8, 7, 8, 7, C) at its first stage, (1, 4, 7, 4, 7, C) at the
        # next: one kernel for every stage, each call passing its own)
        if d not in fresh:
            fresh[d] = unused()
        return Dim(fresh[d])

    def sizes_in_attrs(n):
        if alone and isinstance(n, Call) and isinstance(n.attr(_ANY.get(n.op, ""), None), int):
            v = n.attr(_ANY[n.op])
            lanes = vector_lanes(None, n.type.dtype) if isinstance(n.type, TensorType) else 1
            f = next(u * lanes for u in (4, 3, 2, 1) if v % (u * lanes) == 0) if v % lanes == 0 else 1
            own.append((unused(), v // f))
            return n.replace(attrs={**dict(n.attrs), _ANY[n.op]: D.dim_mul(f, Dim(own[-1][0]))})
        if windowed and isinstance(n, Call) and (n.op in _WINDOWED or n.op == "nn.conv2d_nchwc"):
            attrs = dict(n.attrs)
            pool = n.op in _WINDOWED
            if pool:
                attrs["pool_size"] = tuple(own_size(k) for k in n.attr("pool_size"))
            else:
                attrs["dilation"] = tuple(own_size(v) for v in (n.attr("dilation", None) or (1, 1)))
            attrs["strides"] = tuple(own_size(v) for v in (n.attr("strides", None) or (1, 1)))
            # (a conv of no padding keeps it static: its taps then need no edge checks)
            if n.attr("padding", None) and (pool or any(n.attr("padding"))):
                attrs["padding"] = tuple(own_count(v) for v in n.attr("padding"))
            return n.replace(attrs=attrs)
        if bounds and isinstance(n, Call) and n.op in _BLOCKS and isinstance(n.attr("block"), int):
            return n.replace(attrs={**dict(n.attrs), "block": own_size(n.attr("block"))})
        if bounds and isinstance(n, Call) and n.op == "pad" and n.attr("mode", "constant") == "constant":
            pw = tuple(own_count(d) if isinstance(d, int) else d for d in n.attr("pad_width"))
            return n.replace(attrs={**dict(n.attrs), "pad_width": pw}) if pw != tuple(n.attr("pad_width")) else None
        if slices and isinstance(n, Call) and n.op == "strided_slice" \
                and all(st > 0 for st in n.attr("strides", None) or ()) \
                and all(isinstance(d, int) and 0 <= d < _END for d in (*n.attr("begin"), *n.attr("end"))):
            return n.replace(attrs={**dict(n.attrs), "begin": tuple(own_count(d) for d in n.attr("begin")),
                                    "end": tuple(own_size(d) if d else d for d in n.attr("end"))})
        # a shape an op is given (a reshape's, an expand's) names the same sizes symbolically;
        # where a value only happens to equal a size, the shape rule's check rejects it below
        key = _SHAPE_ATTRS.get(n.op) if isinstance(n, Call) else None
        if key is None or n.attr(key, None) is None:
            return None
        old = n.attr(key)
        if isinstance(old, int):  # (a size alone: unblock_channels' channels, 0 for all of them)
            new = size(old) if old else old
        else:
            new = tuple(size(d) if isinstance(d, int) else d for d in old)
        return n.replace(attrs={**dict(n.attrs), key: new}) if new != old else None
    try:
        with D.collect_assumptions(fresh=True) as assumed:
            body = rewrite(fn.body, _absolute if slices else _from_the_end)
            body = rewrite(substitute(body, dict(zip(fn.params, params))), sizes_in_attrs)
            g = infer_types(Function(params, body))
    except Exception:  # a shape rule that needs these sizes static
        return None
    sizes = dict(zip(names, values))
    sizes.update((name, v) for v, name in fresh.items())
    sizes.update(own)
    # what the rules assumed of the new sizes must hold for this call's (every call that shares
    # the kernel checks it for its own): split sizes must sum to s0; and the
    # result must have this call's shape (a rule whose symbolic form differs from its static
    # one -- a negative-step slice -- keeps the static kernel)
    # (a tier-0 group over the model's own symbols -- a dynamic batch -- compares its result's
    # shape at two probe values of them; a model's kernels keep theirs static)
    if taken and which != "any":
        return None
    try:
        if not all(D.eval_index(a.cond, sizes) for a in assumed.values()):
            return None
        for probe in ((0,) if not taken else (7, 13)):
            others = {t: probe for t in taken}
            got = [tuple(D.eval_dim(d, {**others, **sizes}) for d in t.shape) for t in _results(g.body.type)]
            want = [tuple(D.eval_dim(d, others) if isinstance(d, Dim) else d for d in t.shape)
                    for t in _results(fn.body.type)]
            if got != want:
                return None
    except (KeyError, TypeError, ZeroDivisionError, AttributeError):
        return None
    return g, sizes


def _from_the_end(n):
    """A slice bound in the far half of a static axis as an index from its end (the same slice):
    exporters write ``x[:, :-3]`` of each stage's size as ``x[:, :53]``, ``x[:, :25]``, ...,
    and only ``-3`` names the same bound at every size."""
    if not (isinstance(n, Call) and n.op == "strided_slice" and isinstance(n.args[0].type, TensorType)):
        return None
    shape = n.args[0].type.shape
    axes = n.attr("axes", None)
    begin, end = list(n.attr("begin")), list(n.attr("end"))
    axes = axes if axes is not None else tuple(range(len(begin)))
    steps = n.attr("strides", None) or (1,) * len(axes)
    changed = False
    for k, a in enumerate(axes):
        size = shape[a]
        if not isinstance(size, int):
            continue
        if steps[k] > 0 and end[k] == size:  # (to the end)
            end[k], changed = _END, True
        for bounds in (begin, end):
            v = bounds[k]
            if isinstance(v, int) and size / 2 < v < size:
                bounds[k] = v - size
                changed = True
    return n.replace(attrs={**dict(n.attrs), "begin": tuple(begin), "end": tuple(end)}) if changed else None


def _absolute(n):
    """A slice of forward steps on static axes with its bounds as the indices they name, clamped
    (``x[:, -3:]`` of 56 rows as ``x[:, 53:56]``, ``x[1::2]`` of 7 as ``x[1:6:2]``): each then
    becomes a size (``bounds``)."""
    if not (isinstance(n, Call) and n.op == "strided_slice" and isinstance(n.args[0].type, TensorType)):
        return None
    shape = n.args[0].type.shape
    begin, end = n.attr("begin"), n.attr("end")
    axes = n.attr("axes", None)
    axes = axes if axes is not None else tuple(range(len(begin)))
    steps = n.attr("strides", None) or (1,) * len(axes)
    if not all(isinstance(shape[a], int) and isinstance(b, int) and isinstance(e, int) and st > 0
               for a, b, e, st in zip(axes, begin, end, steps)):
        return None
    new_begin, new_end = [], []
    for a, b, e, st in zip(axes, begin, end, steps):
        r = range(*slice(b, e, st).indices(shape[a]))
        new_begin.append(r.start)
        new_end.append(r.start + (len(r) - 1) * st + 1 if len(r) else r.start)  # (its last index, + 1)
    if (tuple(new_begin), tuple(new_end)) == (tuple(begin), tuple(end)):
        return None
    return n.replace(attrs={**dict(n.attrs), "begin": tuple(new_begin), "end": tuple(new_end)})


def _results(t) -> list:
    return list(t.fields) if hasattr(t, "fields") else [t]


__all__ = ["enabled", "generalize", "generic_kernels", "mode"]
