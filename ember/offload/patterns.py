"""Patterns backends share: which fused groups they take, read off the group's graph."""
from __future__ import annotations

from ..graph.ir import Call, Var

__all__ = ["anchor_chain", "conv_chain"]

# epilogue ops a library's post-ops take: the op and how it reads (its attributes allowed)
_UNARY = {"nn.relu": "relu", "nn.gelu": "gelu", "sigmoid": "sigmoid", "clip": "clip"}


def anchor_chain(fn, anchor: str):
    """``(anchor call, [(step, other operand or None), ...])`` where ``fn``'s body is the
    ``anchor`` op on the group's parameters then ReLUs, GELUs, sigmoids, clips and adds, each of
    the previous value (steps ``"relu"``, ``"sigmoid"``, ``"clip:<min>:<max>"`` (a bound None
    where it has none), ``"gelu"`` with its ``approximate`` appended -- ``"gelu:none"`` --,
    ``"cast"`` with its dtype -- ``"cast:bfloat16"`` --, ``"add"`` with the other operand); else
    None."""
    steps = []
    e = fn.body
    while isinstance(e, Call) and e.op != anchor:
        if e.op in _UNARY and len(e.args) == 1:
            step = _UNARY[e.op]
            if step == "gelu":
                step = f"gelu:{e.attr('approximate', 'none')}"
            elif step == "clip":
                step = f"clip:{e.attr('a_min', None)}:{e.attr('a_max', None)}"
            steps.append((step, None))
            e = e.args[0]
        elif e.op == "cast" and len(e.args) == 1:
            steps.append((f"cast:{e.attr('dtype')}", None))
            e = e.args[0]
        elif e.op == "add" and len(e.args) == 2:
            inner = [a for a in e.args if isinstance(a, Call)]
            other = [a for a in e.args if isinstance(a, Var)]
            if len(inner) != 1 or len(other) != 1:
                return None
            steps.append(("add", other[0]))
            e = inner[0]
        else:
            return None
    if not isinstance(e, Call) or not all(isinstance(a, Var) for a in e.args):
        return None
    return e, steps[::-1]


def conv_chain(fn):
    """``(conv, [(op, other operand or None), ...])`` where ``fn``'s body is the blocked conv
    then ReLUs and adds, each of the previous value; else None."""
    found = anchor_chain(fn, "nn.conv2d_nchwc")
    if found is None or any(op not in ("relu", "add") for op, _ in found[1]):
        return None
    return found
