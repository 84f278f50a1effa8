"""The search's view of its measurements: a trace by the mean of its measurements, and the
apparent best measured again until it has CONFIRM of them (the winner's curse)."""
import math

from ember.kernels.common import host
from ember.tune.search import CONFIRM, TaskSearch
from ember.tune.tasks import extract_tasks


def test_an_apparent_best_is_measured_again_and_judged_by_its_mean(small_model):
    tasks, _ = extract_tasks(small_model, host(), profile=False)
    s = TaskSearch(tasks[0], host(), 0)
    default, *cands = s.propose(None, 4)
    assert default.trace == s.candidate({}).trace and len(cands) >= 2
    lucky, steady = cands[:2]
    s.record(default, 100e-6)
    assert s.best == default.trace and s.incumbent() is None and s.history == []  # (the default: no gain, never re-measured)
    assert s.record(lucky, 80e-6) and s.record(steady, 90e-6) is False
    assert s.best == lucky.trace and s.incumbent().trace == lucky.trace
    assert s.incumbent() is None  # (while that re-measurement is out, no second one)
    # measured again, the lucky one proves slower (mean 95 us): the best is the other now
    assert s.record(lucky, 110e-6, again=True) is False
    assert s.best == steady.trace and math.isclose(s.best_time, 90e-6) and s.trials == 3
    assert math.isclose(s.measured[lucky.trace], 95e-6)
    for _ in range(CONFIRM - 1):
        assert s.incumbent().trace == steady.trace
        s.record(steady, 88e-6, again=True)
    assert len(s.samples[steady.trace]) == CONFIRM and s.incumbent() is None and s.best == steady.trace
    # a failed re-measurement (a crash on the second run) rules a trace out for good
    s.record(steady, math.inf, again=True)
    assert s.best == lucky.trace and s.failures == 0 and s.trials == 3
    # the default measured again: its first time stays the scale of the search's times (a scale
    # following its least time would drift, and favour the candidates measured late) ...
    s.default_measured(94e-6)
    assert s.default_time == 100e-6 and s.best == lucky.trace
    # ... and candidates are compared with the mean of its times in a candidate's place
    s.note(default.trace, 80e-6)
    assert s.rebest() is False and math.isclose(s.baseline, 90e-6) and s.best == default.trace  # (no candidate's gain)
    assert s.incumbent() is None and math.isclose(s.speedup, 1.0)


def test_the_default_measured_beside_a_batch_before_its_own_is_a_parent_like_any(small_model):
    # with two workers, the batch that measures the default beside it may come back before the
    # batch that proposed the default: a later proposal then took its trace as a parent
    tasks, _ = extract_tasks(small_model, host(), profile=False)
    s = TaskSearch(tasks[0], host(), 0)
    default, *_ = s.propose(None, 4)
    s.default_measured(100e-6)
    s.note_default(default, 100e-6)
    assert s.propose(None, 4)  # (a KeyError before)
