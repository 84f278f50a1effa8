"""The x86 forms of float min/max and of float32 -> integer conversions
(``ember.codegen.llvm.x86``) answer as numpy does: NaN from either side of a min/max,
INT_MIN for NaN and out-of-range conversions, narrow integers wrapped through int32, and
``int32(round(x))`` rounding half to even -- in vectors of 16, 8 and 4 lanes and their multiples and against a
constant, a run-time scalar and another vector."""
import numpy as np
import pytest

import ember
from ember.loop import compute as te
from ember.loop.expr import Call, cast, max_, min_
from ember.loop.schedule import Schedule
from ember.target import Target

RNG = np.random.default_rng(5)
N = 512
pytestmark = pytest.mark.skipif("sse2" not in Target.host().feature_set, reason="x86 only")


def _values() -> np.ndarray:
    x = (RNG.standard_normal(N) * 10.0 ** RNG.uniform(-3, 10, N)).astype(np.float32)
    x[:64] = RNG.integers(-40, 40, 64) + 0.5  # (ties of the rounding)
    x[64:76] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 128,
                3e9, -3e9, 255.5]
    return x


def _kernel(fn, lanes, operand=None):
    A = te.placeholder((N,), "float32", "A")
    args = [A]
    if operand == "vector":
        B = te.placeholder((N,), "float32", "B")
        args.append(B)
        other = lambda i: B[i]  # noqa: E731
    elif operand == "scalar":
        B = te.placeholder((), "float32", "B")
        args.append(B)
        other = lambda i: B[()]  # noqa: E731
    else:
        other = lambda i: np.float32(1.5)  # noqa: E731
    C = te.compute((N,), lambda i: fn(A[i], other(i)), "C")
    s = Schedule(C)
    s[C].vectorize(s[C].split(s[C].leaf[0], factor=lanes)[1])
    return ember.build(s, args + [C], "k")


def _same(out, ref):
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(out[~np.isnan(ref)], ref[~np.isnan(ref)])


