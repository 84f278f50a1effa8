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
from ember.loop.stmt import IfThenElse
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
