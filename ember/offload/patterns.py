"""Patterns backends share: which fused groups they take, read off the group's graph."""
from __future__ import annotations

from ..graph.ir import Call, Var

__all__ = ["conv_chain"]


def conv_chain(fn):
    """``(conv, [(op, other operand or None), ...])`` where ``fn``'s body is the conv then
    ReLUs and adds, each of the previous value; else None."""
    steps = []
    e = fn.body
    while isinstance(e, Call) and e.op != "nn.conv2d_nchwc":
        if e.op == "nn.relu" and len(e.args) == 1:
            steps.append(("relu", None))
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