@pytest.mark.parametrize("lanes", [64, 48, 16, 8, 4, 1])
@pytest.mark.parametrize("operand", ["constant", "scalar", "vector"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_min_max_propagate_nan_from_either_side(op, operand, lanes):
    f, ref = (max_, np.maximum) if op == "max" else (min_, np.minimum)
    x = _values()
    y = {"constant": np.float32(1.5), "scalar": np.array(np.nan if lanes == 8 else -2.0, np.float32),
         "vector": RNG.permutation(_values())}[operand]
    m = _kernel(lambda a, b: f(a, b), lanes, None if operand == "constant" else operand)
    out = np.zeros(N, np.float32)
    m["k"](*([x] + ([] if operand == "constant" else [y]) + [out]))
    _same(out, ref(x, y))
    for first in (True, False):  # (either operand NaN, whichever side it is written on)
        m2 = _kernel((lambda a, b: f(b, a)) if first else (lambda a, b: f(a, b)), lanes, "vector")
        out = np.zeros(N, np.float32)
        yv = RNG.permutation(x)
        m2["k"](x, yv, out)
        _same(out, ref(x, yv))


@pytest.mark.parametrize("lanes", [64, 48, 16, 8, 4, 1])
@pytest.mark.parametrize("dtype", ["int32", "int16", "uint8", "int8"])
@pytest.mark.parametrize("rounded", [False, True])
def test_float_to_int_answers_as_numpy(dtype, lanes, rounded):
    x = _values()
    with np.errstate(invalid="ignore"):
        ref = (np.round(x) if rounded else x).astype(np.int32).astype(dtype)  # (numpy: through int32 on x86)
    A = te.placeholder((N,), "float32", "A")
    C = te.compute((N,), lambda i: (Call("float32", "round", (A[i],)) if rounded else A[i]).astype(dtype), "C")
    s = Schedule(C)
    s[C].vectorize(s[C].split(s[C].leaf[0], factor=lanes)[1])
    m = ember.build(s, [A, C], "k")
    out = np.zeros(N, dtype)
    m["k"](x, out)
    np.testing.assert_array_equal(out, ref)  # (the portable form too: scalars, 48 lanes)


def test_a_rounding_then_conversion_is_one_instruction_and_a_clamp_no_ordering_of_zeros():
    from ember.codegen.llvm import emit_llvm
    from ember.driver import lower_kernel

    A = te.placeholder((N,), "float32", "A")
    C = te.compute((N,), lambda i: Call("float32", "round", (max_(A[i], np.float32(-3.0)),)).astype("int32"), "C")
    s = Schedule(C)
    s[C].vectorize(s[C].split(s[C].leaf[0], factor=8)[1])
    text = emit_llvm(lower_kernel(s, [A, C], "k"))
    assert "cvt.ps2dq" in text and "roundeven" not in text and "fptosi" not in text
    assert "max.ps" in text and "llvm.maximum" not in text


from ember.codegen.llvm.x86 import byte_table as _byte_table  # noqa: E402


@pytest.mark.skipif(not Target.host().has_feature("avx512vbmi"), reason="the host has no AVX512-VBMI")
@pytest.mark.parametrize("lanes", [64, 16, 8])
@pytest.mark.parametrize("size,dtype", [(256, "uint8"), (200, "int8"), (64, "uint8"), (130, "uint8")])
def test_a_byte_table_looks_up_by_permutes_as_a_gather_does(size, dtype, lanes, monkeypatch, tmp_path):
    # (x86.byte_table: two vpermi2b and a blend; a table's last partial 64 bytes read masked)
    from ember.codegen.llvm import x86

    made = []
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))  # (built here, not found in a cache)
    monkeypatch.setattr(x86, "byte_table", lambda *a: made.append(1) or _byte_table(*a))
    T = te.placeholder((size,), dtype, "T")
    idx = te.placeholder((N,), "int32", "I")
    C = te.compute((N,), lambda i: T[cast("int64", idx[i])], "C")
    s = Schedule(C)
    s[C].vectorize(s[C].split(s[C].leaf[0], factor=lanes)[1])
    m = ember.build(s, [T, idx, C], "k")
    table = RNG.integers(-128 if dtype == "int8" else 0, 128 if dtype == "int8" else 256, size).astype(dtype)
    i = RNG.integers(0, size, N).astype(np.int32)
    i[:4] = [0, size - 1, 127 % size, 128 % size]
    out = np.zeros(N, dtype)
    m["k"](table, i, out)
    np.testing.assert_array_equal(out, table[i])
    assert made


@pytest.mark.parametrize("lanes", [8, 16, 4])
def test_a_word_table_on_avx2_is_one_vpgatherdd_per_8_lanes(lanes, monkeypatch, tmp_path):
    # (x86.dword_gather: LLVM scalarizes llvm.masked.gather on CPUs it does not mark as fast
    # gatherers, Zen 3 among them; a code's int32 table is read with the instruction itself)
    from ember.codegen.llvm import emit_llvm
    from ember.driver import lower_kernel

    T = te.placeholder((200,), "int32", "T")
    idx = te.placeholder((N,), "int32", "I")
    C = te.compute((N,), lambda i: T[cast("int64", idx[i])], "C")
    s = Schedule(C)
    s[C].vectorize(s[C].split(s[C].leaf[0], factor=lanes)[1])
    text = emit_llvm(lower_kernel(s, [T, idx, C], "k"), Target.from_string("llvm -mcpu=znver3"))
    assert ("avx2.gather.d.d.256" in text) == (lanes % 8 == 0)
    assert "avx2.gather" not in emit_llvm(lower_kernel(s, [T, idx, C], "k"), Target.from_string("llvm -mcpu=znver4"))
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    m = ember.build(s, [T, idx, C], "k")  # (on the host: the instruction where it has AVX2 alone)
    table = RNG.integers(-2 ** 31, 2 ** 31 - 1, 200).astype(np.int32)
    i = RNG.integers(0, 200, N).astype(np.int32)
    i[:2] = [0, 199]
    out = np.zeros(N, np.int32)
    m["k"](table, i, out)
    np.testing.assert_array_equal(out, table[i])
