"""Interval arithmetic at its edges: a divisor whose range is empty (a loop variable of no
iterations) is no divisor; found by hypothesis in test_statement_simplification_preserves_stores
(x // x under a loop whose extent can be zero raised ZeroDivisionError)."""
from ember.loop.arith import interval as I


def test_an_empty_divisor_range_bounds_nothing_and_raises_nothing():
    assert I.floordiv((0, -1), (0, -1)) == I.UNBOUNDED
    assert I.floordiv((0, 10), (1, 0)) == I.UNBOUNDED
    assert I.floordiv((0, 10), (2, 5)) == (0, 5)      # (a divisor of one sign still bounds)
    assert I.floordiv((0, 10), (-5, -2)) == (-5, 0)
