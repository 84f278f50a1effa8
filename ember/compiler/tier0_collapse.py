"""Tier 0's elementwise groups over collapsed shapes: one kernel for every layout.

An elementwise group (a bias and an activation, a residual add, an epilogue that
:mod:`.tier0_split` ran apart from its convolution) computes the same at every element
whatever its operands' rank and layout: ``relu(x + b)`` over blocked data ``(1, C/16, H, W,
16)`` and a bias ``(1, C/16, 1, 1, 16)`` is ``relu(x + b)`` over ``(C/16, H*W, 16)`` and ``(C/16,
1, 16)``, and over ``(1, 1, H, W, 32)`` with ``(1, 1, 1, 1, 32)`` it is ``(H*W, 32)`` with ``(1,
32)`` -- the same kernel as ``(1, C, H, W)`` with ``(1, C, 1, 1)`` as ``(C, H*W)`` with ``(C, 1)``
under broadcasting once its sizes go generic. :func:`collapse` drops the axes of 1 and merges
neighbouring axes that every operand reads alike (all of each, or all broadcast), as the
established runtimes do for their elementwise loops; the program then passes each buffer
viewed in that shape (a view slot: no copy), :func:`view_args`. Only static shapes collapse.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

from ..graph.infer import infer_types
from ..graph.ir import Call, Constant, Function, Var
from ..graph.ops import get_op
from ..graph.ops.registry import Pattern
from ..graph.types import TensorType
from ..graph.visit import post_order, substitute

__all__ = ["ALONG", "Viewed", "collapse", "view_args"]

# attributes that name axes or shapes: an op with one does not compute the same on other axes
_SHAPED = ("axis", "axes", "shape")


@dataclasses.dataclass(frozen=True)
class Viewed:
    """A group's tier-0 kernel over collapsed shapes: its ``name`` and ``sizes`` (as a tier-0
    choice's) and ``shapes``, per kernel argument (its inputs, then its output), the shape the
    call passes that buffer as."""

    name: str
    sizes: dict
    shapes: tuple


def _elementwise(fn: Function) -> bool:
    for n in post_order(fn.body):
        if isinstance(n, Constant) and n.type.ndim:
            return False  # (a tensor constant has its own shape)
        if isinstance(n, Call) and (not n.args or get_op(n.op).pattern not in (Pattern.ELEMWISE, Pattern.BROADCAST)
                                    or any(k in _SHAPED for k in dict(n.attrs))):
            return False
    return True


def collapse(fn: Function) -> Optional[tuple]:
    """``(function, shapes)``: group ``fn`` over its collapsed shapes, ``shapes`` its
    parameters' then its result's -- or None where it does not collapse (another kind of
    group, symbolic shapes, or nothing to drop or merge). An elementwise group keeps its ops
    (:func:`_elementwise_collapse`); a chain of reshapes and transposes becomes one transpose
    of the fewest axes (:func:`_movement_collapse`); an op along its operand's last axes runs
    over (rows, n) (:func:`_trailing_collapse`)."""
    c = _collapse(fn)
    if c is not None:
        return c
    e = _edge_views(fn)
    return None if e is None else (_collapse(e[0]) or e)


def _collapse(fn: Function) -> Optional[tuple]:
    return (_elementwise_collapse(fn) or _movement_collapse(fn) or _trailing_collapse(fn) or _axis_collapse(fn)
            or _batch_collapse(fn))


_VIEWS = ("reshape", "squeeze", "unsqueeze", "flatten")


def _edge_views(fn: Function) -> Optional[tuple]:
    """``(function, shapes)``: ``fn`` with the reshapes at its edges as views -- a parameter
    read only through a reshape becomes a parameter of the reshaped shape (the call passes its
    buffer viewed so), and a reshaped result is the result before it, the output buffer viewed
    -- or None where it has none. ViT's ``reshape(x) + y`` is then an add, collapsed like any."""
    if not all(isinstance(p.type, TensorType) and p.type.is_static for p in fn.params):
        return None
    calls = [n for n in post_order(fn.body) if isinstance(n, Call)]
    uses: dict = {}
    for n in calls:
        for a in n.args:
            uses.setdefault(a, set()).add(n)
    body = fn.body
    while isinstance(body, Call) and body.op in _VIEWS and isinstance(body.args[0], Call):
        body = body.args[0]
    mapping, params, shapes = {}, [], []
    for p in fn.params:
        n = p
        while len(uses.get(n, ())) == 1:
            (u,) = uses[n]
            if u is body or not (u.op in _VIEWS and isinstance(u.type, TensorType) and u.type.is_static):
                break
            n = u
        if n is not p:
            mapping[n] = Var(p.name, n.type)
        params.append(mapping.get(n, p))
        shapes.append(tuple(n.type.shape))
    if not mapping and body is fn.body:
        return None
    try:
        g = infer_types(Function(params, substitute(body, mapping) if mapping else body))
    except Exception:
        return None
    if not (isinstance(g.body.type, TensorType) and g.body.type.is_static):
        return None
    return g, tuple(shapes) + (tuple(g.body.type.shape),)


