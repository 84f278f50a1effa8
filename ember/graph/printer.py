"""The graph IR's text form: SSA bindings, one per Call/Tuple/TupleGetItem, stable across runs.

    def main(%data: Tensor[(1, 3, 224, 224), float32]) -> Tensor[(1, 1000), float32]:
        %0 = nn.conv2d(%data, meta[Constant][0], padding=(3, 3, 3, 3), strides=(2, 2)) : Tensor[...]
        %1 = nn.relu(%0)
        return %1

    # meta[Constant][0]: Tensor[(64, 3, 7, 7), float32]

A shared subexpression is bound once and referred to by name. Attributes print sorted by
name; a Call's type prints after `` : `` when known. Constants of up to ``inline_limit``
elements print inline (``const([1, 2], int64)``); larger ones as ``meta[Constant][k]``, numbered
in order of first use across the module, with their types listed in a footer. Names that are
not identifiers are quoted (``%"input.1"``); distinct variables that share a name get ``_1``,
``_2`` suffixes. Nothing depends on ids or hashes, so the same graph prints the same text.
"""
from __future__ import annotations

from typing import Union

import numpy as np

from .attrs import format_value
from .ir import Call, Constant, Expr, Function, Module, Tuple, TupleGetItem, Var
from .types import Type, quote_name
from .visit import post_order

INLINE_LIMIT = 8
INDENT = "    "


def astext(obj: Union[Module, Expr, Type], *, inline_limit: int = INLINE_LIMIT, name: str = "fn") -> str:
    """The text form of a Module, Function (printed as ``def {name}``), expression or type.

    >>> print(astext(Call("nn.relu", [Var("x")])))
    %0 = nn.relu(%x)
    %0
    """
    if isinstance(obj, Type):
        return str(obj)
    p = _Printer(inline_limit)
    if isinstance(obj, Module):
        blocks = ["\n".join(p.function(n, fn)) for n, fn in _module_order(obj)]
    elif isinstance(obj, Function):
        blocks = ["\n".join(p.function(name, obj))]
    elif isinstance(obj, Expr):
        blocks = ["\n".join(p.expr(obj))]
    else:
        raise TypeError(f"astext: expected a graph Module, expression or type, got {type(obj).__name__}")
    if p.meta:
        blocks.append("\n".join(f"# meta[Constant][{k}]: {c.type}" for c, k in p.meta.items()))
    return "\n\n".join(blocks)


def _module_order(mod: Module) -> list:
    """``main`` first (the entry point is what a reader looks for), then the rest by name."""
    return sorted(mod.functions, key=lambda item: (item[0] != "main", item[0]))


class _Printer:
    def __init__(self, inline_limit: int):
        self.inline_limit = inline_limit
        self.meta: dict[Constant, int] = {}  # keyed structurally: equal constants share an index
        self._scope()

    def _scope(self) -> None:
        """Fresh SSA numbering and variable names (one scope per function)."""
        # keyed by node, i.e. structurally: equal subexpressions get one name even when they
        # are distinct objects (interning makes that rare), so the text depends on structure only
        self.names: dict[Expr, str] = {}
        self.taken: set[str] = set()
        self.counter = 0

    # -- blocks ------------------------------------------------------------------------------
    def function(self, gname: str, fn: Function) -> list:
        self._scope()
        params = []
        for v in fn.params:
            ref = self.var(v)
            params.append(f"{ref}: {v.type}" if v.type is not None else ref)
        ret = f" -> {fn.ret_type}" if fn.ret_type is not None else ""
        lines = [f"def {gname}({', '.join(params)}){ret}:"]
        lines += self.bindings(fn.body, INDENT)
        lines.append(f"{INDENT}return {self.ref(fn.body)}")
        return lines

    def expr(self, e: Expr) -> list:
        self._scope()
        return self.bindings(e, "") + [self.ref(e)]

    def bindings(self, root: Expr, indent: str) -> list:
        lines = []
        for n in post_order(root):
            if isinstance(n, (Call, Tuple, TupleGetItem)) and n not in self.names:
                rhs = self.rhs(n)
                name = f"%{self.counter}"
                self.counter += 1
                self.names[n] = name
                typ = f" : {n.type}" if isinstance(n, Call) and n.type is not None else ""
                lines.append(f"{indent}{name} = {rhs}{typ}")
        return lines

    # -- pieces ------------------------------------------------------------------------------
    def rhs(self, n: Expr) -> str:
        if isinstance(n, Call):
            parts = [self.ref(a) for a in n.args]
            parts += [f"{k}={format_value(v)}" for k, v in n.attrs.pairs]
            return f"{n.op}({', '.join(parts)})"
        if isinstance(n, Tuple):
            refs = [self.ref(f) for f in n.fields]
            return f"({refs[0]},)" if len(refs) == 1 else "(" + ", ".join(refs) + ")"
        return f"{self.ref(n.tuple)}.{n.index}"  # TupleGetItem

    def ref(self, n: Expr) -> str:
        if isinstance(n, Var):
            return self.var(n)
        if isinstance(n, Constant):
            return self.constant(n)
        return self.names[n]

    def var(self, v: Var) -> str:
        try:
            return self.names[v]
        except KeyError:
            pass
        text, k = "%" + quote_name(v.name), 0
        while text in self.taken:  # another variable with this name (a different type)
            k += 1
            text = "%" + quote_name(f"{v.name}_{k}")
        self.taken.add(text)
        self.names[v] = text
        return text

    def constant(self, c: Constant) -> str:
        v = c.value
        if v.size <= self.inline_limit and (v.size > 0 or v.ndim == 1):
            return f"const({_array_text(v)}, {c.dtype})"
        k = self.meta.setdefault(c, len(self.meta))
        return f"meta[Constant][{k}]"


def _array_text(v: np.ndarray) -> str:
    """Nested-list text of a small array; numpy's shortest round-trip spelling of each element."""
    if v.ndim == 0:
        return str(v[()])
    return "[" + ", ".join(_array_text(x) for x in v) + "]"
