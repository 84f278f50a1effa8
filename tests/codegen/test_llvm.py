"""LLVM code generation of expressions: every operator, cast and intrinsic against numpy.

Each table is compiled as one module (one LLVM optimization, one link) holding a scalar and an
8-lane vector version of every kernel, then each kernel is checked separately.
"""
import math

import ml_dtypes
import numpy as np
import pytest

from ember import runtime as rt
from ember.codegen.llvm import build
from ember.loop import Buffer, For, PrimFunc, Ramp, Store, Var, dtype as dt, intrinsics
from ember.loop import expr as E
from ember.loop.expr import IntImm

N = 64
LANES = 8
NUMERIC = [t for t in dt.SCALAR_TYPES if t != "bool"]
INTS = [t for t in NUMERIC if dt.is_int(t)]
FLOATS = [t for t in NUMERIC if dt.is_float(t)]


def elementwise(name, out_dtype, in_dtypes, fn, vector):
    """``Y[i] = fn(X0[i], X1[i], ...)``, or the same 8 lanes at a time over Ramp indices."""
    i = Var("i")
    ins = tuple(Buffer(f"X{k}", (N,), d) for k, d in enumerate(in_dtypes))
    out = Buffer("Y", (N,), out_dtype)
    if vector:
        idx = Ramp(i * LANES, IntImm(1), LANES)
        body = For(i, 0, N // LANES, "serial", Store(out, fn(*[b[idx] for b in ins]), (idx,)))
    else:
        body = For(i, 0, N, "serial", Store(out, fn(*[b[i] for b in ins]), (i,)))
    return PrimFunc(name, ins + (out,), body)


def run(module, name, out_dtype, *inputs):
    args = [rt.array(x) for x in inputs]
    out = rt.zeros((N,), out_dtype)
    module[name](*args, out)
    return out.numpy()


def as_cmp(x):
    """Exact comparison form: floats (incl. bfloat16) as float64, NaN positions included."""
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype.kind == "f" or x.dtype == dt.numpy_dtype("bfloat16") else x


# --- data ------------------------------------------------------------------------------------

def int_data(dtype, rng, divisor=False, shift=False):
    info = np.iinfo(dtype)
    if shift:
        bits = info.bits
        lo = -3 if info.min < 0 else 0
        return rng.integers(lo, bits + 3, N).astype(dtype)
    x = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    special = [0, 1, info.max, info.min, 7] + ([-1, -7, 3, -3] if info.min < 0 else [2, 3, 5, 9])
    x[:len(special)] = special
    if divisor:
        x[9:12] = 0
        x[12:14] = -1 if info.min < 0 else 1
    return x


def float_data(dtype, rng):
    npdt = dt.numpy_dtype(dtype)
    x = (rng.standard_normal(N) * 10).astype(np.float64)
    x[:10] = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 0.5, 2.5, -7.0]
    return x.astype(npdt)


def data(dtype, rng, **kw):
    if dtype == "bool":
        return rng.integers(0, 2, N).astype(bool)
    if dt.is_int(dtype):
        return int_data(dtype, rng, **kw) if dtype != "bool" else None
    return float_data(dtype, rng)


# --- binary operators ------------------------------------------------------------------------

def _wrap(values, dtype):
    bits = np.iinfo(dtype).bits
    return np.array([v % (1 << bits) for v in values], dtype=np.uint64).astype(dtype)


def c_div(a, b):
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        q = 0 if y == 0 else abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        out.append(q)
    return _wrap(out, a.dtype)


ARITH = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Min": np.minimum,
         "Max": np.maximum, "FloorDiv": np.floor_divide, "FloorMod": np.remainder, "Mod": np.fmod}
BITWISE = {"BitAnd": np.bitwise_and, "BitOr": np.bitwise_or, "BitXor": np.bitwise_xor,
           "Shl": np.left_shift, "Shr": np.right_shift}
COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
           "GT": np.greater, "GE": np.greater_equal}
LOGICAL = {"And": np.logical_and, "Or": np.logical_or, "BitAnd": np.logical_and,
           "BitOr": np.logical_or, "BitXor": np.logical_xor}


def binary_cases():
    cases = []
    for d in NUMERIC:
        ops = dict(ARITH, **COMPARE)
        ops["Div"] = np.true_divide if dt.is_float(d) else c_div
        if dt.is_int(d):
            ops.update(BITWISE)
        cases += [(op, d, ref) for op, ref in ops.items()]
    cases += [(op, "bool", ref) for op, ref in dict(LOGICAL, **COMPARE).items()]
    return cases


BINARY = binary_cases()


@pytest.fixture(scope="module")
def binary_module():
    funcs = []
    for op, d, _ in BINARY:
        out = "bool" if op in COMPARE else d
        cls = E.BINARY_OPS[op]
        for vec in (False, True):
            funcs.append(elementwise(f"{op}_{d}_{int(vec)}", out, (d, d),
                                     lambda a, b, cls=cls: cls(a, b), vec))
    return build(funcs)


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("op,dtype,ref", BINARY, ids=[f"{o}-{d}" for o, d, _ in BINARY])
def test_binary(binary_module, op, dtype, ref, vector):
    rng = np.random.default_rng(hash((op, dtype)) % 2**32)
    a = data(dtype, rng)
    b = data(dtype, rng, **({"divisor": True} if op in ("Div", "Mod", "FloorDiv", "FloorMod") else
                            {"shift": True} if op in ("Shl", "Shr") else {}))
    out = "bool" if op in COMPARE else dtype
    got = run(binary_module, f"{op}_{dtype}_{int(vector)}", out, a, b)
    with np.errstate(all="ignore"):
        want = ref(a, b)
    np.testing.assert_array_equal(as_cmp(got), as_cmp(want), err_msg=f"{op} {dtype}")


def test_int_overflow_wraps(binary_module):
    a = np.full(N, 100, np.int8)
    got = run(binary_module, "Add_int8_1", "int8", a, a)
    assert (got == -56).all()
    u = np.full(N, 250, np.uint8)
    assert (run(binary_module, "Mul_uint8_0", "uint8", u, u) == (250 * 250) % 256).all()


