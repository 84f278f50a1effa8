"""Candidates timed in the model: the untuned model exported once, a candidate run in its task's
calls beside the default; a crash there is the candidate's; without the model's file, alone."""
import pytest

from ember.kernels.common import host
from ember.testing.tune_faults import FaultyBuilder, FaultyPlace
from ember.tune.in_place import InPlace, export_untuned
from ember.tune.measure import Measurer, _build, _timed_in_place, measure_in_process
from ember.tune.tasks import extract_tasks


@pytest.fixture(scope="module")
def placed(small_model, tmp_path_factory):
    """The small model's tasks and its untuned executable exported."""
    tasks, exe = extract_tasks(small_model, host(), profile=False)
    return tasks, export_untuned(exe, str(tmp_path_factory.mktemp("place")))


def test_the_timer_runs_the_model_with_the_candidate_in_its_calls(placed):
    tasks, path = placed
    conv, other = tasks[0], tasks[1]
    timer = InPlace(path, conv.name).timer()
    assert timer.index and all(timer.exe.program["calls"][i]["kernel"] == conv.name for i in timer.index)
    kernel = _build(conv.builder, host(), {})[0]
    assert timer.fits(kernel) and not timer.fits(_build(other.builder, host(), {})[0])
    assert timer.time(kernel) > 0
    assert timer.exe._calls[timer.index[0]][0] is not kernel  # (the model's own calls are left alone)
    with pytest.raises(Exception, match="no call of kernel"):
        InPlace(path, "no_such_kernel").timer()


def test_candidates_timed_in_place_beside_the_default(placed):
    tasks, path = placed
    t = tasks[0]
    knob = next(iter(t.knobs.values()))
    other = next(c for c in knob.choices if c != knob.default)
    msgs = []
    out = measure_in_process(t.builder, host(), [(0, {}), (1, {knob.name: other})], repeat=3,
                             emit=msgs.append, place=InPlace(path, t.name))
    assert [m["i"] for m in out] == [0, 1]
    for m in out:
        assert m["error"] == "" and m["where"] == "in place"
        assert len(m["times"]) == len(m["baseline"]) == 3 and all(x > 0 for x in m["times"] + m["baseline"])
    assert out[0]["baseline"] == out[1]["baseline"]  # one default run per round, beside all of them
    # every run of a candidate announced first: a crash there is that candidate's
    starts = [m["i"] for m in msgs if m["event"] == "start"]
    assert starts.count(1) == 1 + 1 + 3  # its build and check, its warm-up, its 3 rounds
    # a task whose kernel the model does not have (here: another task's), or no model file: alone
    alone = measure_in_process(tasks[1].builder, host(), [(0, {})], repeat=2, place=InPlace(path, t.name))
    assert alone[0]["error"] == "" and "where" not in alone[0]
    res = Measurer(timeout=30, repeat=2).measure(t.builder, "llvm", [{}], InPlace(path + ".gone", t.name))
    assert res[0].ok and res[0].where == ""


def test_the_rounds_alternate_the_default_first_and_last():
    order = []

    class Timer:
        def time(self, kernel):
            order.append(kernel)
            return 1.0 if kernel == "ref" else 2.0

    held = [({"i": 0}, "a"), ({"i": 1}, "b")]
    _timed_in_place(Timer(), "ref", held, repeat=2, emit=lambda m: None)
    assert order == ["ref", "a", "b",          # warm-up
                     "ref", "a", "b",          # round 1: the default first
                     "b", "a", "ref"]          # round 2: last
    assert held[0][0]["times"] == [2.0, 2.0] and held[0][0]["baseline"] == [1.0, 1.0]


def test_a_candidate_that_crashes_only_in_the_model_is_recorded_and_the_rest_measured():
    cands = [{"split": 4}, {"fault": "crash_in_place"}, {"split": 16}]
    res = Measurer(timeout=20, repeat=2).measure(FaultyBuilder(), "llvm", cands, FaultyPlace())
    assert [r.error.split(":")[0] for r in res] == ["", "crash", ""], [r.error for r in res]
    assert "signal 11" in res[1].error
    assert all(r.where == "in place" and len(r.times) == 2 for r in (res[0], res[2]))


def test_the_report_says_where_candidates_were_timed():
    from ember.tune.tuner import _timed_where

    assert _timed_where(0, 5) == "in the model" and _timed_where(5, 0) == "alone" and _timed_where(0, 0) == "alone"
    assert _timed_where(2, 6) == "in the model (2 of 8 alone: their workers could not load it)"

