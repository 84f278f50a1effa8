"""Computes of the layout family: ops that move elements without computing new values
(reshape, flatten, squeeze, unsqueeze, transpose, expand, tile, concat, split, strided_slice,
pad, depth_to_space, space_to_depth). (resize, which resamples, is in :mod:`.resize`; trilu,
an index op, in :mod:`.index`.)

Every output is one injective stage ``out[i] = x[f(i)]``: ``f`` is index arithmetic (``//`` and
``%`` on non-negative indices). Where an output element has no source element (pad's border,
resize's extrapolation) or several inputs could hold it (concat), a
``select`` picks; the loop passes predicate the loads under each select arm, so an index an
untaken arm computes out of range is never read. Semantics follow ONNX (attribute conventions
are those of ``ember.frontend.onnx.layout``); split returns one stage per part.
"""
from __future__ import annotations

from ....errors import ShapeError
from ....kernels.elementwise import broadcast_index
from ....loop import compute as te
from ....loop import dtype as dt
from ....loop.expr import Expr, as_expr, const, logical_and, max_, min_, select
from ..registry import norm_axis
from .common import const_of, index_dims, out_stage, register_compute, stage_name, static_size, te_shape

INDEX = dt.INDEX


def _add(a, b):
    """``a + b`` for sizes and offsets, folded while both are static."""
    if static_size(a) is not None and static_size(b) is not None:
        return static_size(a) + static_size(b)
    return as_expr(a, INDEX) + as_expr(b, INDEX)


def _shifted(i: Expr, offset):
    """The index ``i - offset`` (no node for a zero offset)."""
    return i if static_size(offset) == 0 else i - offset


# -- reshape family -----------------------------------------------------------------------------


def _groups(a: list, b: list):
    """Split the dims ``a`` and ``b`` (no 1s; equal products) into runs of equal products:
    yields ``(positions in a, positions in b)``. A run with a symbolic dim it cannot match
    takes the rest of both shapes."""
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:  # structural equality: the same number or the same symbol
            yield [i], [j]
            i, j = i + 1, j + 1
            continue
        ga, gb, pa, pb = [i], [j], static_size(a[i]), static_size(b[j])
        i, j = i + 1, j + 1
        while pa is not None and pb is not None and pa != pb:
            if pa < pb and i < len(a):
                pa = None if static_size(a[i]) is None else pa * static_size(a[i])
                ga.append(i)
                i += 1
            elif pb < pa and j < len(b):
                pb = None if static_size(b[j]) is None else pb * static_size(b[j])
                gb.append(j)
                j += 1
            else:
                break
        if pa is None or pb is None or pa != pb:
            yield ga + list(range(i, len(a))), gb + list(range(j, len(b)))
            return
        yield ga, gb
    if i < len(a) or j < len(b):
        yield list(range(i, len(a))), list(range(j, len(b)))


def reshape_index(in_shape, out_shape, idx) -> tuple:
    """The input index that row-major order puts at output index ``idx``.

    Dims are matched in runs of equal products, so an axis both shapes share is indexed
    directly and only the runs that really regroup pay for ``//`` and ``%``."""
    src = [const(0, INDEX)] * len(in_shape)
    if any(static_size(d) == 0 for d in out_shape):
        return tuple(src)  # an empty output reads nothing
    ins = [k for k, d in enumerate(in_shape) if static_size(d) != 1]
    outs = [k for k, d in enumerate(out_shape) if static_size(d) != 1]
    for ga, gb in _groups([in_shape[k] for k in ins], [out_shape[k] for k in outs]):
        flat = None
        for p in gb:
            k = outs[p]
            flat = idx[k] if flat is None else flat * out_shape[k] + idx[k]
        if flat is None:  # the run's input dims multiply to 1
            continue
        for p in reversed(ga[1:]):
            k = ins[p]
            src[k] = flat % in_shape[k]
            flat = flat // in_shape[k]
        if ga:
            src[ins[ga[0]]] = flat
    return tuple(src)


