"""Tensor computations through the whole pipeline: every intrinsic and dtype against numpy."""
import numpy as np
import pytest

import ember
from ember.errors import DTypeError, LoweringError, ShapeError
from ember.loop import compute as te
from ember.loop import intrinsics as intr
from ember.loop.expr import cast, select
from ember.loop.schedule import Schedule

RNG = np.random.default_rng(2)
N = 37  # not a multiple of any vector width


def _build_unary(fn, in_dtype, out_dtype=None, vectorize=True):
    A = te.placeholder((N,), in_dtype, "A")
    B = te.compute((N,), lambda i: fn(A[i]), "B")
    s = Schedule(B)
    if vectorize:
        o, i = s[B].split(s[B].leaf[0], factor=8)
        s[B].vectorize(i)
    return ember.build(s, [A, B], "k")["k"]


FLOAT_CASES = {
    "exp": (np.exp, (-5, 5)), "exp2": (np.exp2, (-5, 5)), "log": (np.log, (0.1, 10)),
    "log2": (np.log2, (0.1, 10)), "log1p": (np.log1p, (-0.5, 5)), "expm1": (np.expm1, (-2, 2)),
    "sqrt": (np.sqrt, (0, 10)), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 10)),
    "tanh": (np.tanh, (-4, 4)), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-6, 6)),
    "sin": (np.sin, (-3, 3)), "cos": (np.cos, (-3, 3)), "tan": (np.tan, (-1, 1)),
    "asin": (np.arcsin, (-0.9, 0.9)), "acos": (np.arccos, (-0.9, 0.9)), "atan": (np.arctan, (-3, 3)),
    "sinh": (np.sinh, (-2, 2)), "cosh": (np.cosh, (-2, 2)), "asinh": (np.arcsinh, (-3, 3)),
    "acosh": (np.arccosh, (1.1, 5)), "atanh": (np.arctanh, (-0.9, 0.9)), "floor": (np.floor, (-5, 5)),
    "ceil": (np.ceil, (-5, 5)), "round": (np.round, (-5, 5)), "trunc": (np.trunc, (-5, 5)),
    "abs": (np.abs, (-5, 5)), "reciprocal": (lambda x: 1 / x, (0.5, 5)),
}


@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_intrinsics(name, dtype):
    ref, (lo, hi) = FLOAT_CASES[name]
    x = RNG.uniform(lo, hi, N).astype(dtype)
    if name == "round":
        x[:4] = [0.5, 1.5, -2.5, 2.5]  # numpy rounds half to even
    k = _build_unary(getattr(intr, name), dtype)
    y = np.empty_like(x)
    k(x, y)
    np.testing.assert_allclose(y, ref(x), rtol=2e-6 if dtype == "float32" else 1e-12, atol=1e-6)


def test_erf_pow_fma_isnan():
    import math

    x = RNG.uniform(-3, 3, N).astype("float32")
    y = np.empty_like(x)
    _build_unary(intr.erf, "float32")(x, y)
    np.testing.assert_allclose(y, [math.erf(v) for v in x], rtol=1e-5, atol=1e-6)
    _build_unary(lambda a: intr.pow(intr.abs(a), 1.5), "float32")(x, y)
    np.testing.assert_allclose(y, np.abs(x) ** 1.5, rtol=1e-5)
    _build_unary(lambda a: intr.fma(a, a, 1.0), "float32")(x, y)
    np.testing.assert_allclose(y, x * x + 1, rtol=1e-6)
    z = x.copy()
    z[::3] = np.nan
    b = np.empty(N, np.bool_)
    _build_unary(intr.isnan, "float32")(z, b)
    np.testing.assert_array_equal(b, np.isnan(z))


