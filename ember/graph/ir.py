"""Graph-IR expressions: immutable, interned dataflow nodes with structural equality.

A model is a :class:`Module` of :class:`Function` s whose bodies are DAGs of :class:`Call` s
(``op`` is an operator name such as ``"nn.conv2d"``) over :class:`Var` s and
:class:`Constant` s, plus :class:`Tuple` / :class:`TupleGetItem` for multiple results::

    >>> x = Var("x", TensorType((Dim("batch"), 16), "float32"))
    >>> y = Call("nn.relu", (x,))
    >>> y == Call("nn.relu", [x]) and y is Call("nn.relu", [x])   # equal, and interned
    True

Nodes are frozen dataclasses built on the loop IR's :class:`~ember.loop.node.Node` (structural
``==``, hash cached). They are also hash-consed: constructing a node equal to a live one returns
the live one, so equal graphs share their nodes and comparing them is mostly ``is``.

A variable *is* its name and type: ``Var("x", t)`` built twice is the same variable, so a pass
that introduces a variable must pick a fresh name. ``.type`` is what type inference (a later
pass) fills in; every node works without it (``None``). It is part of a node's structure.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
import weakref
from collections.abc import Mapping
from typing import Any, Iterator, Optional

import numpy as np

from ..loop import dtype as dt
from ..loop.node import Node, node
from .attrs import Attrs
from .types import FuncType, TensorType, TupleType, Type, check_type

_OP = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_GLOBAL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_UNSET = object()
_OPS_SEEN: set = set()  # op names already checked against _OP

# Hash-consing table: (class, structural key) -> the live node. Values are weak, so the table
# never keeps a graph alive; keys hold only what the node itself holds (its children).
_TABLE: "weakref.WeakValueDictionary[tuple, Expr]" = weakref.WeakValueDictionary()
_INTERN = True
# The source span new Calls get when none is given (``source_span``); see Call.span.
_SPAN: tuple = ()


@contextlib.contextmanager
def _interning(enabled: bool):
    """Turn hash-consing off (tests use it to check that ``==`` is structural, not ``is``)."""
    global _INTERN
    old, _INTERN = _INTERN, enabled
    try:
        yield
    finally:
        _INTERN = old


@contextlib.contextmanager
def source_span(*names: str):
    """Calls built inside this block without a ``span`` get ``names`` as their span.

    A frontend wraps the conversion of each model node in it (``with source_span("Conv_12"):``),
    so every op that node becomes remembers where it came from; a pass that merges calls
    (batch norm into a conv, say) wraps its rewrite in the union of their spans.
    """
    global _SPAN
    span = tuple(dict.fromkeys(n for n in names if n))
    if not all(isinstance(x, str) for x in span):
        raise TypeError(f"a span is a tuple of source node names, got {span!r}")
    old, _SPAN = _SPAN, span
    try:
        yield
    finally:
        _SPAN = old


def merge_spans(*calls) -> tuple:
    """The union of the spans of ``calls`` (non-calls contribute nothing), in order."""
    return tuple(dict.fromkeys(s for c in calls for s in getattr(c, "span", ())))


class _Interned(type):
    """Metaclass: build the node, then hand back an equal live node if there is one."""

    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        if not _INTERN:
            return obj
        key = (cls, obj._key())
        found = _TABLE.get(key)
        if found is not None and found._same_payload(obj):
            found._absorb(obj)
            return found
        _TABLE[key] = obj
        return obj


class Expr(Node, metaclass=_Interned):
    """Base of graph-IR expressions. ``str``/``repr`` give the printed text form."""

    __slots__ = ()

    def _same_payload(self, other: "Expr") -> bool:
        """Beyond ``_key``: only a Constant has data its key summarizes (a digest)."""
        return True

    def _absorb(self, other: "Expr") -> None:
        """``other`` is being merged into this equal live node (a Call joins its span)."""

    def __reduce__(self):
        # pickle and deepcopy rebuild through the constructor, so they intern too
        return (type(self), tuple(getattr(self, f.name) for f in dataclasses.fields(self)))

    def __str__(self) -> str:
        from .printer import astext  # late: the printer imports the IR

        return astext(self)

    __repr__ = __str__


def _check_expr(e: Any, what: str) -> "Expr":
    if not isinstance(e, Expr):
        raise TypeError(f"{what} must be a graph expression, got {e!r} ({type(e).__name__})")
    if isinstance(e, Function):
        raise TypeError(f"{what} is a Function; functions are only module members (no nesting yet)")
    return e


@node
class Var(Expr):
    """A variable: a function parameter. ``Var("data", TensorType((1, 3), "float32"))``."""

    name: str
    type: Optional[Type] = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"a Var's name must be a non-empty string, got {self.name!r}")
        check_type(self.type, f"the type of Var {self.name!r}")


@node
class Constant(Expr):
    """A tensor literal (weights, shapes). Holds a read-only C-contiguous copy of ``value``.

    Equal when dtype, shape and bytes are equal (so ``nan`` equals the same ``nan``); the hash
    uses a digest of the bytes computed once. ``Constant(np.ones(3, "float32")).type`` is
    ``Tensor[(3,), float32]``.
    """

    value: np.ndarray

    def __post_init__(self):
        owned = isinstance(self.value, _Owned)
        v = np.asarray(self.value.array if owned else self.value)
        dt.from_numpy(v.dtype)  # DTypeError for object, string, complex ... arrays
        # a copy we own and freeze: a caller mutating its array must not change the IR
        # (``Constant.adopt`` skips the copy of an array nobody else writes)
        if not owned or not v.flags.c_contiguous:
            v = np.array(v, copy=True, order="C")
        elif v.flags.writeable:
            v = v.view()  # the caller's array object stays writable, ours does not
        v.setflags(write=False)
        object.__setattr__(self, "value", v)
        object.__setattr__(self, "_digest", _fingerprint(_raw(v)))

    def _key(self) -> tuple:
        return (self.dtype, self.value.shape, self.__dict__["_digest"])

    def _same_payload(self, other: "Constant") -> bool:
        return np.array_equal(_raw(self.value), _raw(other.value))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return Node.__eq__(self, other) and self._same_payload(other)

    __hash__ = Node.__hash__  # defining __eq__ would otherwise drop it

    @classmethod
    def adopt(cls, value: np.ndarray) -> "Constant":
        """A Constant of ``value`` without copying it (when it is C-contiguous): for a fresh
        array nothing else will write, such as a folded result or a view of another constant.
        A model's weights then exist once in memory, not twice."""
        return cls(_Owned(value))

    @property
    def dtype(self) -> str:
        return dt.from_numpy(self.value.dtype)

    @property
    def shape(self) -> tuple:
        return self.value.shape

    @property
    def type(self) -> TensorType:
        return TensorType(self.value.shape, self.dtype)


