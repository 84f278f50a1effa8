"""Operator attributes: an immutable, hashable, sorted mapping with normalized values.

Values are normalized once, so that equal attributes compare and print the same however a
frontend spelled them: lists become tuples, numpy scalars and arrays become Python values::

    >>> a = Attrs({"strides": [np.int64(2), 2], "layout": "NCHW"})
    >>> a["strides"], list(a), format_value(a["layout"])
    ((2, 2), ['layout', 'strides'], "'NCHW'")

Equality is exact and typed: ``1``, ``1.0`` and ``True`` are different attribute values (Python
itself says ``1 == 1.0 == True``), and floats compare by their bits, so ``nan`` equals itself.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Iterable, Union

import numpy as np

from .types import Dim, Type

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_UNSET = object()


def normalize(value: Any, key: str = "?") -> Any:
    """The canonical form of an attribute value: None, bool, int, float, str, Dim, Type, or a
    (nested) tuple of those. ``normalize([np.int64(1), [2.0]]) == (1, (2.0,))``."""
    if value is None or isinstance(value, (bool, str, Dim, Type)):
        return value
    if isinstance(value, np.generic):  # numpy scalars -> the Python value of the same kind
        return normalize(value.item(), key)
    if isinstance(value, int):  # int subclasses (IntEnum) lose their class: it does not print
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, np.ndarray):
        return normalize(value.tolist(), key)
    if isinstance(value, (list, tuple)):
        return tuple(normalize(v, key) for v in value)
    raise TypeError(f"attribute {key!r}: unsupported value {value!r} ({type(value).__name__}); "
                    "attribute values are None, bool, int, float, str, Dim, Type or tuples of them")


def typed_key(value: Any) -> Any:
    """A hashable key under which two values are equal only if they are the same kind and value."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, float):
        return ("f", repr(value))  # bit-exact enough: -0.0 != 0.0, nan == nan
    if isinstance(value, tuple):
        return ("t",) + tuple(typed_key(v) for v in value)
    return value  # None, str, Dim and Type compare exactly by themselves


def format_value(value: Any) -> str:
    """The text form of a normalized value: ``(2, 2)``, ``'NCHW'``, ``batch``, ``(1,)``."""
    if isinstance(value, tuple):
        parts = [format_value(v) for v in value]
        return f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"
    if isinstance(value, (Dim, Type)):
        return str(value)
    return repr(value)


class Attrs(Mapping):
    """A frozen mapping of attribute names to normalized values, sorted by name.

    >>> Attrs(axis=1) == Attrs([("axis", 1)]) == {"axis": 1}
    True
    """

    __slots__ = ("_items", "_dict", "_key", "_hash")

    def __init__(self, items: Union[Mapping, Iterable[tuple], None] = None, **kwargs: Any):
        if isinstance(items, Attrs) and not kwargs:
            pairs = items._items
        else:
            seen: dict[str, Any] = {}
            source = items.items() if isinstance(items, Mapping) else (items or ())
            for k, v in list(source) + list(kwargs.items()):
                if not isinstance(k, str) or not _KEY.match(k):
                    raise ValueError(f"attribute names must be identifiers, got {k!r}")
                if k in seen:
                    raise ValueError(f"attribute {k!r} given twice")
                seen[k] = normalize(v, k)
            pairs = tuple(sorted(seen.items()))
        set_ = object.__setattr__
        set_(self, "_items", pairs)
        set_(self, "_dict", dict(pairs))
        set_(self, "_key", tuple((k, typed_key(v)) for k, v in pairs))
        set_(self, "_hash", hash(self._key))

    @property
    def pairs(self) -> tuple:
        """The ``(name, value)`` pairs, sorted by name."""
        return self._items

    def __getitem__(self, key: str) -> Any:
        return self._dict[key]

    def __iter__(self):
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._dict

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._hash == other._hash and self._key == other._key
        if isinstance(other, Mapping):
            try:
                return self == Attrs(other)
            except (TypeError, ValueError):
                return False
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return self._hash

    def __setattr__(self, name, value):
        raise AttributeError("Attrs are immutable; build a new Attrs instead")

    def __reduce__(self):
        return (Attrs, (self._items,))

    def __repr__(self) -> str:
        return "Attrs(" + ", ".join(f"{k}={format_value(v)}" for k, v in self._items) + ")"
