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

__all__ = ["Viewed", "collapse", "view_args"]

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
    """``(function, shapes)``: elementwise group ``fn`` over its collapsed shapes, ``shapes``
    its parameters' then its result's -- or None where it does not collapse (another kind of
    group, symbolic shapes, or nothing to drop or merge)."""
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
