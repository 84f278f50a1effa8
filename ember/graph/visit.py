"""Traversal of graph-IR DAGs: the one mechanism every graph pass builds on.

Graphs share subexpressions (a value used twice is one node), so every function here visits
each distinct node once, children before parents, arguments left to right. Traversal uses an
explicit stack: a model's graph is thousands of nodes deep, far past Python's recursion limit.

    >>> x = Var("x"); y = Call("nn.relu", [x]); z = Call("add", [y, y])
    >>> post_order(z) == [x, y, z]
    True
    >>> print(rewrite(z, lambda n: Call("nn.gelu", n.args) if n == y else None))
    %0 = nn.gelu(%x)
    %1 = add(%0, %0)
    %1
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional, Union

from .ir import Call, Constant, Expr, Function, Module, Tuple, TupleGetItem, Var

Root = Union[Expr, Module]


def children(expr: Expr) -> tuple:
    """The direct operands of ``expr``; a Function's are its params then its body."""
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, Tuple):
        return expr.fields
    if isinstance(expr, TupleGetItem):
        return (expr.tuple,)
    if isinstance(expr, Function):
        return expr.params + (expr.body,)
    return ()


def _roots(root: Root) -> list:
    if isinstance(root, Module):
        return [fn for _, fn in root.functions]
    if not isinstance(root, Expr):
        raise TypeError(f"expected a graph expression or Module, got {type(root).__name__}")
    return [root]


def post_order(root: Root) -> list:
    """Every distinct node of ``root`` once, each after all of its operands.

    For a Module, its functions in name order (sharing nodes between them is allowed).
    """
    # (the hottest loop of a compile -- thousands of traversals of a model's graph and its
    # groups: locals bound, a node's operands read inline, a None on the stack marking that
    # the node below it has its operands done)
    seen: set[int] = set()  # ids are safe: ``root`` keeps every node alive meanwhile
    out: list = []
    add, done = seen.add, out.append
    for r in _roots(root):
        stack = [r]
        pop, push = stack.pop, stack.append
        while stack:
            n = pop()
            if n is None:
                done(pop())
                continue
            if id(n) in seen:
                continue
            add(id(n))
            push(n)
            push(None)
            # in a DAG a seen child is already finished (it cannot be an ancestor), so skip it
            kids = n.args if type(n) is Call else children(n)
            for c in reversed(kids):
                if id(c) not in seen:
                    push(c)
    return out


def walk(root: Root, fn: Callable[[Expr], None]) -> None:
    """Call ``fn`` on every distinct node, operands first (see :func:`post_order`)."""
    for n in post_order(root):
        fn(n)


def rebuild(n: Expr, new: Callable[[Expr], Expr]) -> Expr:
    """``n`` with its operands replaced by their rewritten versions (``n`` itself if none changed)."""
    kids = n.args if type(n) is Call else children(n)
    if not kids:
        return n
    return _with_operands(n, kids, [new(c) for c in kids])


def _with_operands(n: Expr, kids: tuple, nk: list) -> Expr:
    """``n`` with operands ``nk`` in place of ``kids`` (``n`` itself if they are the same)."""
    for a, b in zip(nk, kids):
        if a is not b:
            break
    else:
        return n
    nk = tuple(nk)
    if isinstance(n, Call):
        return n.replace(args=nk)
    if isinstance(n, Tuple):
        return Tuple(nk)
    if isinstance(n, TupleGetItem):
        return n.replace(tuple=nk[0])
    return n.replace(params=nk[:-1], body=nk[-1])  # Function


