"""The base of every loop-IR node: an immutable value with structural equality.

Nodes are frozen dataclasses. Two nodes are equal when their classes and fields are equal, all
the way down; the hash is computed once and cached, so nodes can key dictionaries cheaply.
"""
from __future__ import annotations

import dataclasses
import operator

_FIELD_NAMES: dict = {}
_KEYS: dict = {}  # node class -> a function of a node giving its fields' values as a tuple


def field_names(cls) -> tuple:
    """The dataclass field names of node class ``cls``, cached (``dataclasses.fields`` builds
    its answer anew on every call, and equality, hashing and every traversal ask for them)."""
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
        return names


class Node:
    """Immutable IR node. Subclasses are ``@dataclasses.dataclass(frozen=True, eq=False)``."""

    __slots__ = ()

    def _key(self) -> tuple:
        return field_values(self)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(self) is not type(other):
            return False
        if hash(self) != hash(other):
            return False
        return self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        try:
            return self.__dict__["_hash"]
        except KeyError:
            h = hash((type(self).__name__, self._key()))
            object.__setattr__(self, "_hash", h)
            return h

    def __reduce__(self):
        # rebuilt through the constructor: the default would restore the cached hash before the
        # fields it hashes (a node inside a dict key of its own state then breaks unpickling)
        return (type(self), self._key())

    def replace(self, **changes):
        """A copy with some fields changed (nodes are never mutated)."""
        # (dataclasses.replace asks for the fields anew each call: ~3x this, on ~10k calls a compile)
        cls = type(self)
        names = field_names(cls)
        for k in changes:
            if k not in names:
                raise TypeError(f"{cls.__name__} has no field {k!r}")
        return cls(**{**dict(zip(names, field_values(self))), **changes})

    def __repr__(self) -> str:
        try:
            from .printer import expr_to_str, stmt_to_str  # late: the printer imports the IR
            from .stmt import Stmt

            if isinstance(self, Stmt):
                return stmt_to_str(self).rstrip()
            return expr_to_str(self)
        except Exception:  # printing must never hide the real error
            fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self))
            return f"{type(self).__name__}({fields})"


def field_values(n: "Node") -> tuple:
    """The values of node ``n``'s fields, in order."""
    try:
        return _KEYS[type(n)](n)
    except KeyError:
        return _key_of(type(n))(n)


def _key_of(cls):
    """``cls``'s field getter (``operator.attrgetter``, in C: equality and hashing ask for
    fields hundreds of thousands of times in a model's build), always giving a tuple."""
    names = field_names(cls)
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        get = lambda n: (one(n),)  # noqa: E731
    elif names:
        get = operator.attrgetter(*names)
    else:
        get = lambda n: ()  # noqa: E731
    _KEYS[cls] = get
    return get


def node(cls):
    """Decorator: make ``cls`` a frozen dataclass node with structural equality."""
    return dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)