_WHOLE = 1 << 20  # bytes hashed whole; beyond, a sample (equality still compares every byte)


def _fingerprint(raw) -> bytes:
    """A digest of a constant's bytes for its hash: all of them up to 1 MiB; beyond, the first
    and last 256 KiB and 4096 evenly spaced 8-byte words. Hashing every byte of a model's
    weights cost 0.8 s of every compile of ViT-B (330 MB, twice: imported and packed); two
    different constants that share the sample are still told apart by ``__eq__``, which
    compares every byte."""
    raw = memoryview(raw).cast("B")
    n = len(raw)
    if n <= _WHOLE:
        return hashlib.blake2b(raw, digest_size=16).digest()
    h = hashlib.blake2b(digest_size=16)
    h.update(n.to_bytes(8, "little"))
    h.update(raw[:_WHOLE // 4])
    h.update(raw[n - _WHOLE // 4:])
    words = np.frombuffer(raw[: n - n % 8], dtype=np.uint64)
    h.update(words[:: max(1, len(words) // 4096)].tobytes())
    return h.digest()


class _Owned:
    """An array handed to :meth:`Constant.adopt` (taken without a copy)."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array


def _raw(v: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as uint8 (works for 0-d and ml_dtypes arrays)."""
    return v.reshape(-1).view(np.uint8)


def const(value: Any, dtype: Optional[str] = None) -> Constant:
    """A Constant from anything numpy takes: ``const(0.5, "float32")``, ``const([1, 2], "int64")``."""
    return Constant(np.asarray(value, dtype=None if dtype is None else dt.numpy_dtype(dtype)))


@node
class Call(Expr):
    """An operator applied to arguments: ``Call("nn.conv2d", (x, w), {"strides": (2, 2)})``.

    ``attrs`` may be given as a dict or pairs; it is stored as an :class:`Attrs` (sorted,
    normalized, read-only). ``call.attr("axis", -1)`` reads one with a default.
    """

    op: str
    args: tuple = ()
    attrs: Attrs = Attrs()
    type: Optional[Type] = None
    # The source-model nodes this call came from, e.g. ("Conv_12", "BatchNormalization_13").
    # Provenance, not structure: equality and hashing ignore it. An equal call built while
    # this one lives *is* this one (interning), and its span joins this one's: two model
    # nodes computing the same value are one call that came from both.
    span: tuple = ()

    def __post_init__(self):
        # (fast paths for what every rewrite builds: tens of thousands of calls a compile)
        span = self.span
        if not span:
            span = _SPAN  # (checked by source_span)
        elif type(span) is not tuple or not all(type(x) is str for x in span):
            span = tuple(span)
            if not all(isinstance(x, str) for x in span):
                raise TypeError(f"a span is a tuple of source node names, got {self.span!r}")
        object.__setattr__(self, "span", span)
        if type(self.op) is not str or self.op not in _OPS_SEEN:
            if not isinstance(self.op, str) or not _OP.match(self.op):
                raise ValueError(f"an op name is a dotted identifier like 'nn.conv2d', got {self.op!r}")
            _OPS_SEEN.add(self.op)
        args = self.args if type(self.args) is tuple else tuple(self.args)
        for i, a in enumerate(args):
            if type(a) not in _OPERAND_TYPES:
                _check_expr(a, f"argument {i} of {self.op}")
        object.__setattr__(self, "args", args)
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", Attrs(self.attrs))
        check_type(self.type, f"the type of {self.op}")

    def _key(self) -> tuple:
        return (self.op, self.args, self.attrs, self.type)

    def _absorb(self, other: "Call") -> None:
        if other.span and other.span != self.span:
            # provenance only (not part of equality or the hash), so widening it is safe
            object.__setattr__(self, "span", tuple(dict.fromkeys(self.span + other.span)))

    def attr(self, name: str, default: Any = _UNSET) -> Any:
        """The attribute ``name``; ``default`` when absent (KeyError naming the op if none given)."""
        try:
            return self.attrs[name]
        except KeyError:
            if default is _UNSET:
                have = ", ".join(self.attrs) or "none"
                raise KeyError(f"{self.op} has no attribute {name!r} (it has: {have})") from None
            return default


@node
class Tuple(Expr):
    """A tuple of values: ``Tuple((a, b))``. Its type is known when every field's is."""

    fields: tuple

    def __post_init__(self):
        fields = tuple(self.fields)
        for i, f in enumerate(fields):
            _check_expr(f, f"tuple field {i}")
        object.__setattr__(self, "fields", fields)

    @property
    def type(self) -> Optional[TupleType]:
        types = [f.type for f in self.fields]
        return None if any(t is None for t in types) else TupleType(types)


@node
class TupleGetItem(Expr):
    """Field ``index`` of a tuple-valued expression: ``TupleGetItem(split, 0)``."""

    tuple: Expr
    index: int

    def __post_init__(self):
        _check_expr(self.tuple, "the tuple of TupleGetItem")
        idx = self.index
        if isinstance(idx, (bool, np.bool_)) or not isinstance(idx, (int, np.integer)) or idx < 0:
            raise TypeError(f"a TupleGetItem index must be an int >= 0, got {idx!r}")
        object.__setattr__(self, "index", int(idx))
        if isinstance(self.tuple, Tuple) and idx >= len(self.tuple.fields):
            raise IndexError(f"TupleGetItem index {idx} out of range for a tuple of {len(self.tuple.fields)}")

    @property
    def type(self) -> Optional[Type]:
        t = self.tuple.type
        if isinstance(t, TupleType) and self.index < len(t.fields):
            return t.fields[self.index]
        return None


# the operand kinds a Call takes (checked by type alone; anything else by _check_expr)
_OPERAND_TYPES = frozenset((Var, Constant, Call, Tuple, TupleGetItem))


@node
class Function(Expr):
    """``params`` (distinctly named Vars) bound in ``body``; ``ret_type`` optional.

    >>> x = Var("x", TensorType((4,), "float32"))
    >>> f = Function([x], Call("nn.relu", [x]))
    """

    params: tuple
    body: Expr
    ret_type: Optional[Type] = None

    def __post_init__(self):
        params = tuple(self.params)
        names = set()
        for i, p in enumerate(params):
            if not isinstance(p, Var):
                raise TypeError(f"function parameter {i} must be a Var, got {p!r}")
            if p.name in names:
                raise ValueError(f"two function parameters are named {p.name!r}")
            names.add(p.name)
        object.__setattr__(self, "params", params)
        _check_expr(self.body, "a function body")
        check_type(self.ret_type, "a function's ret_type")

    @property
    def type(self) -> Optional[FuncType]:
        types = [p.type for p in self.params]
        if self.ret_type is None or any(t is None for t in types):
            return None
        return FuncType(types, self.ret_type)


@node
class Module(Node):
    """Global names mapped to Functions; the entry point is ``main``.

    >>> f = Function([Var("x")], Var("x"))
    >>> mod = Module({"main": f})
    >>> mod.main is mod["main"], list(mod)
    (True, ['main'])

    Stored as ``(name, Function)`` pairs sorted by name, so equality ignores insertion order.
    """

    functions: tuple

    def __post_init__(self):
        src = self.functions
        items = list(src.items()) if isinstance(src, (Mapping, Module)) else list(src)
        seen = {}
        for name, fn in items:
            if not isinstance(name, str) or not _GLOBAL.match(name):
                raise ValueError(f"a global function name must be an identifier, got {name!r}")
            if name in seen:
                raise ValueError(f"module function {name!r} given twice")
            if not isinstance(fn, Function):
                raise TypeError(f"module member {name!r} must be a Function, got {type(fn).__name__}")
            seen[name] = fn
        object.__setattr__(self, "functions", tuple(sorted(seen.items())))
        object.__setattr__(self, "_index", seen)

    @classmethod
    def from_expr(cls, expr: Expr, ret_type: Optional[Type] = None) -> "Module":
        """A module whose ``main`` takes the free variables of ``expr`` (first-use order)."""
        from .visit import free_vars  # late: visit imports this module

        fn = expr if isinstance(expr, Function) else Function(free_vars(expr), expr, ret_type)
        return cls({"main": fn})

    @property
    def main(self) -> Function:
        return self["main"]

    def __getitem__(self, name: str) -> Function:
        try:
            return self.__dict__["_index"][name]
        except KeyError:
            raise KeyError(f"module has no function {name!r} (it has: {', '.join(self) or 'none'})") from None

    def get(self, name: str, default: Any = None) -> Any:
        return self.__dict__["_index"].get(name, default)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def __contains__(self, name: object) -> bool:
        return name in self.__dict__["_index"]

    def keys(self) -> list:
        return list(self)

    def items(self) -> tuple:
        return self.functions

    def with_function(self, name: str, fn: Function) -> "Module":
        """A copy with ``name`` added or replaced (modules are never mutated)."""
        return Module({**self.__dict__["_index"], name: fn})

    def __reduce__(self):
        return (Module, (self.functions,))

    def __str__(self) -> str:
        from .printer import astext

        return astext(self)

    __repr__ = __str__