INT_TYPES = ["int8", "int16", "int32", "int64", "uint8"]


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_integer_ops(dtype):
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    a = RNG.integers(lo, hi, N).astype(dtype)
    b = RNG.integers(1, min(hi, 50), N).astype(dtype)
    A = te.placeholder((N,), dtype, "A")
    B = te.placeholder((N,), dtype, "B")
    outs = {
        "add": (lambda x, y: x + y, np.add), "mul": (lambda x, y: x * y, np.multiply),
        "floordiv": (lambda x, y: x // y, np.floor_divide), "floormod": (lambda x, y: x % y, np.mod),
        "and": (lambda x, y: x & y, np.bitwise_and), "or": (lambda x, y: x | y, np.bitwise_or),
        "xor": (lambda x, y: x ^ y, np.bitwise_xor),
        "shl": (lambda x, y: x << (y % 3), lambda x, y: np.left_shift(x, y % 3)),
        "shr": (lambda x, y: x >> (y % 3), lambda x, y: np.right_shift(x, y % 3)),
        "min": (lambda x, y: ember.loop.min_(x, y), np.minimum),
    }
    funcs = []
    for name, (fn, _) in outs.items():
        C = te.compute((N,), lambda i, fn=fn: fn(A[i], B[i]), name)
        s = Schedule(C)
        o, i = s[C].split(s[C].leaf[0], factor=8)
        s[C].vectorize(i)
        funcs.append((s, [A, B, C], name))
    mod = ember.build(funcs)
    for name, (_, ref) in outs.items():
        c = np.empty_like(a)
        mod[name](a, b, c)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(c, ref(a, b).astype(dtype), err_msg=name)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"), ("float32", "float16"),
                                     ("float16", "float32"), ("float32", "bfloat16"), ("bfloat16", "float32"),
                                     ("float64", "float32"), ("int8", "int64"), ("uint8", "float32"),
                                     ("float32", "bool"), ("bool", "float32"), ("int64", "int16")])
def test_casts(src, dst):
    npsrc, npdst = ember.loop.dtype.numpy_dtype(src), ember.loop.dtype.numpy_dtype(dst)
    x = (RNG.uniform(-100, 100, N) if "int" in src or "float" in src else RNG.integers(0, 2, N))
    if src == "uint8":
        x = np.abs(x)
    x = x.astype(npsrc)
    k = _build_unary(lambda a: cast(dst, a), src, vectorize=src != "bool" and dst != "bool")
    y = np.empty(N, npdst)
    k(x, y)
    np.testing.assert_array_equal(y, x.astype(npdst))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_arithmetic(dtype):
    npd = ember.loop.dtype.numpy_dtype(dtype)
    x = RNG.uniform(-4, 4, N).astype(npd)
    k = _build_unary(lambda a: a * a + a, dtype)
    y = np.empty(N, npd)
    k(x, y)
    want = (x.astype(np.float32) * x.astype(np.float32)).astype(npd).astype(np.float32) + x.astype(np.float32)
    np.testing.assert_allclose(y.astype(np.float32), want.astype(npd).astype(np.float32), rtol=1e-2)


def test_select_and_reductions_with_where():
    A = te.placeholder((6, 9), "float32", "A")
    r = te.reduce_axis(9, "r")
    S = te.compute((6,), lambda i: te.sum(A[i, r], axis=r, where=A[i, r] > 0.0), "S")
    M = te.compute((6,), lambda i: te.max(A[i, r], axis=r), "M")
    Mn = te.compute((6,), lambda i: te.min(A[i, r], axis=r), "Mn")
    P = te.compute((6,), lambda i: te.prod(A[i, r], axis=r, init=2.0), "P")
    R = te.compute((6, 9), lambda i, j: select(A[i, j] > 0.0, A[i, j], -A[i, j]), "R")
    mod = ember.build([(Schedule(T), [A, T], T.name) for T in (S, M, Mn, P, R)])
    a = RNG.standard_normal((6, 9)).astype("float32")
    out = {n: np.empty(shape, np.float32) for n, shape in [("S", 6), ("M", 6), ("Mn", 6), ("P", 6), ("R", (6, 9))]}
    for n, o in out.items():
        mod[n](a, o)
    np.testing.assert_allclose(out["S"], np.where(a > 0, a, 0).sum(1), rtol=1e-5)
    np.testing.assert_allclose(out["M"], a.max(1))
    np.testing.assert_allclose(out["Mn"], a.min(1))
    np.testing.assert_allclose(out["P"], 2 * a.prod(1), rtol=1e-5)
    np.testing.assert_allclose(out["R"], np.abs(a))


def test_compute_errors():
    A = te.placeholder((4, 4), "float32", "A")
    with pytest.raises(ShapeError):
        te.compute((4,), lambda i, j: A[i, j])
    with pytest.raises(ShapeError):
        A[1]
    with pytest.raises(DTypeError):
        te.compute((4,), lambda i: A[i, i] + te.placeholder((4,), "int32", "I")[i])
    r = te.reduce_axis(4)
    with pytest.raises(LoweringError):
        te.compute((4,), lambda i: te.sum(A[i, r], axis=r) + 1.0)