# ops that compute along their operand's last axes, each row alike: the attribute that says from
# which axis on (a softmax's, a layer norm's) or which axes (a reduction's)
_TRAILING = {"nn.softmax": "axis", "nn.log_softmax": "axis", "nn.layer_norm": "axis",
             "mean": "axis", "sum": "axis", "max": "axis", "min": "axis"}


def _trailing_collapse(fn: Function) -> Optional[tuple]:
    """An op over its operand's last axes alone (a softmax, a layer norm, a mean over the
    channels-last image) as the same op over ``(rows, n)``: the axes before merge into rows and
    the axes it computes along into one. Swin's (64, 3, 49, 49) softmax is BERT's (1, 12, 128,
    128) one, its (1, 56, 56, 96) layer norm GPT-2's (1, 128, 768)."""
    body = fn.body
    if not (isinstance(body, Call) and body.op in _TRAILING and tuple(body.args) == tuple(fn.params)):
        return None
    if not all(isinstance(p.type, TensorType) and p.type.is_static for p in fn.params) \
            or not (isinstance(body.type, TensorType) and body.type.is_static):
        return None
    x = fn.params[0].type
    axis = body.attr(_TRAILING[body.op], None)
    r = x.ndim
    if isinstance(axis, int):
        first = axis % r if -r <= axis < r else None
        if body.op in ("nn.softmax", "nn.log_softmax") and first != r - 1:
            return None
    elif isinstance(axis, tuple) and axis:
        axes = sorted(a % r for a in axis)
        first = axes[0] if axes == list(range(axes[0], r)) else None
    else:
        return None
    if first is None or first == 0:
        return None
    rows, n = math.prod(x.shape[:first]), math.prod(x.shape[first:])
    if (rows, n) == tuple(x.shape):
        return None
    # (a layer norm's scale and shift: each a vector over the normalized axes)
    others = [p.type for p in fn.params[1:]]
    if any(math.prod(t.shape) != n or tuple(t.shape) != tuple(x.shape[first:])[-t.ndim:] for t in others):
        return None
    new = [(rows, n)] + [(n,) for _ in others]
    params = [Var(p.name, TensorType(shape, p.type.dtype)) for p, shape in zip(fn.params, new)]
    attrs = dict(body.attrs)
    attrs[_TRAILING[body.op]] = -1 if isinstance(axis, int) else (1,)
    keep = body.op not in ("mean", "sum", "max", "min") or body.attr("keepdims", False)
    out = (rows, n) if body.type.ndim == r and math.prod(body.type.shape) == rows * n else \
        ((rows, 1) if keep else (rows,))
    try:
        g = infer_types(Function(params, Call(body.op, tuple(params), attrs)))
    except Exception:
        return None
    if tuple(g.body.type.shape) != out or math.prod(out) != math.prod(body.type.shape):
        return None
    return g, tuple(new) + (out,)


# ops that act along some axes of their operands and copy the rest alike: the attribute naming them
ALONG = {"strided_slice": "axes", "concat": "axis", "gather": "axis"}


