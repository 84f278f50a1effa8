"""A float division by a divisor the same in every lane runs as a multiplication by its
reciprocal with one Markstein correction (``ember.codegen.llvm.ops.divide_by_uniform``): it must
round exactly as numpy's division, for constant and run-time divisors, at quantization ties,
for tiny and huge values, and for divisors the reciprocal cannot serve."""
import numpy as np
import pytest

import ember
from ember.loop import compute as te
from ember.loop.schedule import Schedule

RNG = np.random.default_rng(23)
N = 2048
DIVISORS = [0.3, 0.0123, 3.0, 1 / 3, 0.1, 255.0, 1e-30, 3e30, -0.7, 0.25, 6.1e-05]


def _values(c) -> np.ndarray:
    x = (RNG.standard_normal(N) * 10.0 ** RNG.uniform(-5, 5, N)).astype(np.float32)
    with np.errstate(over="ignore"):
        x[:500] = ((RNG.integers(-300, 300, 500) + 0.5) * np.float32(c)).astype(np.float32)  # (ties)
    x[500:511] = [np.inf, -np.inf, np.nan, 0, -0.0, 3.4e38, -3.4e38, 1e-45, 1.17e-38, 5.0, 1e-33]
    x[600:700] *= np.float32(1e-33)  # (below 2^-100: the division's branch)
    return x


def _build(divisor):
    A = te.placeholder((N,), "float32", "A")
    if divisor is None:
        C = te.placeholder((), "float32", "C")
        B = te.compute((N,), lambda i: A[i] / C[()], "B")
        args = [A, C, B]
    else:
        B = te.compute((N,), lambda i: A[i] / np.float32(divisor), "B")
        args = [A, B]
    s = Schedule(B)
    s[B].vectorize(s[B].split(s[B].leaf[0], factor=16)[1])
    return ember.build(s, args, "k")


def _same(out, ref):
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(out[~np.isnan(ref)], ref[~np.isnan(ref)])
    # (zeros too: their signs, which the correction step alone would lose)
    np.testing.assert_array_equal(np.signbit(out[~np.isnan(ref)]), np.signbit(ref[~np.isnan(ref)]))


@pytest.mark.parametrize("c", DIVISORS)
def test_a_constant_divisor_rounds_as_the_division(c):
    m = _build(c)
    x = _values(c)
    out = np.zeros(N, np.float32)
    m["k"](x, out)
    with np.errstate(all="ignore"):
        _same(out, x / np.float32(c))


def test_a_run_time_divisor_rounds_as_the_division():
    m = _build(None)
    for c in DIVISORS + [0.0, -0.0, np.inf, np.nan, 1e-40, 3e38]:
        x = _values(c)
        out = np.zeros(N, np.float32)
        m["k"](x, np.array(c, np.float32), out)
        with np.errstate(all="ignore"):
            _same(out, x / np.float32(c))


@pytest.mark.parametrize("c", DIVISORS)
def test_a_rounded_quotient_rounds_as_the_division(c):
    """``round(a / c)`` (a quantizer's) rounds as numpy's, at halves, small values and zeros
    (which take no branch) included."""
    from ember.loop.intrinsics import round as round_

    A = te.placeholder((N,), "float32", "A")
    B = te.compute((N,), lambda i: round_(A[i] / np.float32(c)), "B")
    s = Schedule(B)
    s[B].vectorize(s[B].split(s[B].leaf[0], factor=16)[1])
    m = ember.build(s, [A, B], "k")
    x = _values(c)
    x[600:620] = np.float32(c) * (np.arange(20, dtype=np.float32) + np.float32(0.5))  # (halves: ties)
    x[620:630] = np.float32(1e-35) * np.arange(10, dtype=np.float32)  # (small, nonzero)
    out = np.zeros(N, np.float32)
    m["k"](x, out)
    with np.errstate(all="ignore"):
        _same(out, np.round(x / np.float32(c)))


def test_a_rounded_quotient_by_a_run_time_divisor_rounds_as_the_division():
    """The same with the scale a run-time scalar: one below 2^-60, zero, subnormal, infinite or
    NaN takes the division."""
    from ember.loop.intrinsics import round as round_

    A, C = te.placeholder((N,), "float32", "A"), te.placeholder((), "float32", "C")
    B = te.compute((N,), lambda i: round_(A[i] / C[()]), "B")
    s = Schedule(B)
    s[B].vectorize(s[B].split(s[B].leaf[0], factor=16)[1])
    m = ember.build(s, [A, C, B], "k")
    for c in DIVISORS + [2.0 ** -61, 2.0 ** -59, 0.0, -0.0, np.inf, np.nan, 1e-40, 3e38]:
        x = _values(c)
        x[620:630] = np.float32(1e-35) * np.arange(10, dtype=np.float32)  # (small, nonzero)
        out = np.zeros(N, np.float32)
        m["k"](x, np.array(c, np.float32), out)
        with np.errstate(all="ignore"):
            _same(out, np.round(x / np.float32(c)))
