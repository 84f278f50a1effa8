"""Dimension expressions as data: the compiled form agrees with the evaluator (property test)."""
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.runtime.shapes import OPS, compile_shapes, evaluate

SYMBOLS = ["batch", "seq", "past", "we'ird\\name"]  # (any name: it becomes a string literal)

dims = st.recursive(
    st.one_of(st.integers(-50, 50), st.sampled_from(SYMBOLS)),
    lambda inner: st.tuples(st.sampled_from(sorted(OPS)), inner, inner).map(list),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(dims, min_size=1, max_size=4), min_size=1, max_size=6),
       st.dictionaries(st.sampled_from(SYMBOLS), st.integers(0, 40)))
def test_compiled_shapes_are_the_evaluated_ones(shapes, env):
    got = compile_shapes(shapes)(env)
    for shape, g in zip(shapes, got):
        want = tuple(evaluate(d, env) for d in shape)
        # (None for the whole shape where a symbol is unbound or a division is by zero)
        assert g == (None if any(w is None for w in want) else want)
