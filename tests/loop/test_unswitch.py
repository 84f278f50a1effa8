"""Unswitching by ranges: a loop whose body selects on where its variable lies runs one
branch per range with those selects decided (a concat's sources become plain copies); the
results are the same for every split of the sources."""
import numpy as np
from hypothesis import given, settings, strategies as st

import ember
from ember.driver import lower_kernel
from ember.loop import compute as te
from ember.loop.expr import LT, FloorDiv, IntImm, Var, select
from ember.loop.passes.unswitch import _cut
from ember.loop.schedule import Schedule
from ember.loop.stmt import IfThenElse, Store
from ember.loop.visit import walk


def _concat(sizes: tuple, cols: int = 24):
    """Sources of ``sizes`` rows (``cols`` columns) concatenated along the rows, the output's
    rows and columns fused into one parallel loop with vectors of 8 columns inside, as the
    default schedule of an injective group does: the source is ``v // (cols / 8)``'s range."""
    parts = [te.placeholder((n, cols), "float32", f"p{k}") for k, n in enumerate(sizes)]
    starts = np.cumsum((0,) + sizes)

    def body(i, j):
        v = parts[-1][i - int(starts[-2]), j]
        for k in range(len(parts) - 2, -1, -1):
            v = select(i < int(starts[k + 1]), parts[k][i - int(starts[k]), j], v)
        return v
    C = te.compute((int(starts[-1]), cols), body, "C")
    s = Schedule([C])
    i, j = s[C].leaf
    jo, ji = s[C].split(j, factor=8)
    s[C].parallel(s[C].fuse(i, jo))
    s[C].vectorize(ji)
    return s, parts + [C]


def test_each_range_of_a_concat_is_a_plain_copy():
    s, args = _concat((3, 5, 2))
    f = lower_kernel(s, args, "k")
    ifs = [n for n in walk(f.body) if isinstance(n, IfThenElse)]
    assert [str(n.condition) for n in ifs][:2] == ["i_j_o < 9", "i_j_o < 24"]  # rows 3 and 8, 3 vectors a row
    assert "select" not in f.script() and "predicate" not in f.script()


def test_only_conditions_of_the_variable_alone_cut_its_range():
    v, w = Var("v"), Var("w")
    assert _cut(LT(FloorDiv(v, IntImm(4)), IntImm(3)), v) == 12
    assert _cut(LT(IntImm(3), v), v) == 4  # 3 < v: v >= 4
    assert _cut(LT(v + w, IntImm(3)), v) is None
    assert _cut(LT(FloorDiv(v, IntImm(4)), w), v) is None


_MODS = {}


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=2, max_size=5))
def test_unswitched_concats_are_exact(sizes):
    sizes = tuple(sizes)
    if sizes not in _MODS:
        s, args = _concat(sizes)
        _MODS[sizes] = ember.build(s, args, "k")
    rng = np.random.default_rng(len(sizes))
    parts = [rng.standard_normal((n, 24)).astype(np.float32) for n in sizes]
    out = np.empty((sum(sizes), 24), np.float32)
    _MODS[sizes]["k"](*parts, out)
    np.testing.assert_array_equal(out, np.concatenate(parts))


def test_conditions_on_a_vectors_lanes_cut_at_the_vectors_all_in_or_all_out():
    """``8 v + u`` (``u`` a lane of 8): below the first cut every lane is on one side, from the
    second on every lane on the other; the one vector between keeps its mask."""
    from ember.loop.expr import GE, LE
    from ember.loop.passes.unswitch import _lane_cuts

    v, u, w = Var("v"), Var("u"), Var("w")
    lanes = {u: (0, 7)}
    assert _lane_cuts(GE(v * 8 + u, IntImm(1)), v, lanes) == (0, 1)  # vector 0 holds the left pad
    assert _lane_cuts(GE(v * 8 + u, IntImm(8)), v, lanes) == (1, 1)  # no vector is mixed
    assert _lane_cuts(LE(v * 8 + u, IntImm(8)), v, lanes) == (1, 2)  # 8 v + u < 9
    assert _lane_cuts(LT(v * 8 + u, IntImm(225)), v, lanes) == (28, 29)  # 225 = 28 * 8 + 1
    assert _lane_cuts(LT(v * 8 + u - 3, IntImm(16)), v, lanes) == (2, 3)
    assert _lane_cuts(LT(v * 8 + w, IntImm(16)), v, lanes) == ()  # w is no lane: not a constant
    assert _lane_cuts(LT(v * 8 + u, IntImm(16)), v, {}) == ()


def _padded_rows(width: int, left: int, right: int):
    """Rows of ``width`` padded by ``left`` and ``right`` zeros, 8 padded columns a vector
    (as a conv pads unblocked input: the vectors run along the row)."""
    A = te.placeholder((3, width), "float32", "A")
    P = te.compute((3, width + left + right),
                   lambda i, j: select((j >= left) & (j < width + left), A[i, j - left], 0.0), "P")
    s = Schedule([P])
    _, j = s[P].leaf
    _, ji = s[P].split(j, factor=8)
    s[P].vectorize(ji)
    return s, [A, P]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.integers(0, 9), st.integers(0, 9))
def test_a_padded_row_copies_whole_vectors_between_its_borders(width, left, right):
    s, args = _padded_rows(width, left, right)
    f = lower_kernel(s, args, "k")
    stores = [n for n in walk(f.body) if isinstance(n, Store)]
    if any(8 * v >= left and 8 * v + 7 < width + left for v in range(-(-(width + left + right) // 8))):
        # a vector wholly inside the row: copied with no mask
        assert any(n.predicate is None and "select" not in str(n.value) for n in stores), f.script()
    rng = np.random.default_rng(width)
    a = rng.standard_normal((3, width)).astype(np.float32)
    out = np.full((3, width + left + right), np.nan, np.float32)
    ember.build(s, args, "k")["k"](a, out)
    np.testing.assert_array_equal(out, np.pad(a, ((0, 0), (left, right))))