def rewrite(root: Root, fn: Callable[..., Optional[Expr]], original: bool = False):
    """Rebuild ``root`` bottom-up. ``fn`` gets each node with its operands already rewritten and
    returns a replacement, or None to keep it. ``fn`` runs once per distinct node (a shared
    subexpression is rewritten once and stays shared); unchanged subtrees are returned as is.

    >>> e = Call("exp", [Var("x")])
    >>> rewrite(e, lambda n: None) is e
    True

    With ``original``, ``fn(new, node, get)`` also gets the node as it was and ``get``, which
    maps a node of ``root`` to what it was rewritten to: for a pass that decides on the graph
    as it was (use counts taken before any rewrite: a rewrite rebuilds every node above it).

    A Module is rewritten function by function (with one memo) into a new Module.
    """
    memo: dict[int, Expr] = {}
    get = lambda c: memo[id(c)]  # noqa: E731 - operands are always rewritten first
    for n in post_order(root):
        kids = n.args if type(n) is Call else children(n)  # (rebuild, inline: every node of every pass)
        m = _with_operands(n, kids, [memo[id(c)] for c in kids]) if kids else n
        out = fn(m, n, get) if original else fn(m)
        if out is not None and not isinstance(out, Expr):
            raise TypeError(f"rewrite: the function returned {out!r} ({type(out).__name__}) for "
                            f"{type(n).__name__}; expected a graph expression or None")
        memo[id(n)] = m if out is None else out
    if isinstance(root, Module):
        new = [(name, memo[id(f)]) for name, f in root.functions]
        if all(memo[id(f)] is f for _, f in root.functions):
            return root
        return Module(new)
    return memo[id(root)]


def substitute(root: Root, mapping: dict):
    """Replace nodes (usually Vars) by the expressions ``mapping`` gives for them."""
    if not mapping:
        return root
    return rewrite(root, lambda n: mapping.get(n))


def topo_calls(root: Root) -> list:
    """The Calls of ``root`` in an order that computes every Call after the Calls it uses
    (the executor's order; deterministic: operands left to right)."""
    return [n for n in post_order(root) if isinstance(n, Call)]


def free_vars(root: Root) -> list:
    """Variables used but not bound by an enclosing Function's params, in first-use order.

    ``Function(free_vars(e), e)`` closes an expression over its inputs.
    """
    out: dict = {}
    for r in _roots(root):
        bound = set(r.params) if isinstance(r, Function) else set()
        body = r.body if isinstance(r, Function) else r
        for n in post_order(body):
            if isinstance(n, Var) and n not in bound:
                out.setdefault(n, None)
    return list(out)


def use_counts(root: Root) -> dict:
    """How many times each distinct node is used as an operand; a Function's body counts one use
    (its caller reads the result), params are bindings, not uses.

    ``add(x, x)`` uses ``x`` twice. Every node of ``root`` is a key (unused ones map to 0).
    Fusion uses this: a value with more than one use must be materialized.
    """
    counts: dict = {}
    for n in post_order(root):
        counts.setdefault(n, 0)
        for c in ((n.body,) if isinstance(n, Function) else children(n)):
            counts[c] = counts.get(c, 0) + 1
    return counts


def readers_of(root: Root) -> dict:
    """Each node -> the nodes that read it, once per use (``add(x, x)`` lists the add twice),
    in dataflow order; nodes nothing reads are not keys."""
    out: dict = {}
    for n in post_order(root):
        for c in children(n):
            out.setdefault(c, []).append(n)
    return out


def count_nodes(root: Root, kinds: Iterable[type] = (Call,)) -> int:
    """How many distinct nodes of the given kinds ``root`` holds (Calls by default)."""
    kinds = tuple(kinds)
    return sum(isinstance(n, kinds) for n in post_order(root))


_NOT_CONSTANT = float("inf")


def constant_depth(expr: Expr) -> float:
    """How many levels of calls ``expr`` computes over constants alone (a Constant: 0, a call of
    constants: 1, ...), or ``inf`` where it reads anything else (a variable, a call of no
    operands). The answer is kept on each node it walks (a pure function of an immutable node,
    like its hash), so asking it of every value of a graph costs one walk in all, not one down
    to the model's input per question."""
    got = expr.__dict__.get("_constant_depth")
    if got is not None:
        return got
    stack = [expr]
    while stack:
        n = stack[-1]
        if "_constant_depth" in n.__dict__:
            stack.pop()
            continue
        if isinstance(n, Constant):
            depth = 0
        elif type(n) is not Call or not n.args:
            depth = _NOT_CONSTANT
        else:
            todo = [a for a in n.args if "_constant_depth" not in a.__dict__]
            if todo:
                stack.extend(todo)
                continue
            depth = 1 + max(a.__dict__["_constant_depth"] for a in n.args)
        object.__setattr__(n, "_constant_depth", depth)
        stack.pop()
    return expr.__dict__["_constant_depth"]


__all__ = ["children", "constant_depth", "readers_of", "rebuild", "post_order", "walk", "rewrite", "substitute", "topo_calls", "free_vars",
           "use_counts", "count_nodes"]
