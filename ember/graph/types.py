"""Types of graph-IR values: tensors (with possibly symbolic shapes), tuples and functions.

A dimension is an ``int`` or a symbolic :class:`Dim`, so a dynamic batch is an ordinary type::

    >>> str(TensorType((Dim("batch"), 3, 224, 224), "float32"))
    'Tensor[(batch, 3, 224, 224), float32]'

dtypes are the loop IR's strings (:mod:`ember.loop.dtype`): ``"float32"``, ``"int64"``, ...
Types are immutable, compare structurally and hash cheaply (cached), like every IR node.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional, Union

import numpy as np

from ..errors import DTypeError, ShapeError
from ..loop import dtype as dt
from ..loop.expr import Expr as _Expr
from ..loop.expr import IntImm as _IntImm
from ..loop.expr import Var as _Var
from ..loop.node import Node, node

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def quote_name(name: str) -> str:
    """``batch`` stays bare; a name that is not an identifier is quoted (ONNX allows any text)."""
    return name if _BARE.match(name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


@node
class Dim(Node):
    """A symbolic dimension: an integer expression over named sizes.

    ``Dim("batch")`` is the unknown size ``batch``; dims with the same name are the same size.
    Arithmetic on dims (:mod:`ember.graph.ops.dims`) gives expressions such as ``12*batch`` or
    ``(h-1)//2+1``, kept in one canonical form so that equal computations give equal dims. The
    expression is the loop IR's (``int64`` over :class:`~ember.loop.expr.Var` s), so a kernel
    takes the very same expression as its extent, and the runtime evaluates it per run.

    >>> Dim("batch") == Dim("batch"), str(Dim("batch"))
    (True, 'batch')
    """

    expr: object  # an int64 loop-IR Expr over symbol Vars; a str names a symbol

    def __post_init__(self):
        e = self.expr
        if isinstance(e, str):
            if not e:
                raise TypeError("a Dim's name must be a non-empty string")
            e = _Var(e)
        elif not isinstance(e, _Expr) or isinstance(e, _IntImm) or e.dtype != "int64":
            raise TypeError(f"a Dim is a symbol name or a non-constant int64 expression, got {e!r}")
        object.__setattr__(self, "expr", e)

    @property
    def name(self) -> str:
        """The expression's text (a symbol's name for a plain symbol)."""
        return dim_text(self.expr)

    def as_expr(self):
        """The int64 expression (so a Dim can stand wherever the loop IR takes an index)."""
        return self.expr

    @property
    def is_symbol(self) -> bool:
        """True for a plain named size (not an expression)."""
        return isinstance(self.expr, _Var)

    @property
    def symbols(self) -> tuple:
        """The names of the symbols the dim depends on, sorted."""
        from ..loop.visit import walk

        return tuple(sorted({n.name for n in walk(self.expr) if isinstance(n, _Var)}))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Dim({self.expr.name!r})" if self.is_symbol else f"Dim.parse({self.name!r})"

    @staticmethod
    def parse(text: str):
        """The dim (or int) written as ``text`` in the form ``str`` gives: ``Dim.parse("12*n")``."""
        from .ops.dims import parse_dim

        return parse_dim(text)


_BIN_TEXT = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "FloorMod": "%"}
_PREC = {"Add": 1, "Sub": 1, "Mul": 2, "FloorDiv": 2, "FloorMod": 2}


def dim_text(e, prec: int = 0) -> str:
    """Compact text of a dim expression: ``12*n``, ``(h-1)//2+1``, ``max(m,n)``; symbols that
    are not identifiers are quoted."""
    t = type(e).__name__
    if isinstance(e, _IntImm):
        return str(e.value) if e.value >= 0 or prec == 0 else f"({e.value})"
    if isinstance(e, _Var):
        return quote_name(e.name)
    if t in ("Min", "Max"):
        return f"{t.lower()}({dim_text(e.a)},{dim_text(e.b)})"
    if t in _BIN_TEXT:
        p = _PREC[t]
        a, b = e.a, e.b
        if t == "Mul" and isinstance(b, _IntImm) and not isinstance(a, _IntImm):
            a, b = b, a  # the coefficient first: 12*n
        if t == "Add" and isinstance(b, _IntImm) and b.value < 0:
            return _wrap(f"{dim_text(a, p)}-{-b.value}", p, prec)
        text = f"{dim_text(a, p)}{_BIN_TEXT[t]}{dim_text(b, p + 1)}"
        return _wrap(text, p, prec)
    return f"<{t}>"


def _wrap(text: str, p: int, prec: int) -> str:
    return f"({text})" if p < prec else text


DimLike = Union[int, Dim, str]


def as_dim(d: DimLike) -> Union[int, Dim]:
    """An int (numpy ints included) or a Dim; a string names a Dim: ``as_dim("batch") == Dim("batch")``."""
    if isinstance(d, Dim):
        return d
    if isinstance(d, str):
        return Dim(d)
    # bool is an int subclass, but a shape of (True, 3) is always a bug
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
        raise ShapeError(f"a dimension must be an int or a Dim, got {d!r} ({type(d).__name__})")
    if d < 0:
        raise ShapeError(f"a dimension must be >= 0, got {int(d)} (use a Dim for an unknown size)")
    return int(d)


_SCALAR_DTYPES: set = set()  # the dtype strings a TensorType has checked


class Type(Node):
    """Base of graph-IR types. ``repr`` is the readable text form."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


