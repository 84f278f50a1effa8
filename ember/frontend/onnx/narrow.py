"""Conversions of the narrow types (float8, float4, int4, int2 and their kin) that Ember stores
as bytes (see :data:`.dtypes.NARROW`): built from elementwise ops and gathers from tables,
made at import time from ml_dtypes' own conversions, so every rounding rule and special value
is ml_dtypes' (and so the ONNX reference's) by construction.

- **Decode** (narrow -> any type): a 256-entry table of the target type indexed by the byte.
- **Encode** from a float (float8, float4, e8m0): the reference conversion is a step function
  of the magnitude; its steps (found once per type and mode by bisection over float32 bit
  patterns) become a sorted table of boundaries, and a branchless binary search over it (one
  gather and one compare per level) finds the code. Negative values use a table of their own
  (the fnuz types have no negative zero), NaN a code of its own.
- **Encode** to int4/uint4/int2/uint2: truncate toward zero and keep the low bits (what the
  reference's astype does), NaN and infinity giving 0; a float out of the type's range gives
  its low bits or 0, as the installed ml_dtypes does (0 from its 0.7 on).
"""
from __future__ import annotations

import functools

import numpy as np

from ...errors import UnsupportedOpError
from ...graph import Constant

INTS = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2}
_INF_BITS = 0x7F800000


def _type(name: str):
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name))


@functools.lru_cache(maxsize=None)
def decode_table(name: str, target: str) -> np.ndarray:
    """The value of each byte of type ``name`` as ``target`` (a numpy dtype name)."""
    from ...loop import dtype as dt

    with np.errstate(invalid="ignore", over="ignore"):
        return np.arange(256, dtype=np.uint8).view(_type(name)).astype(dt.numpy_dtype(target))