def _axis_collapse(fn: Function) -> Optional[tuple]:
    """A slice, concat or gather alone over the fewest axes: each axis it acts along stays, the
    axes before, between and after them merge into one each (one of 1 where there are none, so
    that every such op of one axis is ``(outer, n, inner)``; a tier-0 kernel's axes of 1 past
    the first are sizes, :func:`.tier0._tier0_function`). Swin's slices of its rows and of its
    columns, of every stage, are one slice of the middle of three axes; a gather of one of the
    stacked query, key and value, of a row of ``(3, n, 1)``."""
    body = fn.body
    if not (isinstance(body, Call) and body.op in ALONG and all(a in fn.params for a in body.args)
            and len(set(body.args)) == len(body.args)):
        return None
    if not all(isinstance(p.type, TensorType) and p.type.is_static for p in fn.params) \
            or not (isinstance(body.type, TensorType) and body.type.is_static):
        return None
    data = body.args if body.op == "concat" else body.args[:1]
    x = data[0].type
    r = x.ndim
    named = body.attr(ALONG[body.op], None)
    if body.op == "strided_slice":
        named = tuple(range(len(body.attr("begin")))) if named is None else named
    named = (named,) if isinstance(named, int) else tuple(named)
    if not r or any(not -r <= a < r for a in named):
        return None
    acts = sorted({a % r for a in named})
    runs: list = [[]]  # axes of the new shape: the others' runs (maybe empty) around each acted along
    for k in range(r):
        if k in acts:
            runs += [[k], []]
        else:
            runs[-1].append(k)
    where = {g[0]: i for i, g in enumerate(runs) if g and g[0] in acts}
    new_data = [tuple(math.prod(t.type.shape[k] for k in g) for g in runs) for t in data]
    if all(n == tuple(t.type.shape) for n, t in zip(new_data, data)):
        return None
    attrs = dict(body.attrs)
    if body.op == "strided_slice":
        attrs["axes"] = tuple(where[a % r] for a in named)
    else:
        attrs["axis"] = where[named[0] % r]
    # (the op's operands in its order, the function's parameters in theirs: a concat's parts
    # may come in another order than the group numbered them)
    shape_of = dict(zip(data, new_data))
    new = {p: Var(p.name, TensorType(shape_of.get(p, tuple(p.type.shape)), p.type.dtype)) for p in fn.params}
    try:
        g = infer_types(Function([new[p] for p in fn.params], Call(body.op, tuple(new[a] for a in body.args), attrs)))
    except Exception:
        return None
    out = tuple(g.body.type.shape)
    if math.prod(out) != math.prod(body.type.shape):
        return None
    return g, tuple(tuple(new[p].type.shape) for p in fn.params) + (out,)


def _batch_collapse(fn: Function) -> Optional[tuple]:
    """A product of two activations alone over one batch axis: attention's products over
    ``(heads, rows, n)`` whatever the batch dims (ViT's ``(1, 12, 197, 64)``, Swin's windows
    ``(64, 3, 49, 32)``)."""
    body = fn.body
    if not (isinstance(body, Call) and body.op == "nn.matmul" and tuple(body.args) == tuple(fn.params)
            and len(fn.params) == 2 and not body.attrs):
        return None
    a, b = (p.type for p in fn.params)
    if not (isinstance(a, TensorType) and isinstance(b, TensorType) and a.is_static and b.is_static
            and a.ndim == b.ndim and a.ndim > 3 and a.shape[:-2] == b.shape[:-2]
            and isinstance(body.type, TensorType)):
        return None
    n = math.prod(a.shape[:-2])
    shapes = ((n, *a.shape[-2:]), (n, *b.shape[-2:]))
    params = [Var(p.name, TensorType(s, p.type.dtype)) for p, s in zip(fn.params, shapes)]
    try:
        g = infer_types(Function(params, Call(body.op, tuple(params), {})))
    except Exception:
        return None
    return g, shapes + (tuple(g.body.type.shape),)


def _elementwise_collapse(fn: Function) -> Optional[tuple]:
    out = fn.body.type
    if not (isinstance(out, TensorType) and out.is_static and out.ndim
            and all(isinstance(p.type, TensorType) and p.type.is_static and p.type.ndim <= out.ndim
                    for p in fn.params) and _elementwise(fn)):
        return None
    r = out.ndim
    aligned = [(1,) * (r - p.type.ndim) + tuple(p.type.shape) for p in fn.params]
    if any(d not in (1, o) for a in aligned for d, o in zip(a, out.shape)):
        return None
    runs: list = []  # (axes, which parameters read them whole)
    for k, o in enumerate(out.shape):
        if o == 1:
            continue
        whole = tuple(a[k] == o for a in aligned)
        if runs and runs[-1][1] == whole:
            runs[-1][0].append(k)
        else:
            runs.append(([k], whole))
    if not runs:
        return None
    new_out = tuple(math.prod(out.shape[k] for k in axes) for axes, _ in runs)
    new_params = [tuple(math.prod(out.shape[k] for k in axes) if whole[i] else 1 for axes, whole in runs)
                  for i in range(len(fn.params))]
    if new_out == tuple(out.shape) and all(n == tuple(p.type.shape) for n, p in zip(new_params, fn.params)):
        return None
    params = [Var(p.name, TensorType(s, p.type.dtype)) for p, s in zip(fn.params, new_params)]
    try:
        g = infer_types(Function(params, substitute(fn.body, dict(zip(fn.params, params)))))
    except Exception:  # (an op whose rule wants its operands' own shapes)
        return None
    return g, tuple(new_params) + (new_out,)


