"""``(y // c) * c + x % c`` is ``y`` when ``x`` and ``y`` differ by a multiple of ``c``: the
simplifier recombines a split whose remainder's dividend it reduced first (a loop split by 15
over a row of 9: ``(15 i + j) % 9`` became ``(6 i + j) % 9``), so bound inference sees one
contiguous range (a 1x1 conv's plane computed as one row, read back by rows and columns)."""
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ember.loop import FloorDiv, FloorMod, IntImm, Var
from ember.loop.arith import simplify
from ember.loop.visit import walk

from arith_reference import ev  # noqa: E402

I, J = Var("i"), Var("j")


def C(v: int) -> IntImm:
    return IntImm(v, "int64")


@settings(max_examples=60, deadline=None)
@given(a=st.integers(1, 40), off=st.integers(-20, 20), c=st.integers(2, 16), t=st.integers(-3, 3),
       k=st.integers(-3, 3), apart=st.integers(0, 2))
def test_a_quotient_and_a_congruent_remainder_recombine(a, off, c, t, k, apart):
    x = I * a + J + off
    # y - x: a multiple of c (apart 0), or not (apart 1, 2: off by one or two)
    y = x + (I * t + k) * c + apart
    s = simplify(FloorDiv(y, C(c)) * c + FloorMod(x, C(c)))
    if not apart:
        assert not any(isinstance(n, (FloorDiv, FloorMod)) for n in walk(s))
    for i, j in itertools.product(range(-4, 5), range(-3, 20, 4)):
        env = {I: i, J: j}
        yv, xv = ev(y, env), ev(x, env)
        assert ev(s, env) == (yv // c) * c + xv % c


def test_a_split_by_15_over_rows_of_9_is_its_position():
    q = I * 15 + J
    assert simplify(FloorDiv(q, C(9)) * 9 + FloorMod(q, C(9))) == simplify(q)
