"""Tier 0's anchors apart from their epilogues: kernels shared across models.

A fused group is its anchor (a convolution, a product) and the elementwise ops applied to its
result: a bias, an activation (ReLU, ReLU6, SiLU ...), a residual add. Models differ in those
epilogues far more than in their anchors, so a tier-0 kernel of the whole group is found in
the cache only for a model that fuses the same epilogue (MobileNetV2 builds 15 tier-0
convolution kernels its own with the other zoo and light models' kernels cached). Run apart,
the anchor's kernel is shared by every model with that convolution (its window, stride,
padding and blocks), and the epilogue's by every model with that elementwise chain, of any
shape.

:func:`split_group` gives the two functions; :func:`split_calls` rewrites a program's call of
such a group into two calls, the anchor writing its result into a scratch buffer that the
epilogue reads. The scratch buffers share one region past the program's arena (each lives from
its anchor's call to its epilogue's, the next one after). Only static programs are split
(their memory is planned once, at compile time); a tier-0 run then costs a pass over the
anchor's result more, a fraction of what tier 0's plain schedules already cost.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ..graph.ir import Call, Function, Var
from ..graph.ops import get_op
from ..graph.ops.registry import Pattern
from ..graph.types import TensorType
from ..graph.visit import free_vars, post_order, substitute
from .program import nbytes
from .tier0_collapse import Viewed, view_args
from .tier0_ops import Steps, static

__all__ = ["PerCall", "Split", "choice_of", "split_calls", "split_group", "splittable"]

_ALIGN = 64


@dataclasses.dataclass(frozen=True)
class Split:
    """A group's tier-0 kernels run apart: ``anchor`` is ``(kernel name, sizes, positions,
    shapes)`` -- the positions of the group's parameters it reads, the shapes its arguments are
    viewed in (None: their own; :mod:`.tier0_collapse`) --, ``epilogue`` the same (it reads
    the scratch buffer first), ``scratch`` the type of the anchor's result."""

    anchor: tuple
    epilogue: tuple
    scratch: TensorType

    @property
    def names(self) -> tuple:
        return self.anchor[0], self.epilogue[0]


@dataclasses.dataclass(frozen=True)
class PerCall:
    """The tier-0 choices of a shape-generic tier-1 kernel whose calls take different sizes
    (Swin's window shift, one kernel over its four stages): ``choices`` maps each call's sizes,
    as :func:`sizes_key` gives them, to its own choice (the group bound to those sizes and
    made generic again the tier-0 way, :func:`~.tier0.tier0_kernels`)."""

    choices: tuple  # ((sizes key, choice), ...)

    @property
    def names(self) -> tuple:
        from .tier0 import kernel_names

        return tuple(dict.fromkeys(n for _, c in self.choices for n in kernel_names(c)))


def sizes_key(scalars: dict) -> tuple:
    return tuple(sorted(scalars.items()))


def choice_of(chosen: dict, call: dict):
    """The tier-0 choice (of ``chosen``, tier-1 kernel name -> choice) for program call
    ``call``, or None where its kernel has none."""
    c = chosen.get(call["kernel"])
    return dict(c.choices)[sizes_key(call.get("scalars", {}))] if isinstance(c, PerCall) else c


def splittable(program: dict) -> bool:
    """Whether ``program``'s calls can be split: its memory planned at compile time (no
    symbolic sizes) and no control flow (whose steps are placed by call index)."""
    return (program.get("arena_bytes") is not None and not program.get("symbols")
            and not program.get("controls") and not program.get("binds"))


def split_group(fn: Function) -> Optional[tuple]:
    """``(anchor function, its parameter positions, epilogue function, its positions)`` of a
    group whose anchor (a convolution, a product) an elementwise epilogue follows, all of static
    shapes; None for any other group."""
    body = fn.body
    if not (isinstance(body, Call) and static(body.type) and all(static(p.type) for p in fn.params)):
        return None
    anchors = [c for c in post_order(body) if isinstance(c, Call) and get_op(c.op).pattern == Pattern.OUT_ELEMWISE_FUSABLE]
    if len(anchors) != 1 or anchors[0] is body or not static(anchors[0].type):
        return None
    a = anchors[0]
    index = {p: i for i, p in enumerate(fn.params)}
    used = set(free_vars(a))
    anchor_params = [p for p in fn.params if p in used]
    result = Var("anchor_result", a.type)
    rest = substitute(body, {a: result})
    if any(n is a for n in post_order(rest)):
        return None
    used = set(free_vars(rest))
    epilogue_params = [p for p in fn.params if p in used]
    return (_canonical(anchor_params, a), tuple(index[p] for p in anchor_params),
            _canonical([result] + epilogue_params, rest), tuple(index[p] for p in epilogue_params))