def _reshape_like(op: str):
    """A compute that reads its one input in row-major order into ``out_type``'s shape."""
    def compute_fn(attrs, inputs, out_type):
        x, shape = inputs[0], index_dims(out_type)
        return out_stage(op, out_type, lambda *i: x[reshape_index(x.shape, shape, i)])

    return compute_fn


for _op in ("reshape", "flatten", "squeeze", "unsqueeze"):
    register_compute(_op, _reshape_like(_op))


def _transpose(attrs, inputs, out_type):
    x = inputs[0]
    axes = attrs["axes"] if attrs["axes"] is not None else tuple(reversed(range(x.ndim)))
    perm = [a % x.ndim for a in axes]

    def body(*i):
        src = [None] * x.ndim
        for o, a in enumerate(perm):
            src[a] = i[o]
        return x[tuple(src)]

    return out_stage("transpose", out_type, body)


def _expand(attrs, inputs, out_type):
    x = inputs[0]
    return out_stage("expand", out_type, lambda *i: x[broadcast_index(x, i)])


def _tile(attrs, inputs, out_type):
    x = inputs[0]

    def body(*i):
        src = []
        for k, (d, r) in enumerate(zip(x.shape, attrs["reps"])):
            if static_size(d) == 1:
                src.append(const(0, INDEX))
            else:
                src.append(i[k] if isinstance(r, int) and r == 1 else i[k] % d)
        return x[tuple(src)]

    return out_stage("tile", out_type, body)


register_compute("transpose", _transpose)
register_compute("expand", _expand)
register_compute("tile", _tile)

# -- concat and split ---------------------------------------------------------------------------


def _concat(attrs, inputs, out_type):
    axis = norm_axis(attrs["axis"], inputs[0].ndim)
    starts = [0]
    for t in inputs:
        starts.append(_add(starts[-1], t.shape[axis]))

    def body(*i):
        def part(lo, hi):
            # a binary tree of selects: log2(#inputs) comparisons per element
            if hi - lo == 1:
                idx = list(i)
                idx[axis] = _shifted(i[axis], starts[lo])
                return inputs[lo][tuple(idx)]
            mid = (lo + hi) // 2
            return select(i[axis] < starts[mid], part(lo, mid), part(mid, hi))

        return part(0, len(inputs))

    return out_stage("concat", out_type, body)


def _split(attrs, inputs, out_type):
    x = inputs[0]
    axis = norm_axis(attrs["axis"], x.ndim)
    name = stage_name("split")

    def part(k, start, t):
        def body(*i):
            idx = list(i)
            idx[axis] = i[axis] + start if static_size(start) != 0 else i[axis]
            return x[tuple(idx)]
        return te.compute(te_shape(t), body, f"{name}{k}")

    outs, start = [], 0
    for k, t in enumerate(out_type.fields):
        outs.append(part(k, start, t))
        start = _add(start, outs[-1].shape[axis])
    return tuple(outs)


register_compute("concat", _concat)
register_compute("split", _split)

# -- slice and pad ------------------------------------------------------------------------------


def _strided_slice(attrs, inputs, out_type):
    from ..dims import index, to_dim
    from ..layout import slice_bounds

    x = inputs[0]
    begin, end = attrs["begin"], attrs["end"]
    axes = attrs["axes"] if attrs["axes"] is not None else tuple(range(len(begin)))
    steps = attrs["strides"] if attrs["strides"] is not None else (1,) * len(axes)
    plan = {}
    for a, b, e, s in zip(axes, begin, end, steps):
        a = norm_axis(a, x.ndim)
        start, _ = slice_bounds(to_dim(as_expr(x.shape[a], INDEX)), b, e, s)
        plan[a] = (start if isinstance(start, int) else index(start), s)

    def body(*i):
        src = []
        for k in range(x.ndim):
            if k not in plan:
                src.append(i[k])
                continue
            start, step = plan[k]
            v = i[k] if step == 1 else i[k] * step
            src.append(v if static_size(start) == 0 else v + start)
        return x[tuple(src)]

    return out_stage("strided_slice", out_type, body)


