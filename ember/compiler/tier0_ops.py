"""Tier 0's groups that move data, one op at a time: kernels any model's groups share.

A fused group that moves data (a slice, a concat, a transpose, a gather) with other ops is a
kernel of its own in nearly every model: Swin-T's window shift is a slice, a concat, a reshape
and a transpose in one group, its attention a gather of the query from the stacked projections
and a scale. Fused, each such group is a tier-0 kernel no other model has (a new model's 30
kernels of 35 ms each with the other models' cached). One op at a time, each is an op that
many models run alone -- a slice of one axis, a transpose of two middle axes, a gather of one
row -- collapsed to the fewest axes and made shape-generic (:mod:`.tier0_collapse`,
:mod:`.generic`), so its kernel is in the cache already.

:func:`op_steps` takes such a group apart: each op (but a reshape, which only views its
operand in another shape) a function of its own, reading the group's parameters or earlier
ops' results, the last writing the group's output. :class:`Steps` is the group's tier-0 choice;
the program runs its kernels in order through scratch buffers past the arena
(:func:`.tier0_split.split_calls`). Only static groups of a static program are taken apart
(their scratch sizes are known at compile time); a tier-0 run pays a pass over each
intermediate, a fraction of what tier 0's plain schedules cost already.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ..graph.infer import infer_types
from ..graph.ir import Call, Constant, Function, Var
from ..graph.ops import get_op
from ..graph.ops.registry import Pattern
from ..graph.passes.code_tables import is_lookup
from ..graph.types import TensorType
from ..graph.visit import post_order
from .tier0_collapse import _VIEWS

__all__ = ["Steps", "op_steps"]



@dataclasses.dataclass(frozen=True)
class Steps:
    """A group's tier-0 kernels, one per op: ``steps``, in order, ``(kernel name, sizes, refs,
    shapes, anchor)`` -- ``refs`` its arguments, inputs then output: ``("p", i)`` the group's
    parameter i, ``("t", j)`` scratch buffer j, ``("o",)`` the group's output; ``shapes`` the
    shape it reads each in; ``anchor`` whether it is the group's anchor (its work, for the
    profiler) --, ``scratch`` the scratch buffers' types."""

    steps: tuple
    scratch: tuple

    @property
    def names(self) -> tuple:
        return tuple(dict.fromkeys(s[0] for s in self.steps))


def static(t) -> bool:
    """Whether ``t`` is a tensor type of static shape."""
    return isinstance(t, TensorType) and t.is_static


def _moves(c: Call) -> bool:
    return c.op not in _VIEWS and get_op(c.op).pattern == Pattern.INJECTIVE and not is_lookup(c)


def op_steps(fn: Function) -> Optional[list]:
    """Group ``fn`` op by op: ``[(function, refs, anchor), ...]`` in order (``refs`` as in
    :class:`Steps`, a function's parameters then its result; its parameters' types are the
    shapes it reads them in), and the scratch buffers' types -- or None where the group does
    not move data alongside other ops, or is not static."""
    body = fn.body
    if not (isinstance(body, Call) and static(body.type) and all(static(p.type) for p in fn.params)):
        return None
    calls = [n for n in post_order(body) if isinstance(n, Call)]
    work = [c for c in calls if c.op not in _VIEWS]
    if len(work) < 2 or not any(_moves(c) for c in work):
        return None
    root = body
    while isinstance(root, Call) and root.op in _VIEWS:
        root = root.args[0]
    if not isinstance(root, Call):
        return None
    where: dict = {p: ("p", i) for i, p in enumerate(fn.params)}
    scratch: list = []
    steps: list = []
    for c in calls:
        if c.op in _VIEWS:  # (its operand's buffer, viewed)
            if c.args[0] not in where:
                return None
            where[c] = where[c.args[0]]
            continue
        params: dict = {}  # operand node -> its parameter in the op's function
        args = []
        for a in c.args:
            if isinstance(a, Constant) and not a.type.ndim:
                args.append(a)
                continue
            if a not in where:  # (a tensor constant: sizes of its own)
                return None
            if a not in params:
                params[a] = Var(f"p{len(params)}", a.type)
            args.append(params[a])
        if c is root:
            out = ("o",)
        else:
            out = ("t", len(scratch))
            scratch.append(c.type)
        try:
            f = infer_types(Function(list(params.values()), Call(c.op, tuple(args), dict(c.attrs))))
        except Exception:  # (an op whose rule wants more than its operands' types)
            return None
        steps.append((f, tuple(where[a] for a in params) + (out,), get_op(c.op).pattern == Pattern.OUT_ELEMWISE_FUSABLE))
        where[c] = out
    return steps, tuple(scratch)
