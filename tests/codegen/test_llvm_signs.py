"""Floor division and remainder of an index known non-negative by a divisor known positive (a
size, a loop variable from 0) are emitted as one unsigned instruction; elsewhere the signed
floor form stays (``ember.codegen.llvm.signs``)."""
import numpy as np
import pytest

from ember.codegen.llvm import build, emit_llvm
from ember.codegen.llvm.signs import lower_bound, unsigned_divides
from ember.loop import Buffer, For, IntImm, PrimFunc, Ramp, Store, Var
from ember.loop import expr as E


def test_lower_bounds_follow_by_structure():
    i, n, q, x = Var("i"), Var("n"), Var("?q"), Var("x")
    known = {i: 0, n: 1, q: 0}
    assert lower_bound(i * n + IntImm(3), known) == 3
    assert lower_bound(E.FloorMod(x, n), known) == 0  # (whatever the dividend)
    assert lower_bound(E.FloorDiv(i, n), known) == 0
    assert lower_bound(E.FloorDiv(x, n), known) is None
    assert lower_bound(i - n, known) is None  # (no rule for a difference)
    assert lower_bound(E.Max(x, i), known) == 0 and lower_bound(E.Min(x, i), known) is None
    assert lower_bound(Ramp(i * IntImm(16), IntImm(1), 16), known) == 0
    assert lower_bound(Ramp(i, IntImm(-1), 16), known) is None
    assert unsigned_divides(E.FloorDiv(i, n), known)
    assert not unsigned_divides(E.FloorDiv(i, q), known)  # (a data size may be 0)
    assert not unsigned_divides(E.FloorMod(i, i), known)  # (a loop variable may be 0)
    assert not unsigned_divides(E.FloorDiv(x, n), known)


def _rotate_rows(name, shift):
    """``Y[r, c] = X[r, (c + shift) % m]`` over one loop of ``r*m`` (a collapsed loop's indices)."""
    i, r, m = Var("i"), Var("r"), Var("m")
    X, Y = Buffer("X", (r, m), "float32", align=4), Buffer("Y", (r, m), "float32", align=4)
    row, col = E.FloorDiv(i, m), E.FloorMod(i, m)
    return PrimFunc(name, (X, Y), For(i, 0, r * m, "parallel",
                                      Store(Y, X[row, E.FloorMod(col + IntImm(shift), m)], (row, col))))


@pytest.mark.parametrize("shift", [0, 3, -2])
def test_divisions_by_sizes_are_unsigned_where_the_dividend_is_non_negative(shift):
    f = _rotate_rows(f"rot{shift + 2}", shift)
    # (the loop's body, not the team's split of it)
    text = emit_llvm(f).split(f'define internal void @"{f.name}.par0.body"')[1].split("\n}")[0]
    assert "udiv" in text and "urem" in text
    # (a negative shift leaves col + shift of no known sign: its remainder keeps the floor form)
    assert ("srem" in text) == (shift < 0)
    rng = np.random.default_rng(0)
    kernel = build([f], name=f.name)[f.name]
    for r, m in ((3, 4), (5, 7), (1, 5), (64, 1)):
        x = rng.standard_normal((r, m)).astype(np.float32)
        y = np.zeros((r, m), np.float32)
        kernel(x, y)
        np.testing.assert_array_equal(y, np.roll(x, -shift, axis=1))
