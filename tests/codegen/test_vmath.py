"""Inline float32 math (ember/codegen/llvm/vmath.py): accuracy, special values, no libm calls.

Every function is built twice through the public path (compute + Schedule + ember.build), once
with an explicitly vectorized ``<8 x float>`` loop and once as a scalar loop, and checked over
dense sweeps of its useful range, random float32 bit patterns (every class: subnormals, NaNs,
infinities, huge values) and special values against a float64 numpy reference: at most 4 ulp of
the reference rounded to float32, and exactly equal (sign of zero included) where the rounded
reference is 0, inf or NaN.

``silu`` is ``x * sigmoid(x)`` written as such: the code generator computes the product as one
quotient (``vmath.silu``), whose documented value below x = -87.3 is that at -87.3.
"""
import importlib
import math
import re

import numpy as np
import pytest

import ember
from ember.codegen.llvm import emit_llvm
from ember.driver import lower_kernel
from ember.loop import compute as te, intrinsics as intr
from ember.loop.schedule import Schedule
from ember.target import Target

# The module, not the ``build`` function the package exports under the same name.
llvm_build = importlib.import_module("ember.codegen.llvm.build")

N = 1 << 17
MAX_ULP = 4.0
FUNCS = ["exp", "exp2", "expm1", "log", "log2", "log1p", "tanh", "sigmoid", "erf", "silu"]
CALLEE = re.compile(r'\bcall [^@]*@"?([\w.$]+)')  # llvmlite quotes names, LLVM does not
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _silu(x):
    # (vmath.silu's documented value below -87.3: its value at -87.3, about -1e-36)
    lo = float(np.float32(-87.3))
    c = np.where(x < lo, lo, x)
    with np.errstate(over="ignore"):
        return c / (1 + np.exp(-c))


REF = {"exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
       "log1p": np.log1p, "tanh": np.tanh, "sigmoid": _sigmoid, "erf": _erf, "silu": _silu}

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 2.0, 0.5, 1e-45, -1e-45,
           1.1754944e-38, -1.1754944e-38, 3.4028235e38, -3.4028235e38, 1e-30, -1e-30, 1e30, -1e30,
           # exp/exp2/expm1 overflow, FLT_MIN and subnormal-underflow boundaries
           88.72283, 88.72284, 88.7229, 89.0, -87.33654, -87.33655, -103.27893, -103.97207,
           -103.9721, -104.0, -110.0, 127.99999, 128.0, -126.0, -149.0, -149.5, -150.0, -151.0,
           -17.3, -17.4, -30.0,
           # tanh/erf/sigmoid saturation and branch points
           0.625, -0.625, 0.62499994, 9.0, 9.1, -9.1, 3.9, 3.92, 4.0, -4.0, 0.99999994, 16.7, -16.7,
           -88.0, -100.0,
           # log1p domain edge
           -0.99999994, -1.0000001, -2.0, 0.41421357, -0.29289323, 1e7, 2 ** 24, 2 ** 25 + 2]


