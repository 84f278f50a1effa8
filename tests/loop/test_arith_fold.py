"""Constant folding of the simplifier against the machine (numpy, wraparound, rounding)."""
from __future__ import annotations

import math
import os

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.loop import (Add, Div, EQ, FloatImm, FloorDiv, FloorMod, IntImm, LT, Max, Min, Mod, Mul, Not, Sub, Var, const)
from ember.loop.arith import simplify
from ember.loop.expr import BitAnd, BitOr, BitXor, Shl, Shr

# ARITH_EXAMPLES=5000 runs a much longer search (the default keeps the suite fast).
EXAMPLES = int(os.environ.get("ARITH_EXAMPLES", "150"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

X, Y, Z = Var("x"), Var("y"), Var("z")
VARS = (X, Y, Z)
from arith_reference import CMPS, _OPS, _tdiv, _wrap  # noqa: E402


# --- constant folding ------------------------------------------------------------------------

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
INT_OPS = [Add, Sub, Mul, FloorDiv, FloorMod, Div, Mod, Min, Max, BitAnd, BitOr, BitXor, Shl, Shr]


def _ref_int(op, a, b, dtype):
    bits = int("".join(c for c in dtype if c.isdigit()))
    lo = 0 if dtype.startswith("u") else -(1 << (bits - 1))
    hi = lo + (1 << bits) - 1
    if op in (FloorDiv, FloorMod, Div, Mod):
        if b == 0:
            return None
        q = a // b if op in (FloorDiv, FloorMod) else _tdiv(a, b)
        if not lo <= q <= hi:
            return None
        return _wrap(q if op in (FloorDiv, Div) else a - b * q, dtype)
    if op in (Shl, Shr):
        if not 0 <= b < bits:
            return None
        return _wrap(a << b, dtype) if op is Shl else a >> b
    f = {BitAnd: lambda x, y: x & y, BitOr: lambda x, y: x | y, BitXor: lambda x, y: x ^ y}.get(op) or _OPS[op]
    return _wrap(f(a, b), dtype)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(INT_TYPES), st.sampled_from(INT_OPS), st.data())
def test_int_constant_folding_matches_machine(dtype, op, data):
    bits = int("".join(c for c in dtype if c.isdigit()))
    lo = 0 if dtype.startswith("u") else -(1 << (bits - 1))
    hi = lo + (1 << bits) - 1
    vals = st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, 1, -1 if lo < 0 else 2]))
    a, b = data.draw(vals), data.draw(vals)
    got = simplify(op(IntImm(a, dtype), IntImm(b, dtype)))
    want = _ref_int(op, a, b, dtype)
    if want is None:
        assert not isinstance(got, IntImm)  # undefined-ish cases are left to the machine
    else:
        assert got == IntImm(want, dtype)
    if op in (Add, Sub, Mul, BitAnd, BitOr, BitXor, Min, Max):  # numpy wraps the same way
        npf = {Add: np.add, Sub: np.subtract, Mul: np.multiply, BitAnd: np.bitwise_and,
               BitOr: np.bitwise_or, BitXor: np.bitwise_xor, Min: np.minimum, Max: np.maximum}[op]
        with np.errstate(all="ignore"):
            assert int(npf(np.array(a, dtype), np.array(b, dtype))) == got.value


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(INT_TYPES), st.sampled_from(CMPS), st.data())
def test_int_comparison_folding(dtype, op, data):
    bits = int("".join(c for c in dtype if c.isdigit()))
    lo = 0 if dtype.startswith("u") else -(1 << (bits - 1))
    a, b = data.draw(st.integers(lo, lo + (1 << bits) - 1)), data.draw(st.integers(lo, lo + (1 << bits) - 1))
    assert simplify(op(IntImm(a, dtype), IntImm(b, dtype))) == const(_OPS[op](a, b))


FLOAT_OPS = {Add: np.add, Sub: np.subtract, Mul: np.multiply, Div: np.divide}


def _np_float(dtype):
    return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype).type


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["float32", "float16", "bfloat16", "float64"]), st.sampled_from(list(FLOAT_OPS)),
       st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True, allow_infinity=True))
