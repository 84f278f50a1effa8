"""A loop folding one vector's lanes into an accumulator is emitted as LLVM's vector
reduction where the combiner's result does not depend on the order (max, min, integer sums);
float sums keep their sequential order."""
import numpy as np
import pytest

from ember import runtime as rt
from ember.codegen.llvm import build, emit_llvm
from ember.loop import Allocate, Buffer, For, IntImm, PrimFunc, Ramp, SeqStmt, Store, Var
from ember.loop import expr as E

L = 16


def _row_combine(name, op, dtype, init):
    """``Y[r] = op over the 16 lanes of X[r, :]``, through a local partial vector and a serial
    loop over its lanes (as the row reductions' schedules leave it)."""
    r, l, n = Var("r"), Var("l"), Var("n")
    X, Y = Buffer("X", (n, L), dtype), Buffer("Y", (n,), dtype)
    part = Buffer("part", (L,), dtype, scope="local")
    lanes = Ramp(IntImm(0), IntImm(1), L)
    init = E.FloatImm(init, dtype) if dtype.startswith("float") else IntImm(init, dtype)
    body = SeqStmt((Store(part, X[r, lanes], (lanes,)), Store(Y, init, (r,)),
                    For(l, 0, L, "serial", Store(Y, op(Y[r], part[l]), (r,)))))
    return PrimFunc(name, (X, Y, n), For(r, 0, n, "serial", Allocate(part, body)))


@pytest.mark.parametrize("op,np_op,init,intrinsic", [
    (E.Max, np.max, float("-inf"), "vector.reduce.fmaximum"),
    (E.Min, np.min, float("inf"), "vector.reduce.fminimum"),
])
def test_float_max_and_min_are_one_vector_reduction_with_nan_and_signed_zeros(op, np_op, init, intrinsic):
    f = _row_combine(f"rows_{op.__name__}", op, "float32", init)
    assert intrinsic in emit_llvm(f)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, L)).astype(np.float32)
    x[1, 5] = np.nan
    x[2] = 0.0
    x[2, ::2] = -0.0  # max is +0, min is -0, whatever the order
    x[3] = -0.0
    y = rt.zeros((7,), "float32")
    build(f)[f.name](rt.array(x), y)
    got, want = y.numpy(), np_op(x, axis=1)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[1])
    assert np.signbit(got[2]) == (op is E.Min) and np.signbit(got[3])


def test_integer_sum_is_a_vector_reduction_and_wraps():
    f = _row_combine("rows_isum", E.Add, "int32", 0)
    assert "vector.reduce.add" in emit_llvm(f)
    x = np.full((3, L), 2 ** 30, np.int32)
    x[1] = np.arange(L)
    y = rt.zeros((3,), "int32")
    build(f)[f.name](rt.array(x), y)
    np.testing.assert_array_equal(y.numpy(), x.sum(axis=1, dtype=np.int32))


def test_a_float_sum_keeps_its_order():
    f = _row_combine("rows_fsum", E.Add, "float32", 0.0)
    assert "vector.reduce" not in emit_llvm(f)
    x = np.array([[1e8, 1.0, -1e8] + [0.5] * (L - 3)], np.float32)
    y = rt.zeros((1,), "float32")
    build(f)[f.name](rt.array(x), y)
    want = np.float32(0.0)
    for v in x[0]:
        want = np.float32(want + v)
    assert y.numpy()[0] == want
