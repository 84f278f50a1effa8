"""``(d y + r) // c == y // (c / d)`` and ``(d y + r) % c == d (y % (c / d)) + r`` for a divisor
``d`` of ``c`` and ``0 <= r < d``: a vector of 32 lanes inside a row of 64 (one head of
attention read across heads) is one load at ``o // 2``, not a gather."""
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ember.loop import Broadcast, FloorDiv, FloorMod, IntImm, Ramp, Var
from ember.loop.arith import simplify
from ember.loop.visit import walk

from arith_reference import ev  # noqa: E402

O, I = Var("o"), Var("i")


def C(v: int) -> IntImm:
    return IntImm(v, "int64")


def test_a_lane_block_inside_a_row_is_the_row_and_an_offset():
    r = {O: (0, 7), I: (0, 31)}
    assert simplify(FloorDiv(O * 32 + I, C(64)), r) == simplify(FloorDiv(O, C(2)))
    assert str(simplify(FloorMod(O * 32 + I, C(64)), r)) == "o % 2 * 32 + i"
    ramp = Ramp(O * 32, C(1), 32)
    assert simplify(FloorDiv(ramp, Broadcast(C(64), 32)), {O: (0, 7)}) == Broadcast(simplify(FloorDiv(O, C(2))), 32)


@settings(max_examples=80, deadline=None)
@given(d=st.sampled_from([2, 3, 4, 8, 16, 32]), m=st.integers(1, 6), extra=st.integers(-2, 3), off=st.integers(0, 40),
       coef=st.integers(1, 5))
def test_quotients_and_remainders_agree_with_python(d, m, extra, off, coef):
    """Over every point of the ranges, whatever the low part's reach (``extra`` past ``d``: the
    rule must not apply) -- compared with Python's floor division."""
    c = d * m
    hi = max(0, d - 1 + extra - off % d)
    e = O * (coef * d) + I + off % d
    r = {O: (-5, 9), I: (0, hi)}
    q, rem = simplify(FloorDiv(e, C(c)), r), simplify(FloorMod(e, C(c)), r)
    for o, i in itertools.product(range(-5, 10), range(0, hi + 1)):
        env = {O: o, I: i}
        v = ev(e, env)
        assert ev(q, env) == v // c and ev(rem, env) == v % c
    if extra <= 0 and hi + off % d < d and m > 1:
        assert not any(isinstance(n, FloorDiv) and n.b == C(c) for n in walk(q))