def _fold(mode: str, s: Expr, n):
    """Map the index ``s`` (maybe outside ``[0, n)``) into ``[0, n)`` as numpy.pad's ``mode``
    does: edge clamps, wrap repeats, reflect mirrors about the end elements."""
    if mode == "edge":
        return min_(max_(s, 0), n - 1)
    if mode == "wrap":
        return s % n
    # reflect: period 2(n - 1); a period of 1 for n == 1 keeps the index at 0
    period = max(2 * (static_size(n) - 1), 1) if static_size(n) is not None else max_(2 * (n - 1), 1)
    m = s % period
    return select(m < n, m, period - m)


def _pad(attrs, inputs, out_type):
    from ..dims import index

    x = inputs[0]
    nd, mode = x.ndim, attrs["mode"]
    # a pad from a value: an index expression (a size: >= 0, so it never crops)
    pw = [p if isinstance(p, int) else index(p) for p in attrs["pad_width"]]
    value = const_of(attrs["pad_value"], x.dtype) if len(inputs) < 2 else inputs[1][(0,)]
    if mode != "constant" and all(isinstance(p, int) for p in pw):
        for k, d in enumerate(x.shape):
            n = static_size(d)
            if n is not None and n - max(-pw[k], 0) - max(-pw[k + nd], 0) <= 0 \
                    and (pw[k] > 0 or pw[k + nd] > 0):
                raise ShapeError(f"pad mode {mode!r} cannot extend axis {k} of {x}: it is empty")

    def body(*i):
        src, inside = [], []
        for k in range(nd):
            lo, hi, d = pw[k], pw[k + nd], x.shape[k]
            s = i[k] - lo if static_size(lo) != 0 else i[k]
            if mode != "constant" and (static_size(lo) is None or static_size(hi) is None):
                src.append(_fold(mode, s, d))  # (pads from values do not crop)
            elif mode == "constant" or (lo <= 0 and hi <= 0):
                # a crop reads inside the axis in every mode; a constant border is selected
                src.append(s)
                if static_size(lo) is None or lo > 0:
                    inside.append(s >= 0)
                if static_size(hi) is None or hi > 0:
                    inside.append(s < d)
            else:
                # negative pads crop first; the positive ones then extend what is left
                crop_lo, crop_hi = max(-lo, 0), max(-hi, 0)
                n = _add(d, -(crop_lo + crop_hi))
                f = _fold(mode, i[k] - lo if lo > 0 else i[k], n)
                src.append(f + crop_lo if crop_lo else f)
        v = x[tuple(src)]
        return select(logical_and(*inside), v, value) if inside else v

    return out_stage("pad", out_type, body)


register_compute("strided_slice", _strided_slice)
register_compute("pad", _pad)

# -- depth/space --------------------------------------------------------------------------------


def _depth_to_space(attrs, inputs, out_type):
    # DCR: x viewed as (N, b, b, C, H, W); CRD: as (N, C, b, b, H, W); out[n, c, h*b+i, w*b+j]
    x, b = inputs[0], attrs["block_size"]
    c_out = index_dims(out_type)[1]

    def body(n, c, h, w):
        i, j = h % b, w % b
        if attrs["mode"] == "DCR":
            ch = (i * b + j) * c_out + c
        else:
            ch = c * (b * b) + i * b + j
        return x[n, ch, h // b, w // b]

    return out_stage("depth_to_space", out_type, body)


def _space_to_depth(attrs, inputs, out_type):
    # x viewed as (N, C, H/b, b, W/b, b); DCR moves the blocks before the channels
    # (out[n, (i*b+j)*C+c, h, w]), CRD after them (out[n, c*b*b+i*b+j, h, w]). ONNX added CRD
    # in opset 28; the op's schema has no mode yet, so a call always gets DCR for now.
    x, b = inputs[0], attrs["block_size"]
    c_in = x.shape[1]
    crd = attrs["mode"] == "CRD"

    def body(n, ch, h, w):
        c, ij = (ch // (b * b), ch % (b * b)) if crd else (ch % c_in, ch // c_in)
        return x[n, c, h * b + ij // b, w * b + ij % b]

    return out_stage("space_to_depth", out_type, body)


register_compute("depth_to_space", _depth_to_space)
register_compute("space_to_depth", _space_to_depth)
