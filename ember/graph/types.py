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
from ..loop.node import Node, node

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def quote_name(name: str) -> str:
    """``batch`` stays bare; a name that is not an identifier is quoted (ONNX allows any text)."""
    return name if _BARE.match(name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


@node
class Dim(Node):
    """A symbolic dimension. Dims with the same name are the same (unknown) size.

    >>> Dim("batch") == Dim("batch"), str(Dim("batch"))
    (True, 'batch')
    """

    name: str

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"a Dim's name must be a non-empty string, got {self.name!r}")

    def __str__(self) -> str:
        return quote_name(self.name)

    def __repr__(self) -> str:
        return f"Dim({self.name!r})"


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
        object.__setattr__(self, "shape", tuple(as_dim(d) for d in self.shape))
        if not isinstance(self.dtype, str) or dt.lanes(dt.check(self.dtype)) != 1:
            raise DTypeError(f"a tensor's dtype must be a scalar dtype string, got {self.dtype!r}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when every dimension is a known int."""
        return all(isinstance(d, int) for d in self.shape)

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
