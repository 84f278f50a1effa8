from hypothesis import given, settings
from hypothesis import strategies as st

from ember.runtime.memory_plan import Interval, plan_memory


def test_values_never_alive_together_share_bytes():
    plan = plan_memory([Interval("a", 1000, 0, 1), Interval("b", 1000, 2, 3)])
    assert plan.offsets["a"] == plan.offsets["b"] == 0
    assert plan.arena_bytes == 1024 and plan.total_bytes == 2048


def test_overlapping_values_get_disjoint_ranges():
    plan = plan_memory([Interval("a", 100, 0, 2), Interval("b", 100, 1, 3)])
    assert {plan.offsets["a"], plan.offsets["b"]} == {0, 128}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 20), st.integers(0, 5)), max_size=30))
def test_no_two_live_values_overlap(specs):
    values = [Interval(k, n, s, s + d) for k, (n, s, d) in enumerate(specs)]
    plan = plan_memory(values)
    assert plan.arena_bytes <= plan.total_bytes
    for a in values:
        oa = plan.offsets[a.key]
        assert oa % 64 == 0 and oa + a.nbytes <= plan.arena_bytes
        for b in values:
            if a.key < b.key and not (a.end < b.start or b.end < a.start):
                ob = plan.offsets[b.key]
                assert oa + a.nbytes <= ob or ob + b.nbytes <= oa
