"""Tail partitioning: a vector loop over a symbolic extent runs its full vectors unmasked and
only its last, partial one masked; results stay exact at every extent."""
import numpy as np
from hypothesis import given, settings, strategies as st

import ember
from ember.driver import lower_kernel
from ember.loop import compute as te
from ember.loop.schedule import Schedule


def _sum_rows():
    """A row sum and a scaled copy over a symbolic row length: a masked reduction and masked
    elementwise stores before partitioning."""
    A = te.placeholder((4, "n"), "float32", "A")
    k = te.reduce_axis(A.shape[1], "k")
    S = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), "S")
    C = te.compute(A.shape, lambda i, j: A[i, j] * 2.0, "C")
    s = Schedule([S, C])
    ko, ki = s[S].split(s[S].leaf[1], factor=8)
    jo, ji = s[C].split(s[C].leaf[1], factor=8)
    s[C].vectorize(ji)
    return s, [A, S, C]


def test_the_main_loop_has_no_masks_and_the_tail_keeps_them():
    s, args = _sum_rows()
    text = str(lower_kernel(s, args, "k"))
    assert "_tail in serial(min=n // 8" in text
    main = text.split("_tail")[0]
    body = main[main.index("j_o in serial(n // 8)"):]
    assert "predicate" not in body.split("\n")[1] and "ramp(j_o * 8, 1, 8)" in body.split("\n")[1]


_MOD = {}


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 40))
def test_partitioned_loops_are_exact_at_every_extent(n):
    if "mod" not in _MOD:
        s, args = _sum_rows()
        _MOD["mod"] = ember.build(s, args, "k")
    a = np.random.default_rng(n).standard_normal((4, n)).astype(np.float32)
    out_s, out_c = np.empty(4, np.float32), np.empty((4, n), np.float32)
    _MOD["mod"]["k"](a, out_s, out_c)
    np.testing.assert_allclose(out_s, a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out_c, a * 2)