def test_floor_div_mod_negative(binary_module):
    a = np.array([-7, 7, -7, 7, -1, 0] * 11, np.int32)[:N]
    b = np.array([2, -2, -2, 2, 3, -5] * 11, np.int32)[:N]
    np.testing.assert_array_equal(run(binary_module, "FloorDiv_int32_0", "int32", a, b), a // b)
    np.testing.assert_array_equal(run(binary_module, "FloorMod_int32_1", "int32", a, b), a % b)
    np.testing.assert_array_equal(run(binary_module, "Div_int32_0", "int32", a, b), np.fix(a / b))
    np.testing.assert_array_equal(run(binary_module, "Mod_int32_1", "int32", a, b), np.fmod(a, b))


# --- casts -----------------------------------------------------------------------------------

CASTS = [(s, d) for s in dt.SCALAR_TYPES for d in dt.SCALAR_TYPES if s != d]


def cast_input(src, dst, rng):
    vals = [0, 1, 2, 3, 7, 100, 127, 5, 64]
    signed_ok = not dt.is_uint(src) and not dt.is_uint(dst) and src != "bool" and dst != "bool"
    if signed_ok:
        vals += [-1, -2, -100, -128]
    if dt.is_float(src):
        vals += [0.5, 1.5, 2.5, 3.75, 99.9]
        if signed_ok:
            vals += [-0.5, -2.5, -2.7]
        if dst == "bool" or dt.is_float(dst):
            vals += [np.nan, np.inf]
    if src == "bool":
        vals = [0, 1]
    x = np.array([vals[k % len(vals)] for k in range(N)], dtype=np.float64)
    return x.astype(dt.numpy_dtype(src))


@pytest.fixture(scope="module")
def cast_module():
    funcs = []
    for s, d in CASTS:
        for vec in (False, True):
            funcs.append(elementwise(f"cast_{s}_{d}_{int(vec)}", d, (s,),
                                     lambda a, d=d: E.Cast(dt.with_lanes(d, dt.lanes(a.dtype)), a), vec))
    return build(funcs)


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{s}-{d}" for s, d in CASTS])
def test_cast(cast_module, src, dst, vector):
    x = cast_input(src, dst, None)
    got = run(cast_module, f"cast_{src}_{dst}_{int(vector)}", dst, x)
    with np.errstate(all="ignore"):
        want = x.astype(dt.numpy_dtype(dst))
    np.testing.assert_array_equal(as_cmp(got), as_cmp(want), err_msg=f"{src} -> {dst}")


def test_float_rounding_casts(cast_module):
    # Round-to-nearest-even on narrowing, checked on values that are exactly halfway.
    x = (1.0 + (np.arange(N) % 8 + 0.5) * 2.0 ** -7).astype(np.float32)  # bfloat16 has 7 bits
    got = run(cast_module, "cast_float32_bfloat16_1", "bfloat16", x)
    np.testing.assert_array_equal(got.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    y = (1.0 + (np.arange(N) % 8 + 0.5) * 2.0 ** -10).astype(np.float64)
    got = run(cast_module, "cast_float64_float16_0", "float16", y)
    np.testing.assert_array_equal(got.view(np.uint16), y.astype(np.float16).view(np.uint16))


# --- select ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def select_module():
    funcs = []
    for d in ("float32", "int16", "bfloat16", "bool", "float64"):
        for vec in (False, True):
            funcs.append(elementwise(f"sel_{d}_{int(vec)}", d, ("bool", d, d),
                                     lambda c, a, b: E.Select(c, a, b), vec))
    return build(funcs)


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int16", "bfloat16", "bool", "float64"])
def test_select(select_module, dtype, vector):
    rng = np.random.default_rng(7)
    c, a, b = data("bool", rng), data(dtype, rng), data(dtype, rng)
    got = run(select_module, f"sel_{dtype}_{int(vector)}", dtype, c, a, b)
    np.testing.assert_array_equal(as_cmp(got), as_cmp(np.where(c, a, b)))


# --- intrinsics ------------------------------------------------------------------------------

def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


UNARY = {
    "exp": (np.exp, (-10, 10)), "exp2": (np.exp2, (-10, 10)), "log": (np.log, (0.01, 100)),
    "log2": (np.log2, (0.01, 100)), "log1p": (np.log1p, (-0.9, 10)), "expm1": (np.expm1, (-5, 5)),
    "sqrt": (np.sqrt, (0, 100)), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 100)),
    "tanh": (np.tanh, (-5, 5)), "erf": (_erf, (-3, 3)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-20, 20)), "sin": (np.sin, (-6, 6)),
    "cos": (np.cos, (-6, 6)), "tan": (np.tan, (-1.5, 1.5)), "asin": (np.arcsin, (-1, 1)),
    "acos": (np.arccos, (-1, 1)), "atan": (np.arctan, (-10, 10)), "sinh": (np.sinh, (-5, 5)),
    "cosh": (np.cosh, (-5, 5)), "asinh": (np.arcsinh, (-10, 10)), "acosh": (np.arccosh, (1, 10)),
    "atanh": (np.arctanh, (-0.99, 0.99)), "floor": (np.floor, (-10, 10)),
    "ceil": (np.ceil, (-10, 10)), "round": (np.round, (-10, 10)), "trunc": (np.trunc, (-10, 10)),
    "reciprocal": (lambda x: 1 / x, (0.1, 10)), "abs": (np.abs, (-10, 10)),
}
INTRINSIC_CASES = [(n, d) for n in UNARY for d in ("float32", "float64")] + \
    [(n, d) for n in ("exp", "tanh", "sqrt", "sigmoid", "round", "abs") for d in ("float16", "bfloat16")]
