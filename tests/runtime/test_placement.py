"""The core-placement probe: a cache line's round trip between two cores, and its classes."""
import os

import pytest

from ember.runtime.placement import core_round_trip_ns, describe, placements


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the probe needs two cores")
def test_a_cache_line_goes_between_two_cores_and_back():
    ns = core_round_trip_ns(trips=2000, repeat=2)
    # between ~20 ns (two hyperthreads of one core) and a few microseconds (a loaded VM)
    assert ns is not None and 5 < ns < 50_000


def test_one_core_has_no_round_trip():
    assert core_round_trip_ns(cores=[0]) is None


def test_rounds_are_far_where_the_round_trip_is_over_twice_the_least():
    assert placements([62.0, 340.0, 75.0, None, 118.0]) == ["near", "far", "near", None, "near"]
    assert placements([None]) == [None]
    assert describe([62.0, 340.0, None]) == "core round trip 62-340 ns"
    assert describe([70.0, 71.0]) == "core round trip 70 ns"


def test_a_group_has_a_placement_where_its_round_trips_agree():
    from ember.runtime.placement import group_placements

    assert group_placements([(60.0, 70.0), (340.0, 350.0), (65.0, 345.0), (None, None)]) == \
        ["near", "far", None, None]
    # a round trip measured before counts toward the least: 100 ns is far from 40
    assert group_placements([(100.0, 110.0)], also=[40.0]) == ["far"]
