"""Structural comparison that says *where* two graphs differ.

``structural_diff(a, b)`` is None when ``a`` and ``b`` have the same structure, and otherwise a
message naming the path to the first difference::

    main.body.args[0].attrs['strides']: (2, 2) != (1, 1)

Variables are compared by binding, not by name (alpha-equivalence): the i-th parameter of one
function matches the i-th of the other, so functions that differ only in parameter names are
equal. Free variables must be equal (same name and type) unless ``map_free_vars=True``, which
pairs them by first use instead. Operands are compared before a node's own ``type``, so when a
change deep in the graph alters the inferred types above it, the message names the cause.
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np

from .attrs import format_value, typed_key
from .ir import Call, Constant, Expr, Function, Module, Tuple, TupleGetItem, Var
from .printer import _module_order
from .types import Type

Comparable = Union[Module, Expr, Type]


def structural_diff(a: Comparable, b: Comparable, *, map_free_vars: bool = False) -> Optional[str]:
    """None if ``a`` and ``b`` are structurally equal, else ``"path: a-part != b-part"``.

    >>> x, y = Var("x"), Var("y")
    >>> structural_diff(Function([x], x), Function([y], y)) is None
    True
    >>> structural_diff(Call("nn.relu", [x]), Call("nn.gelu", [x]))
    "expr.op: 'nn.relu' != 'nn.gelu'"
    """
    if isinstance(a, Module) and isinstance(b, Module):
        if list(a) != list(b):
            return f"module: functions {list(a)} != {list(b)}"
        for name, fa in _module_order(a):
            msg = _Differ(map_free_vars).run(fa, b[name], name)
            if msg is not None:
                return msg
        return None
    for kind, label in ((Module, "module"), (Function, "fn"), (Expr, "expr"), (Type, "type")):
        if isinstance(a, kind) or isinstance(b, kind):
            if not (isinstance(a, kind) and isinstance(b, kind)):
                return f"{label}: {_describe(a)} != {_describe(b)}"
            if kind is Type:
                return None if a == b else f"type: {a} != {b}"
            return _Differ(map_free_vars).run(a, b, label)
    raise TypeError(f"structural_diff: cannot compare {type(a).__name__} with {type(b).__name__}")


def assert_structural_equal(a: Comparable, b: Comparable, *, map_free_vars: bool = False) -> None:
    """Raise AssertionError with :func:`structural_diff`'s message unless ``a`` and ``b`` are equal."""
    msg = structural_diff(a, b, map_free_vars=map_free_vars)
    if msg is not None:
        raise AssertionError(msg)