def _sweep(name: str) -> np.ndarray:
    """N float32 inputs: dense sweeps of ``name``'s useful range, specials, random bit patterns."""
    n = N // 4
    lin, geo = np.linspace, np.geomspace
    parts = {
        "exp": [lin(-104, 89, 2 * n), lin(-1, 1, n)],
        "exp2": [lin(-151, 129, 2 * n), lin(-1, 1, n)],
        "expm1": [lin(-20, 89, n), lin(-1, 1, n), geo(1e-30, 1, n // 2), -geo(1e-30, 1, n // 2)],
        "log": [geo(1e-45, 3.4e38, 2 * n), lin(0.5, 2, n)],
        "log2": [geo(1e-45, 3.4e38, 2 * n), lin(0.5, 2, n)],
        "log1p": [lin(-1, 3, n), geo(1e-30, 3e38, n), -geo(1e-30, 1, n)],
        "tanh": [lin(-10, 10, n), geo(1e-30, 10, n), -geo(1e-30, 10, n)],
        "erf": [lin(-10, 10, n), geo(1e-30, 10, n), -geo(1e-30, 10, n)],
        "sigmoid": [lin(-10, 10, n), lin(-110, 90, n), geo(1e-30, 10, n // 2), -geo(1e-30, 10, n // 2)],
        "silu": [lin(-10, 10, n), lin(-110, 90, n), geo(1e-30, 10, n // 2), -geo(1e-30, 10, n // 2)],
    }[name]
    x = np.concatenate(parts + [np.array(SPECIAL)]).astype(np.float32)
    rng = np.random.default_rng(sum(map(ord, name)))
    fill = rng.integers(0, 2 ** 32, N - len(x), dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([x, fill])


def _schedule(name: str, n: int, vector: bool):
    A = te.placeholder((n,), "float32", "A")
    f = (lambda a: a * intr.sigmoid(a)) if name == "silu" else getattr(intr, name)
    B = te.compute((n,), lambda i: f(A[i]), "B")
    s = Schedule(B)
    if vector:
        _, inner = s[B].split(s[B].leaf[0], factor=8)
        s[B].vectorize(inner)
    return s, [A, B]


@pytest.fixture(scope="module")
def vmath_module():
    """All functions, vector and scalar, in one module (one optimization, one link)."""
    kernels = []
    for name in FUNCS:
        for vector in (True, False):
            s, args = _schedule(name, N, vector)
            kernels.append((s, args, f"vm_{name}_{'vec' if vector else 'scalar'}"))
    return ember.build(kernels, name="vmath_tests")


def ulp_errors(name: str, x: np.ndarray, got: np.ndarray):
    """(ulp error per element, mask of elements whose 0/inf/NaN result is not reproduced)."""
    with np.errstate(all="ignore"):
        want = REF[name](x.astype(np.float64))
        want32 = want.astype(np.float32)
        exact = ~np.isfinite(want32) | (want32 == 0)
        same = (got == want32) & (np.signbit(got) == np.signbit(want32))
        mismatch = exact & ~(same | (np.isnan(got) & np.isnan(want32)))
        ulp = np.spacing(np.abs(want32)).astype(np.float64)
        err = np.where(exact, 0.0, np.abs(got.astype(np.float64) - want) / ulp)
    err[~exact & ~np.isfinite(got)] = np.inf
    return err, mismatch


def _check(name, x, got, what):
    err, mismatch = ulp_errors(name, x, got)
    assert not mismatch.any(), (
        f"{name} ({what}): special results differ at x={x[mismatch][:5]}: got {got[mismatch][:5]}, "
        f"want {REF[name](x[mismatch][:5].astype(np.float64)).astype(np.float32)}")
    i = int(np.argmax(err))
    assert err[i] <= MAX_ULP, f"{name} ({what}): {err[i]:.2f} ulp at x={x[i]!r}: got {got[i]!r}"
    return err[i]


@pytest.mark.parametrize("vector", [True, False], ids=["vector", "scalar"])
@pytest.mark.parametrize("name", FUNCS)
def test_accuracy_and_specials(vmath_module, name, vector):
    x = _sweep(name)
    y = np.empty_like(x)
    vmath_module[f"vm_{name}_{'vec' if vector else 'scalar'}"](x, y)
    _check(name, x, y, "vector" if vector else "scalar")


@pytest.mark.parametrize("name", FUNCS)
def test_vector_and_scalar_agree_bitwise(vmath_module, name):
    """Same IR on a vector and on a scalar: the results are identical, NaNs aside."""
    x = _sweep(name)
    yv, ys = np.empty_like(x), np.empty_like(x)
    vmath_module[f"vm_{name}_vec"](x, yv)
    vmath_module[f"vm_{name}_scalar"](x, ys)
    nan = np.isnan(yv)
    np.testing.assert_array_equal(nan, np.isnan(ys))
    np.testing.assert_array_equal(yv[~nan].view(np.uint32), ys[~nan].view(np.uint32))


def test_signed_zero_and_tail():
    """Odd functions keep -0; a length that is not a multiple of the vector width works."""
    n = 1001
    kernels = [(*_schedule(f, n, True), f"tail_{f}") for f in ("tanh", "erf", "expm1", "log1p", "exp")]
    mod = ember.build(kernels, name="vmath_tail")
    x = np.linspace(-3, 3, n).astype(np.float32)
    x[:4] = [-0.0, 0.0, -np.inf, np.nan]
    for f in ("tanh", "erf", "expm1", "log1p", "exp"):
        y = np.empty_like(x)
        mod[f"tail_{f}"](x, y)
        _check(f, x, y, "tail")
        if f != "exp":
            assert np.signbit(y[0]) and y[0] == 0 and not np.signbit(y[1]), f


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_floats_use_the_float32_code(dtype):
    from ember.loop import dtype as dt

    npdt = dt.numpy_dtype(dtype)
    n = 256
    A = te.placeholder((n,), dtype, "A")
    B = te.compute((n,), lambda i: intr.erf(A[i]) + intr.log1p(A[i]), "B")
    s = Schedule(B)
    _, inner = s[B].split(s[B].leaf[0], factor=8)
    s[B].vectorize(inner)
    k = ember.build(s, [A, B], f"narrow_{dtype}")[f"narrow_{dtype}"]
    x = np.linspace(-0.9, 3, n).astype(npdt)
    y = np.empty_like(x)
    k(x, y)
    xf = x.astype(np.float64)
    want = (_erf(xf).astype(np.float32).astype(npdt).astype(np.float32)
            + np.log1p(xf).astype(np.float32).astype(npdt).astype(np.float32)).astype(npdt)
    np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64), rtol=1e-2, atol=1e-2)


def test_vector_exp_has_no_libm_call(capsys, monkeypatch):
    """The vectorized exp kernel is straight-line vector code: no expf in the unoptimized IR,
    the optimized IR, the assembly or the object file."""
    s, args = _schedule("exp", 4096, True)
    func = lower_kernel(s, args, "vexp_nolibm")
    target = Target.host()
    ir_text = emit_llvm(func, target)
    assert "expf" not in ir_text and "llvm.exp." not in ir_text
    assert set(CALLEE.findall(ir_text)) == {"llvm.fmuladd.v8f32"}
    monkeypatch.setenv("EMBER_DEBUG", "4")
    obj = llvm_build.compile_object(ir_text, target, "vexp_nolibm")
    err = capsys.readouterr().err
    optimized = err.split("=== optimized LLVM IR")[1].split("=== assembly")[0]
    assembly = err.split("=== assembly")[1]
    callees = set(CALLEE.findall(optimized))
    assert callees and all(c.startswith("llvm.") for c in callees), callees
    assert "expf" not in optimized and "expf" not in assembly
    assert not re.search(r"^\s*call", assembly, re.M), "the kernel calls out"
    assert b"expf" not in obj


def test_other_functions_have_no_calls():
    """None of the inline functions leaves a libm call behind (vector and scalar)."""
    for name in FUNCS:
        for vector in (True, False):
            s, args = _schedule(name, 64, vector)
            text = emit_llvm(lower_kernel(s, args, f"nocall_{name}_{int(vector)}"))
            callees = set(CALLEE.findall(text))
            assert callees and all(c.startswith("llvm.") for c in callees), (name, callees)


def test_silu_is_found_in_either_order_and_only_on_the_same_operand(monkeypatch):
    """``x * sigmoid(x)`` and ``sigmoid(x) * x`` take vmath.silu; ``x * sigmoid(y)`` does not."""
    from ember.codegen.llvm import vmath

    seen = []
    real = vmath.silu
    monkeypatch.setattr(vmath, "silu", lambda b, x: seen.append(x) or real(b, x))
    A, B = te.placeholder((64,), "float32", "A"), te.placeholder((64,), "float32", "B")
    for f, uses in ((lambda i: A[i] * intr.sigmoid(A[i]), 1), (lambda i: intr.sigmoid(A[i] + 1.0) * (A[i] + 1.0), 1),
                    (lambda i: A[i] * intr.sigmoid(B[i]), 0)):
        seen.clear()
        C = te.compute((64,), lambda i: f(i) + B[i] * 0.0, "C")  # (B in every schedule)
        emit_llvm(lower_kernel(Schedule(C), [A, B, C], "silu_pattern"))
        assert len(seen) == uses


GELU_FORMS = [  # how nn.gelu's compute and the exporters' erf GELU write it
    lambda a: 0.5 * a * (1.0 + intr.erf(a * (1 / math.sqrt(2.0)))),
    lambda a: a * (intr.erf(a / math.sqrt(2.0)) + 1.0) * 0.5,
    lambda a: (a * 0.5) * (intr.erf(a * (1 / math.sqrt(2.0))) + 1.0),
]


@pytest.mark.parametrize("form", range(len(GELU_FORMS)))
def test_gelu_is_found_and_within_its_bound(form, monkeypatch):
    """The erf GELU, written any of these ways, takes vmath.gelu: within 2.5e-7 |x| (its erf's
    absolute error, scaled) plus 4 ulp of the float64 value, NaN in NaN out, exact at the
    saturations; ``x * (1 + erf(y / sqrt 2)) / 2`` with ``y != x`` does not."""
    from ember.codegen.llvm import vmath

    seen = []
    real = vmath.gelu
    monkeypatch.setattr(vmath, "gelu", lambda b, x: seen.append(x) or real(b, x))
    n = 1 << 16
    A = te.placeholder((n,), "float32", "A")
    B = te.compute((n,), lambda i: GELU_FORMS[form](A[i]), "B")
    s = Schedule(B)
    s[B].vectorize(s[B].split(s[B].leaf[0], factor=16)[1])
    k = ember.build(s, [A, B], f"gelu_{form}")[f"gelu_{form}"]
    assert seen
    x = np.concatenate([np.linspace(-12, 12, n - 16), [0.0, -0.0, np.nan, np.inf, 1e-30, -1e-30, 3.9, -3.9, 5.55, -5.55,
                                                       100.0, -100.0, 1e-3, -1e-3, 0.5, -0.5]]).astype(np.float32)
    y = np.empty_like(x)
    k(x, y)
    xd = x.astype(np.float64)
    want = 0.5 * xd * (1 + _erf(xd / math.sqrt(2.0)))
    ok = ~np.isnan(x) & np.isfinite(x)
    bound = 2.5e-7 * np.abs(xd[ok]) + 4 * np.spacing(np.abs(want[ok]).astype(np.float32))
    assert np.all(np.abs(y[ok] - want[ok]) <= bound), np.max(np.abs(y[ok] - want[ok]) - bound)
    assert np.isnan(y[np.isnan(x)]).all() and y[x == np.inf][0] == np.inf
    assert y[x == 100.0][0] == 100.0 and y[x == -100.0][0] == 0.0
    seen.clear()
    C = te.compute((64,), lambda i: 0.5 * A[i] * (1.0 + intr.erf(A[i + 1] * (1 / math.sqrt(2.0)))), "C")
    emit_llvm(lower_kernel(Schedule(C), [A, C], "gelu_other"))
    assert not seen