_MOVES = ("reshape", "transpose", "squeeze", "unsqueeze", "flatten")


def _movement_collapse(fn: Function) -> Optional[tuple]:
    """A chain of reshapes and transposes of one static operand as the transpose it is: the
    operand's elements are split into *atoms* (runs of an axis each reshape keeps whole), the
    result reads the atoms in some order, and atoms neighbouring in both orders merge. Swin's
    window partitions of every stage, ViT's and GPT-2's head splits: a transpose of two middle
    axes of four, one kernel."""
    if len(fn.params) != 1 or not isinstance(fn.params[0].type, TensorType) or not fn.params[0].type.is_static:
        return None
    chain, n = [], fn.body
    while isinstance(n, Call) and n.op in _MOVES and len(n.args) == 1:
        chain.append(n)
        n = n.args[0]
    if n is not fn.params[0] or not chain or not (isinstance(fn.body.type, TensorType) and fn.body.type.is_static):
        return None
    # (the reshapes after the last transpose only view its result: the call views the output)
    chain = chain[next((k for k, c in enumerate(chain) if c.op == "transpose"), len(chain)):]
    size: dict = {}  # atom -> its extent
    order: list = []  # the atoms in the operand's order
    dims: list = []  # per axis of the current value: its atoms, outermost first
    for d in fn.params[0].type.shape:
        if d > 1:
            size[len(size)] = d
            order.append(len(size) - 1)
        dims.append([len(size) - 1] if d > 1 else [])
    for c in reversed(chain):
        if c.op == "transpose":
            axes = c.attr("axes", None) or tuple(reversed(range(len(dims))))
            dims = [dims[a] for a in axes]
            continue
        atoms = [a for d in dims for a in d]
        dims, k = [], 0
        for want in c.type.shape:  # (squeeze, unsqueeze and flatten reshape too)
            got, here = 1, []
            while got < want:
                if k == len(atoms):
                    return None
                a = atoms[k]
                if got * size[a] <= want:
                    got *= size[a]
                    here.append(a)
                    k += 1
                    continue
                part = want // got  # (the atom splits: its outer part ends this axis)
                if want % got or size[a] % part:
                    return None
                new = len(size)
                size[new], size[a] = size[a] // part, part
                atoms.insert(k + 1, new)
                order.insert(order.index(a) + 1, new)
                here.append(a)
                got *= part
                k += 1
            if got != want:
                return None
            dims.append(here)
        if k != len(atoms):
            return None
    read = [a for d in dims for a in d]  # the atoms in the result's order
    runs: list = []  # merged atoms: runs neighbouring in both orders
    for a in read:
        if runs and order.index(runs[-1][-1]) + 1 == order.index(a):
            runs[-1].append(a)
        else:
            runs.append([a])
    runs_in = sorted(runs, key=lambda r: order.index(r[0]))
    shape_in = tuple(math.prod(size[a] for a in r) for r in runs_in) or (1,)
    perm = tuple(runs_in.index(r) for r in runs) or (0,)
    shape_out = tuple(shape_in[p] for p in perm)
    if (shape_in, shape_out) == (tuple(fn.params[0].type.shape), tuple(fn.body.type.shape)):
        return None  # (a transpose of the fewest axes already)
    x = Var(fn.params[0].name, TensorType(shape_in, fn.params[0].type.dtype))
    try:
        g = infer_types(Function([x], Call("transpose", (x,), {"axes": perm})))
    except Exception:
        return None
    return g, (shape_in, shape_out)


def view_args(slots: list, args: list, shapes: tuple) -> list:
    """``args`` (slot indices: a call's inputs then its output) with each one whose buffer a
    collapsed kernel reads in another shape (``shapes``) replaced by a new view slot of the same
    bytes, appended to ``slots``."""
    out = []
    for a, new in zip(args, shapes):
        s = slots[a]
        if tuple(new) == tuple(s["shape"]):
            out.append(a)
            continue
        view = {"kind": "view", "shape": list(new), "dtype": s["dtype"]}
        if s["kind"] == "view":  # (a view of a view: of its base, at its offset)
            view["base"] = s["base"]
            if "offset" in s:
                view["offset"] = s["offset"]
        else:
            view["base"] = a
        out.append(len(slots))
        slots.append(view)
    return out