def test_float_constant_folding_matches_numpy(dtype, op, a, b):
    got = simplify(op(FloatImm(a, dtype), FloatImm(b, dtype)))
    t = _np_float(dtype)
    with np.errstate(all="ignore"):  # overflow to inf, as on the machine
        x, y = np.array(a, dtype=t)[()], np.array(b, dtype=t)[()]
        if dtype in ("float16", "bfloat16"):  # the machine computes these in float32 per operation
            want = np.array(FLOAT_OPS[op](np.float32(x), np.float32(y))).astype(t)[()]
        else:
            want = FLOAT_OPS[op](x, y)
    if isinstance(got, FloatImm):
        assert got.type == dtype
        w = float(want)
        assert not math.isnan(w)
        assert got.value == w and math.copysign(1, got.value) == math.copysign(1, w), (a, b, got, want)
    else:
        # Only NaN, division by zero and subnormals are left unfolded.
        w = float(want)
        assert (math.isnan(w) or float(y) == 0 and op is Div or math.isnan(float(x)) or math.isnan(float(y))
                or any(v != 0 and abs(v) < np.finfo(np.float32).tiny * (2 ** 100 if dtype == "float64" else 1)
                       for v in (float(x), float(y), w))
                or dtype == "float16" and any(v != 0 and abs(v) < 2 ** -14 for v in (float(x), float(y), w)))


@settings(max_examples=100, deadline=None)
@given(st.floats(width=32, allow_nan=False), st.floats(width=32, allow_nan=False), st.sampled_from(CMPS))
def test_float_comparisons_fold(a, b, op):
    got = simplify(op(FloatImm(a), FloatImm(b)))
    if isinstance(got, IntImm):
        assert got == const(bool(_OPS[op](np.float32(a), np.float32(b))))
    else:  # subnormals may be flushed to zero by the machine: not folded
        assert any(v != 0 and abs(v) < np.finfo(np.float32).tiny for v in (a, b))


def test_float_rounding_and_identities():
    assert simplify(FloatImm(0.1) + FloatImm(0.2)) == FloatImm(float(np.float32(0.1) + np.float32(0.2)))
    assert simplify(FloatImm(0.1, "float64") + FloatImm(0.2, "float64")) == FloatImm(0.1 + 0.2, "float64")
    assert simplify(FloatImm(2048.0, "float16") + FloatImm(1.0, "float16")) == FloatImm(2048.0, "float16")
    assert isinstance(simplify(FloatImm(1.0) / FloatImm(0.0)), Div)  # division by zero: not folded
    assert isinstance(simplify(FloatImm(float("inf")) - FloatImm(float("inf"))), Sub)  # NaN
    assert isinstance(simplify(Min(FloatImm(-0.0), FloatImm(0.0))), Min)
    f = Var("f", "float32")
    assert simplify(f * FloatImm(1.0)) == f
    assert simplify(f / FloatImm(1.0)) == f
    assert simplify(f - FloatImm(0.0)) == f
    assert simplify(f + FloatImm(-0.0)) == f
    assert simplify(f + FloatImm(0.0)) != f  # -0.0 + 0.0 is +0.0
    assert simplify(f * FloatImm(0.0)) != FloatImm(0.0)  # nan * 0, inf * 0
    assert simplify(f - f) != FloatImm(0.0)
    assert simplify(EQ(f, f)) != const(True)  # NaN != NaN
    assert simplify(Not(LT(f, FloatImm(1.0)))) == Not(LT(f, FloatImm(1.0)))  # not GE: NaN


@SETTINGS
@given(st.sampled_from(["floor", "ceil", "trunc", "round"]), st.sampled_from(["float32", "float64"]),
       st.floats(allow_nan=False, allow_infinity=False, width=32) | st.sampled_from([0.5, -0.5, 2.5, -0.25, -0.0]))
def test_rounding_intrinsics_fold_as_numpy_rounds(name, dtype, v):
    """floor, ceil, trunc and round (half to even) of a constant fold to numpy's value, the sign
    of a zero result included (ceil(-0.25) is -0.0) -- a nearest resize's taps fold to indices."""
    from ember.loop import intrinsics as intr

    x = FloatImm(float(np.dtype(dtype).type(v)), dtype)
    got = simplify(getattr(intr, name)(x))
    want = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.round}[name](np.dtype(dtype).type(v))
    assert isinstance(got, FloatImm) and got.type == dtype
    assert got.value == want and math.copysign(1, got.value) == math.copysign(1, want)