OTHER = ["pow", "atan2", "fma", "isnan", "isinf", "abs_int"]


def tolerance(dtype):
    return {"float32": (2e-6, 1e-6), "float64": (1e-13, 1e-14),
            "float16": (1e-3, 1e-3), "bfloat16": (8e-3, 8e-3)}[dtype]


@pytest.fixture(scope="module")
def intrinsic_module():
    funcs = []
    for name, d in INTRINSIC_CASES:
        for vec in (False, True):
            funcs.append(elementwise(f"{name}_{d}_{int(vec)}", d, (d,),
                                     lambda a, name=name: intrinsics.call(name, a), vec))
    for d in ("float32", "float64"):
        for vec in (False, True):
            v = int(vec)
            funcs.append(elementwise(f"pow_{d}_{v}", d, (d, d), intrinsics.pow, vec))
            funcs.append(elementwise(f"atan2_{d}_{v}", d, (d, d), intrinsics.atan2, vec))
            funcs.append(elementwise(f"fma_{d}_{v}", d, (d, d, d), intrinsics.fma, vec))
            funcs.append(elementwise(f"isnan_{d}_{v}", "bool", (d,), intrinsics.isnan, vec))
            funcs.append(elementwise(f"isinf_{d}_{v}", "bool", (d,), intrinsics.isinf, vec))
    for vec in (False, True):
        funcs.append(elementwise(f"abs_int_{int(vec)}", "int32", ("int32",), intrinsics.abs, vec))
    return build(funcs)


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("name,dtype", INTRINSIC_CASES, ids=[f"{n}-{d}" for n, d in INTRINSIC_CASES])
def test_unary_intrinsic(intrinsic_module, name, dtype, vector):
    ref, (lo, hi) = UNARY[name]
    x = np.linspace(lo, hi, N)
    if name == "round":
        x[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]  # halfway cases round to even
    x = x.astype(dt.numpy_dtype(dtype))
    got = run(intrinsic_module, f"{name}_{dtype}_{int(vector)}", dtype, x)
    want = ref(x.astype(np.float64))
    rtol, atol = tolerance(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_intrinsics(intrinsic_module, dtype, vector):
    rng = np.random.default_rng(3)
    npdt, v = np.dtype(dtype), int(vector)
    a = rng.uniform(0.1, 4, N).astype(npdt)
    b = rng.uniform(-3, 3, N).astype(npdt)
    c = rng.uniform(-3, 3, N).astype(npdt)
    rtol, atol = tolerance(dtype)
    np.testing.assert_allclose(run(intrinsic_module, f"pow_{dtype}_{v}", dtype, a, b), a.astype(float) ** b, rtol=rtol * 4)
    np.testing.assert_allclose(run(intrinsic_module, f"atan2_{dtype}_{v}", dtype, b, c),
                               np.arctan2(b.astype(float), c), rtol=rtol, atol=atol)
    np.testing.assert_allclose(run(intrinsic_module, f"fma_{dtype}_{v}", dtype, a, b, c),
                               a.astype(float) * b + c, rtol=rtol, atol=atol)
    x = float_data(dtype, rng)
    np.testing.assert_array_equal(run(intrinsic_module, f"isnan_{dtype}_{v}", "bool", x), np.isnan(x))
    np.testing.assert_array_equal(run(intrinsic_module, f"isinf_{dtype}_{v}", "bool", x), np.isinf(x))


def test_int_abs(intrinsic_module):
    x = int_data("int32", np.random.default_rng(0))
    with np.errstate(all="ignore"):
        want = np.abs(x)
    for v in (0, 1):
        np.testing.assert_array_equal(run(intrinsic_module, f"abs_int_{v}", "int32", x), want)