def _reference(name: str, saturate: bool, round_mode: str):
    """The ONNX reference's cast of float32 values to ``name``, as bytes."""
    import onnx.numpy_helper as nh

    t = _type(name)

    def f(x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            if name.startswith("float8_e8m0"):
                y = nh.to_float8e8m0(x, saturate, round_mode).astype(t)
            elif name.startswith("float8") and saturate:
                y = nh.saturate_cast(x, t)
            else:
                y = x.astype(t)
        return np.asarray(y).view(np.uint8)
    return f


def _steps(f, sign: float) -> tuple:
    """``(boundaries, codes)``: f(sign * m) for magnitudes m in [0, inf] is codes[k] for m in
    [boundaries[k-1], boundaries[k]) (a step function: bisection finds each step)."""
    def code(p: int) -> int:
        return int(f(np.array([sign * np.array(p, np.uint32).view(np.float32)], np.float32))[0])

    bounds, codes = [], [code(0)]
    lo = 0
    while code(_INF_BITS) != codes[-1]:
        hi = _INF_BITS  # the first pattern past lo whose code differs
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if code(mid) == codes[-1]:
                lo = mid
            else:
                hi = mid
        bounds.append(np.array(hi, np.uint32).view(np.float32))
        codes.append(code(hi))
        lo = hi
        if len(codes) > 600:  # (a conversion that is not a step function of the magnitude)
            raise UnsupportedOpError(f"cannot tabulate the conversion to {f}")
    return np.array(bounds, np.float32), np.array(codes, np.uint8)


@functools.lru_cache(maxsize=None)
def encode_tables(name: str, saturate: bool, round_mode: str = "up") -> tuple:
    """(positive boundaries, codes, negative boundaries, codes, NaN's code)."""
    f = _reference(name, saturate, round_mode)
    pos, neg = _steps(f, 1.0), _steps(f, -1.0)
    nan = int(f(np.array([np.nan], np.float32))[0])
    return pos + neg + (nan,)


def _i32(v) -> Constant:
    return Constant(np.asarray(v, np.int32))


def _search(node, m, bounds: np.ndarray, codes: np.ndarray):
    """``codes[number of bounds <= m]`` by a branchless binary search (m: float32)."""
    n = len(bounds)
    size = 1
    while size < n + 1:
        size *= 2
    padded = np.full(size, np.nan, np.float32)  # NaN <= m is false: the padding is never taken
    padded[:n] = bounds
    table = Constant(padded)
    pos = node.call("cast", node.call("less", m, m), dtype="int32")  # zeros like m (NaN and inf too)
    step = size // 2
    while step:
        probe = node.call("add", pos, _i32(step))
        at = node.call("gather", table, node.call("subtract", probe, _i32(1)), axis=0)
        pos = node.call("where", node.call("less_equal", at, m), probe, pos)
        step //= 2
    return node.call("gather", Constant(codes), pos, axis=0)


def decode(node, x, name: str, target: str):
    """The narrow-type bytes ``x`` as ``target``."""
    return node.call("gather", Constant(decode_table(name, target)), node.call("cast", x, dtype="int32"), axis=0)


def _int_range(name: str) -> tuple:
    bits = INTS[name]
    return (0, (1 << bits) - 1) if name.startswith("u") else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


@functools.lru_cache(maxsize=None)
def _floats_out_of_range_zero(name: str) -> bool:
    """Whether the installed ml_dtypes (and so the ONNX reference) converts a float outside the
    integer type ``name``'s range to 0 (ml_dtypes 0.7 on) rather than to its truncation's low
    bits (before): ONNX leaves it undefined, Ember answers as the reference does. Probed with
    ``max + 2``, whose low bits are not 0 in any of the four types."""
    hi = _int_range(name)[1]
    with np.errstate(invalid="ignore"):
        code = int(np.array([hi + 2], np.float32).astype(_type(name)).view(np.uint8)[0])
    return code == 0


def encode(node, x, name: str, saturate: bool = True, round_mode: str = "up"):
    """``x`` (any float or integer type) converted to the narrow type ``name``, as its bytes."""
    src = x.type.dtype
    if name in INTS:
        mask = Constant(np.int64((1 << INTS[name]) - 1))
        if src.startswith(("float", "bfloat")):
            xf = x if src == "float64" else node.call("cast", x, dtype="float64")
            finite = node.call("logical_not", node.call("logical_or", node.call("isnan", xf), node.call("isinf", xf)))
            big = Constant(np.float64(2.0 ** 62))
            xf = node.call("where", finite, node.call("minimum", node.call("maximum", xf, node.call("negative", big)),
                                                      big), Constant(np.float64(0)))
            x = xf
        t = node.call("cast", x, dtype="int64")  # (a float truncates toward zero)
        if src.startswith(("float", "bfloat")) and _floats_out_of_range_zero(name):
            lo, hi = _int_range(name)
            inside = node.call("logical_and", node.call("greater_equal", t, Constant(np.int64(lo))),
                               node.call("less_equal", t, Constant(np.int64(hi))))
            t = node.call("where", inside, t, Constant(np.int64(0)))
        return node.call("cast", node.call("bitwise_and", t, mask), dtype="uint8")
    if src == "float64":
        raise UnsupportedOpError(f"a cast of float64 to {name} is not supported (cast to float32 first)")
    xf = x if src == "float32" else node.call("cast", x, dtype="float32")
    pb, pc, nb, nc, nan = encode_tables(name, bool(saturate), round_mode)
    m = node.call("abs", xf)
    zero = Constant(np.float32(0))
    # negative: below zero, or a negative zero (1 / -0 is -inf)
    negative = node.call("logical_or", node.call("less", xf, zero),
                         node.call("less", node.call("divide", Constant(np.float32(1)), xf), zero))
    code = node.call("where", negative, _search(node, m, nb, nc), _search(node, m, pb, pc))
    return node.call("where", node.call("isnan", xf), Constant(np.uint8(nan)), code)


__all__ = ["decode", "decode_table", "encode", "encode_tables"]
