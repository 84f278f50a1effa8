"""Generic traversal of loop-IR trees: one mechanism that every pass builds on.

``rewrite(tree, fn)`` rebuilds a tree bottom-up, giving ``fn`` each rebuilt node; ``fn`` returns
a replacement or ``None`` to keep it. ``walk`` visits every node. Children are the dataclass
fields that hold nodes or tuples of nodes.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Optional

from .expr import Expr, Load, Var
from .node import Node, field_names, field_values
from .stmt import Buffer, For, PrimFunc, Stmt


def _children_fields(n: Node):
    return zip(field_names(type(n)), field_values(n))


def expr_children(e: Expr) -> Iterator[Expr]:
    """The expressions directly inside ``e`` (those in its index tuples too)."""
    for name in field_names(type(e)):
        v = getattr(e, name)
        if isinstance(v, Expr):
            yield v
        elif isinstance(v, tuple):
            yield from (x for x in v if isinstance(x, Expr))


def walk(tree, visit_buffers: bool = False) -> Iterator[Node]:
    """Every node of ``tree`` in pre-order (buffers are leaves unless ``visit_buffers``)."""
    stack = [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple):
            stack.extend(reversed(n))
            continue
        if not isinstance(n, Node):
            continue
        yield n
        if isinstance(n, Buffer) and not visit_buffers:
            continue
        stack.extend(reversed(field_values(n)))


def rewrite(tree, fn: Callable[[Node], Optional[Node]], *, into_buffers: bool = False):
    """Rebuild ``tree`` bottom-up; ``fn(node)`` may return a replacement for each node."""
    memo: dict[int, object] = {}

    def go(n):
        if isinstance(n, tuple):
            items = tuple(go(x) for x in n)
            return n if all(a is b for a, b in zip(items, n)) else items
        if not isinstance(n, Node):
            return n
        key = id(n)
        if key in memo:
            return memo[key]
        if isinstance(n, Buffer) and not into_buffers:
            out = fn(n)
            memo[key] = n if out is None else out
            return memo[key]
        changes = {}
        for name, v in _children_fields(n):
            nv = go(v)
            if nv is not v:
                changes[name] = nv
        m = dataclasses.replace(n, **changes) if changes else n
        out = fn(m)
        res = m if out is None else out
        memo[key] = res
        return res

    return go(tree)


def substitute(tree, mapping: dict):
    """Replace variables (or any nodes) by the expressions ``mapping`` gives for them."""
    if not mapping:
        return tree
    return rewrite(tree, lambda n: mapping.get(n) if isinstance(n, (Var, Expr)) else None)


def free_vars(tree) -> set:
    """Variables used in ``tree`` but not bound inside it (by a loop, let or allocation)."""
    from .expr import Let
    from .stmt import For, LetStmt

    used, bound = set(), set()
    for n in walk(tree):
        if isinstance(n, Var):
            used.add(n)
        elif isinstance(n, (For, LetStmt, Let)):
            bound.add(n.var)
        elif isinstance(n, Load):
            for s in n.buffer.shape:
                used |= {v for v in walk(s) if isinstance(v, Var)}
    return used - bound


def buffers_used(tree) -> list:
    """Buffers read or written in ``tree``, in first-use order."""
    from .stmt import Allocate, Store

    seen, out = set(), []
    for n in walk(tree):
        if isinstance(n, (Load, Store, Allocate)) and n.buffer not in seen:
            seen.add(n.buffer)
            out.append(n.buffer)
    return out


def loop_nest(func: PrimFunc) -> dict:
    """The size of a kernel's loop nest: ``loops`` (For statements) and ``depth`` (deepest)."""
    loops = depth = 0
    stack = [(func.body, 0)]
    while stack:
        n, d = stack.pop()
        if isinstance(n, tuple):
            stack.extend((c, d) for c in n)
            continue
        if not isinstance(n, Stmt):  # expressions hold no statements
            continue
        if isinstance(n, For):
            loops += 1
            d += 1
            depth = max(depth, d)
        stack.extend((getattr(n, f.name), d) for f in dataclasses.fields(n))
    return {"loops": loops, "depth": depth}