class _Differ:
    """One comparison of two functions or expressions, with one variable binding scope."""

    def __init__(self, map_free_vars: bool):
        self.map_free = map_free_vars
        self.amap: dict = {}  # var of a -> var of b
        self.bmap: dict = {}  # var of b -> var of a
        self.where: tuple = ({}, {})  # per side: var -> "param i" / "free" (for messages)
        self.identity = True  # every binding maps a var to itself: `a is b` proves equality
        self.done: set = set()  # (id(a), id(b)) pairs already compared (graphs are DAGs)

    def run(self, a: Expr, b: Expr, path: str) -> Optional[str]:
        # an explicit stack: graphs are far deeper than Python's recursion limit
        stack: list = [("node", a, b, path)]
        while stack:
            kind, x, y, p = stack.pop()
            if kind == "type":
                if x != y:
                    return f"{p}: {x} != {y}"
                continue
            if (x is y and self.identity) or (id(x), id(y)) in self.done:
                continue
            self.done.add((id(x), id(y)))
            msg = self.step(x, y, p, stack)
            if msg is not None:
                return msg
        return None

    def step(self, a: Expr, b: Expr, path: str, stack: list) -> Optional[str]:
        """Compare what belongs to this node; push the operands (left first) and the type."""
        if type(a) is not type(b):
            return f"{path}: {_describe(a)} != {_describe(b)}"
        later: list = []  # pushed in reverse so that they pop in this order
        if isinstance(a, Var):
            return self.var(a, b, path)
        if isinstance(a, Constant):
            return _constant_diff(a, b, path)
        if isinstance(a, Call):
            if a.op != b.op:
                return f"{path}.op: {a.op!r} != {b.op!r}"
            if len(a.args) != len(b.args):
                return f"{path}.args: {len(a.args)} != {len(b.args)} arguments"
            msg = _attrs_diff(a, b, path)
            if msg is not None:
                return msg
            later += [("node", x, y, f"{path}.args[{i}]") 
                      for i, (x, y) in enumerate(zip(a.args, b.args))]
            later.append(("type", a.type, b.type, f"{path}.type"))
        elif isinstance(a, Tuple):
            if len(a.fields) != len(b.fields):
                return f"{path}.fields: {len(a.fields)} != {len(b.fields)} fields"
            later += [("node", x, y, f"{path}.fields[{i}]")
                      for i, (x, y) in enumerate(zip(a.fields, b.fields))]
        elif isinstance(a, TupleGetItem):
            if a.index != b.index:
                return f"{path}.index: {a.index} != {b.index}"
            later.append(("node", a.tuple, b.tuple, f"{path}.tuple"))
        elif isinstance(a, Function):
            msg = self.bind(a, b, path)
            if msg is not None:
                return msg
            later.append(("node", a.body, b.body, f"{path}.body"))
            later.append(("type", a.ret_type, b.ret_type, f"{path}.ret_type"))
        else:  # pragma: no cover - every Expr kind is handled above
            raise TypeError(f"structural_diff: unknown node {type(a).__name__}")
        stack.extend(reversed(later))
        return None

    def bind(self, a: Function, b: Function, path: str) -> Optional[str]:
        """Pair the parameters of ``a`` and ``b`` in order (their names do not matter)."""
        if len(a.params) != len(b.params):
            return f"{path}.params: {len(a.params)} != {len(b.params)} parameters"
        for i, (pa, pb) in enumerate(zip(a.params, b.params)):
            if pa.type != pb.type:
                return f"{path}.params[{i}].type: {pa.type} != {pb.type}"
            self.amap[pa], self.bmap[pb] = pb, pa
            self.where[0][pa] = self.where[1][pb] = f"param {i}"
            self.identity = self.identity and pa is pb
        return None

    def var(self, a: Var, b: Var, path: str) -> Optional[str]:
        if a in self.amap or b in self.bmap:
            if self.amap.get(a) == b:
                return None
            return f"{path}: {self._var_text(a, 0)} != {self._var_text(b, 1)}"
        if self.map_free:
            if a.type != b.type:
                return f"{path}.type: {a.type} != {b.type}"
            self.amap[a], self.bmap[b] = b, a
            self.where[0][a] = self.where[1][b] = "free"
            self.identity = self.identity and a is b
            return None
        return None if a == b else f"{path}: {self._var_text(a, 0)} != {self._var_text(b, 1)}"

    def _var_text(self, v: Var, side: int) -> str:
        typ = f": {v.type}" if v.type is not None else ""
        return f"%{v.name}{typ} ({self.where[side].get(v, 'free')})"


def _attrs_diff(a: Call, b: Call, path: str) -> Optional[str]:
    if a.attrs == b.attrs:
        return None
    for k in sorted(set(a.attrs) | set(b.attrs)):
        va, vb = a.attrs.get(k, _ABSENT), b.attrs.get(k, _ABSENT)
        if va is _ABSENT or vb is _ABSENT or typed_key(va) != typed_key(vb):
            return f"{path}.attrs[{k!r}]: {_attr_text(va)} != {_attr_text(vb)}"
    return None  # pragma: no cover - unequal Attrs differ in some key


_ABSENT = object()


def _attr_text(v) -> str:
    return "<absent>" if v is _ABSENT else format_value(v)


def _constant_diff(a: Constant, b: Constant, path: str) -> Optional[str]:
    if a.dtype != b.dtype:
        return f"{path}.dtype: {a.dtype} != {b.dtype}"
    if a.shape != b.shape:
        return f"{path}.shape: {a.shape} != {b.shape}"
    if a == b:
        return None
    # the first element whose bytes differ (bytes, not values: -0.0 != 0.0, nan == same nan)
    n, size = a.value.size, a.value.dtype.itemsize
    ra = a.value.reshape(-1).view(np.uint8).reshape(n, size)
    rb = b.value.reshape(-1).view(np.uint8).reshape(n, size)
    flat = int(np.argmax((ra != rb).any(axis=1)))
    idx = np.unravel_index(flat, a.shape) if a.shape else ()
    where = f".value[{', '.join(str(int(i)) for i in idx)}]" if idx else ".value"
    ea, eb = a.value.reshape(-1)[flat], b.value.reshape(-1)[flat]
    return f"{path}{where}: {ea} != {eb}"


def _describe(x) -> str:
    """A short name for a node of any kind, for messages about mismatched kinds."""
    if isinstance(x, Var):
        return f"Var(%{x.name})"
    if isinstance(x, Call):
        return f"Call({x.op})"
    if isinstance(x, Constant):
        return f"Constant({x.type})"
    if isinstance(x, Tuple):
        return f"Tuple({len(x.fields)} fields)"
    if isinstance(x, TupleGetItem):
        return f"TupleGetItem(.{x.index})"
    if isinstance(x, Function):
        return f"Function({len(x.params)} params)"
    if isinstance(x, Type):
        return str(x)
    return type(x).__name__