def _canonical(params: list, body) -> Function:
    """``Function(params, body)`` with its parameters named ``p0, p1, ...`` in order, as fused
    groups name theirs (a tier-0 kernel is named by its function's text)."""
    new = [Var(f"p{i}", p.type) for i, p in enumerate(params)]
    return Function(new, substitute(body, dict(zip(params, new))))


def split_calls(program: dict, chosen: dict) -> dict:
    """``program`` (a copy) with each call of a group that ``chosen`` maps to a :class:`Split`
    made two calls through a scratch buffer, each call of one it maps to a
    :class:`~.tier0_ops.Steps` a call per op through scratch buffers, and each call of one it
    maps to a :class:`~.tier0_collapse.Viewed` passing its buffers in their collapsed shapes;
    the slots' lifetimes follow the calls' new places. (The anchor's call keeps the group's work and
    packed dot for the profiler; its traffic is not counted.)"""
    slots = [dict(s) for s in program["slots"]]
    old = len(slots)
    region = -(-int(program["arena_bytes"]) // _ALIGN) * _ALIGN
    room = 0
    calls: list = []
    first: dict = {}
    last: dict = {}
    for i, c in enumerate(program["calls"]):
        first[i] = len(calls)
        split = choice_of(chosen, c)
        if isinstance(split, Viewed):
            calls.append(dict(c, kernel=split.name, tier0_of=c["kernel"], args=view_args(slots, c["args"], split.shapes),
                              **({"scalars": {**c.get("scalars", {}), **split.sizes}} if split.sizes else {})))
        elif isinstance(split, Split):
            args = c["args"]
            (aname, asizes, apos, ashapes), (ename, esizes, epos, eshapes) = split.anchor, split.epilogue
            room = max(room, nbytes(split.scratch))
            scratch = len(slots)
            slots.append({"kind": "arena", "shape": list(split.scratch.shape), "dtype": split.scratch.dtype,
                          "offset": region, "live": [len(calls), len(calls) + 1]})
            base = {k: v for k, v in c.items() if k not in ("scalars", "dot", "flops", "bytes")}
            aargs = [args[p] for p in apos] + [scratch]
            calls.append(dict(base, kernel=aname, tier0_of=c["kernel"],
                              args=view_args(slots, aargs, ashapes) if ashapes else aargs,
                              flops=c.get("flops", 0), **({"dot": c["dot"]} if "dot" in c else {}),
                              **({"scalars": dict(asizes)} if asizes else {})))
            eargs = [scratch] + [args[p] for p in epos] + [args[-1]]
            calls.append(dict(base, kernel=ename, tier0_of=c["kernel"], flops=0,
                              args=view_args(slots, eargs, eshapes) if eshapes else eargs,
                              **({"scalars": dict(esizes)} if esizes else {})))
        elif isinstance(split, Steps):
            room = max(room, _steps(split, c, slots, calls, region))
        else:
            calls.append(c)
        last[i] = len(calls) - 1
    for slot in slots[:old]:  # (the scratch slots were placed in the new order already)
        if "live" in slot:
            slot["live"] = [first[slot["live"][0]], last[slot["live"][1]]]
    out = dict(program, slots=slots, calls=calls)
    if room:
        out["arena_bytes"] = region + room
        out["intermediate_bytes"] = int(program.get("intermediate_bytes") or program["arena_bytes"]) + room
    return out


def _steps(split: Steps, c: dict, slots: list, calls: list, region: int) -> int:
    """Append the calls of group call ``c`` run op by op (:class:`~.tier0_ops.Steps`), its
    scratch buffers placed one after another from ``region`` and live for its calls; returns
    the bytes they take."""
    args, n = c["args"], len(split.steps)
    scratch, offset = [], region
    for t in split.scratch:
        scratch.append(len(slots))
        slots.append({"kind": "arena", "shape": list(t.shape), "dtype": t.dtype, "offset": offset,
                      "live": [len(calls), len(calls) + n - 1]})
        offset += -(-nbytes(t) // _ALIGN) * _ALIGN
    base = {k: v for k, v in c.items() if k not in ("scalars", "dot", "flops", "bytes")}
    # (the group's work is its anchor's, or its last op's where it has none: for the profiler)
    worker = next((k for k, s in enumerate(split.steps) if s[4]), n - 1)
    for k, (name, sizes, refs, shapes, _) in enumerate(split.steps):
        at = [args[r[1]] if r[0] == "p" else scratch[r[1]] if r[0] == "t" else args[-1] for r in refs]
        calls.append(dict(base, kernel=name, tier0_of=c["kernel"], args=view_args(slots, at, shapes),
                          flops=c.get("flops", 0) if k == worker else 0,
                          **({"dot": c["dot"]} if k == worker and "dot" in c else {}),
                          **({"scalars": dict(sizes)} if sizes else {})))
    return offset - region
