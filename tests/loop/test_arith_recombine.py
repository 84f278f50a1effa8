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


# --- a fused loop's split over symbolic sizes ------------------------------------------------

S, N = Var("s"), Var("n")


def _sym_ranges(extent) -> dict:
    from ember.loop.arith.analyzer import Param

    return {S: Param((1, 1 << 40)), N: Param((1, 1 << 40)), I: (C(0), extent - 1)}


def _divmods(e) -> int:
    return sum(isinstance(n, (FloorDiv, FloorMod)) for n in walk(e))


def test_a_row_major_offset_over_symbolic_sizes_folds_back_to_the_fused_index():
    # i over batch * 4 * s, indexing a (batch, 4, s, s) tensor's rows: i * s
    flat = ((FloorDiv(I, S * 4) * 4 + FloorMod(FloorDiv(I, S), C(4))) * S + FloorMod(I, S)) * S
    assert simplify(flat, _sym_ranges(N * S * 4)) == simplify(I * S)
    # (1, n, s, s, 32) fused over its four leading axes: the offset of i's vector is i * 32
    flat = ((((FloorDiv(FloorDiv(FloorDiv(I, S), S), N) * N + FloorMod(FloorDiv(FloorDiv(I, S), S), N)) * S
              + FloorMod(FloorDiv(I, S), S)) * S + FloorMod(I, S)) * 32)
    assert simplify(flat, _sym_ranges(N * S * S)) == simplify(I * 32)


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 6), k=st.integers(-3, 3), s=st.integers(1, 7), n=st.integers(1, 5),
       other=st.booleans())
def test_a_quotient_and_remainder_by_a_symbolic_divisor_recombine_under_a_common_factor(c, k, s, n, other):
    # (i // (s*c)) * c * k * r + (i // s % c) * k * r  ==  (i // s) * k * r, r = n or 1
    r = N if other else C(1)
    e = FloorDiv(I, S * c) * c * k * r + FloorMod(FloorDiv(I, S), C(c)) * k * r
    got = simplify(e, _sym_ranges(N * S * 8))
    if k:
        assert _divmods(got) <= 1
    for i in range(0, n * s * 8):
        env = {I: i, S: s, N: n}
        want = (i // (s * c)) * c * k * (n if other else 1) + ((i // s) % c) * k * (n if other else 1)
        assert ev(got, env) == want


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 6), d=st.integers(1, 5), k=st.integers(-3, 3), s=st.integers(1, 7), n=st.integers(1, 5),
       sym=st.booleans(), lo=st.integers(-40, 0))
def test_a_remainder_and_a_nested_remainder_recombine_from_the_inside(c, d, k, s, n, sym, lo):
    # c*((i // c) % d)*k + (i % c)*k == (i % (c*d))*k for positive c, d: the outermost quotient
    # absent (a buffer of the fused loop's shape but its first axis)
    cc = S * c if sym else C(c)
    e = cc * FloorMod(FloorDiv(I, cc), N) * k + FloorMod(I, cc) * k
    from ember.loop.arith.analyzer import Param

    got = simplify(e, {S: Param((1, 1 << 40)), N: Param((1, 1 << 40)), I: (C(lo), C(lo) + N * cc * d - 1)})
    if k:
        assert _divmods(got) <= 1
    cv = s * c if sym else c
    for i in range(lo, lo + n * cv * d):
        env = {I: i, S: s, N: n}
        assert ev(got, env) == (cv * ((i // cv) % n) + i % cv) * k


@settings(max_examples=60, deadline=None)
@given(a=st.integers(1, 7), b=st.integers(1, 7), i=st.integers(-60, 60))
def test_a_quotient_of_a_quotient_by_positive_sizes_is_one_quotient(a, b, i):
    got = simplify(FloorDiv(FloorDiv(I, S), N), {S: (C(1), C(1 << 40)), N: (C(1), C(1 << 40))})
    assert _divmods(got) == 1
    assert ev(got, {I: i, S: a, N: b}) == (i // a) // b


def test_a_fused_index_below_its_extent_is_its_own_remainder():
    from ember.loop.arith.analyzer import Param

    r = {S: Param((1, 1 << 40)), N: Param((1, 1 << 40)), I: (C(0), N * S * S - 1)}
    assert simplify(FloorMod(I, N * S * S), r) == I
    # the row-major offset of (1, n, s, s) read by the loop fused over it: i
    flat = (FloorMod(FloorDiv(FloorDiv(I, S), S), N) * S + FloorMod(FloorDiv(I, S), S)) * S + FloorMod(I, S)
    assert simplify(flat, r) == I
    # below the extent but possibly negative: the remainder stays
    r[I] = (C(-1), N * S * S - 1)
    assert _divmods(simplify(FloorMod(I, N * S * S), r)) == 1