@node
class TensorType(Type):
    """A tensor of ``shape`` (ints and :class:`Dim`) and ``dtype`` (a scalar dtype string).

    >>> t = TensorType(("batch", 1000), "float32")   # strings become Dims
    >>> t.shape, t.ndim, t.is_static
    ((Dim('batch'), 1000), 2, False)
    """

    shape: tuple
    dtype: str

    def __post_init__(self):
        if isinstance(self.shape, (str, bytes)) or not isinstance(self.shape, Iterable):
            raise ShapeError(f"a tensor shape must be a sequence of dimensions, got {self.shape!r}")
        shape = self.shape
        # (the common case, a tuple of plain ints, checked without a call per dimension: a
        # compile builds tens of thousands of types)
        static = type(shape) is tuple and all(type(d) is int for d in shape) and (not shape or min(shape) >= 0)
        if not static:
            shape = tuple(as_dim(d) for d in shape)
            static = all(isinstance(d, int) for d in shape)
            object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "_static", static)
        if type(self.dtype) is not str or self.dtype not in _SCALAR_DTYPES:
            if not isinstance(self.dtype, str) or dt.lanes(dt.check(self.dtype)) != 1:
                raise DTypeError(f"a tensor's dtype must be a scalar dtype string, got {self.dtype!r}")
            _SCALAR_DTYPES.add(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when every dimension is a known int."""
        return self.__dict__["_static"]

    def __str__(self) -> str:
        return f"Tensor[{_tuple_str(self.shape)}, {self.dtype}]"


@node
class TupleType(Type):
    """The type of a tuple of values. ``str``: ``(Tensor[(2,), float32], Tensor[(), int64])``."""

    fields: tuple

    def __post_init__(self):
        fields = tuple(self.fields)
        for i, f in enumerate(fields):
            if not isinstance(f, Type):
                raise TypeError(f"TupleType field {i} must be a Type, got {f!r}")
        object.__setattr__(self, "fields", fields)

    def __str__(self) -> str:
        return _tuple_str(self.fields)


@node
class FuncType(Type):
    """The type of a function: parameter types and the result type."""

    params: tuple
    ret: Type

    def __post_init__(self):
        params = tuple(self.params)
        for i, p in enumerate(params):
            if not isinstance(p, Type):
                raise TypeError(f"FuncType parameter {i} must be a Type, got {p!r}")
        if not isinstance(self.ret, Type):
            raise TypeError(f"FuncType result must be a Type, got {self.ret!r}")
        object.__setattr__(self, "params", params)

    def __str__(self) -> str:
        return "fn(" + ", ".join(str(p) for p in self.params) + f") -> {self.ret}"


def _tuple_str(items) -> str:
    """Python's tuple spelling: ``()``, ``(3,)``, ``(1, 2)``."""
    parts = [str(x) for x in items]
    return f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def check_type(t: Optional[Type], what: str) -> Optional[Type]:
    """``t`` if it is a Type or None; a TypeError naming ``what`` otherwise."""
    if t is not None and not isinstance(t, Type):
        raise TypeError(f"{what} must be a graph Type or None, got {t!r} ({type(t).__name__})")
    return t
