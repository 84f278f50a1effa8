"""The core-placement probe and how the benchmark sorts its rounds by it."""
import os

import pytest

from ember.bench.isolated import by_placement
from ember.bench.models import _placement_note
from ember.bench.placement import core_round_trip_ns, describe, placements


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


def _res():
    def rnd(ms, before, after):
        return {"median": ms / 1e3, "round_trips": [before, after]}
    res = {"ember": {"rounds": [rnd(7.0, 60, 65), rnd(9.0, 340, 350), rnd(7.2, 70, 70)]},
           "onnxruntime": {"rounds": [rnd(6.8, 61, 66), rnd(9.5, 330, 70)]}}
    where = iter(placements([t for v in res.values() for x in v["rounds"] for t in x["round_trips"]]))
    for v in res.values():
        for x in v["rounds"]:
            seen = {next(where), next(where)}
            x["placement"] = seen.pop() if len(seen) == 1 else None
    return res


def test_figures_are_given_apart_per_placement():
    res = _res()
    split = by_placement(res)
    assert split["near"] == {"ember": [0.007, 0.0072], "onnxruntime": [0.0068]}
    assert split["far"] == {"ember": [0.009]}  # (onnxruntime's second round moved while timing)
    note = _placement_note(res)
    assert "core round trip 60-350 ns" in note and "1 round(s) moved while timing" in note
    assert "near: ember 7.10 ms (2), onnxruntime 6.80 ms (1), ember/onnxruntime 1.04x" in note
    assert "far: ember 9.00 ms (1)" in note


def test_no_note_when_every_round_ran_in_one_placement():
    res = _res()
    for v in res.values():
        v["rounds"] = [x for x in v["rounds"] if x["placement"] == "near"]
    assert _placement_note(res) == ""
