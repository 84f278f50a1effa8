"""Data types as plain strings: ``"float32"``, ``"int64"``, ``"bool"``; vectors as ``"float32x8"``.

Strings keep the IR printable and hashable with no extra machinery; the helpers here are the
only place that knows how to take them apart.
"""
from __future__ import annotations

import functools

import numpy as np

from ..errors import DTypeError

SCALAR_TYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
)
INDEX = "int64"  # every loop variable and index expression


@functools.lru_cache(maxsize=None)
def split(dtype: str) -> tuple[str, int]:
    """``"float32x8"`` -> ``("float32", 8)``; ``"int64"`` -> ``("int64", 1)``."""
    if dtype in SCALAR_TYPES:
        return dtype, 1
    base, sep, lanes = dtype.rpartition("x")
    if sep and base in SCALAR_TYPES and lanes.isdigit() and int(lanes) > 1:
        return base, int(lanes)
    raise DTypeError(f"unknown dtype {dtype!r}; known: {', '.join(SCALAR_TYPES)} (vectors: 'float32x8')")


def element(dtype: str) -> str:
    return split(dtype)[0]


def lanes(dtype: str) -> int:
    return split(dtype)[1]


@functools.lru_cache(maxsize=None)
def with_lanes(dtype: str, n: int) -> str:
    base = element(dtype)
    return base if n == 1 else f"{base}x{n}"


@functools.lru_cache(maxsize=None)
def is_float(dtype: str) -> bool:
    return element(dtype).startswith(("float", "bfloat"))


@functools.lru_cache(maxsize=None)
def is_int(dtype: str) -> bool:
    return element(dtype).startswith(("int", "uint"))


@functools.lru_cache(maxsize=None)
def is_uint(dtype: str) -> bool:
    return element(dtype).startswith("uint")


@functools.lru_cache(maxsize=None)
def is_bool(dtype: str) -> bool:
    return element(dtype) == "bool"


@functools.lru_cache(maxsize=None)  # (the simplifier asks per node: 142k calls for 11 kernels)
def bits(dtype: str) -> int:
    e = element(dtype)
    if e == "bool":
        return 1
    return int("".join(c for c in e if c.isdigit()))


@functools.lru_cache(maxsize=None)
def nbytes(dtype: str) -> int:
    """Bytes of one element as stored in memory (bool is one byte)."""
    return max(1, bits(dtype) // 8) * lanes(dtype)


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype that holds ``dtype`` in memory (bfloat16 through ml_dtypes)."""
    e = element(dtype)
    if e == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(e)


_FROM_NUMPY: dict = {}  # (numpy's dtype.name is slow, and a compile asks ~20k times)


def from_numpy(dt) -> str:
    try:
        return _FROM_NUMPY[dt]
    except (KeyError, TypeError):  # (TypeError: an unhashable dtype-like)
        pass
    d = np.dtype(dt)
    name = d.name
    if name not in SCALAR_TYPES:
        raise DTypeError(f"numpy dtype {d} has no Ember equivalent")
    try:
        _FROM_NUMPY[dt] = name
    except TypeError:
        pass
    return name


def check(dtype: str) -> str:
    split(dtype)
    return dtype
