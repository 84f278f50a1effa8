"""Candidates built and timed in isolated children: a crash, a hang, a wrong answer, a schedule
error and an exiting worker are each recorded as a failure, and the candidates after them are
still measured."""
import json

from ember.testing.tune_faults import FaultyBuilder
from ember.tune.measure import Measurer, measure_in_process


def test_every_failure_is_recorded_and_the_rest_measured():
    cands = [{"fault": "none"}, {"fault": "crash"}, {"fault": "none", "split": 4}, {"fault": "hang"},
             {"fault": "wrong"}, {"fault": "error"}, {"fault": "exit"}, {"fault": "none", "split": 16}]
    res = Measurer(timeout=6, repeat=3).measure(FaultyBuilder(), "llvm", cands)
    errors = [r.error.split(":")[0] for r in res]
    assert errors == ["", "crash", "", "timeout", "wrong", "build", "crash", ""], [r.error for r in res]
    assert "signal 11" in res[1].error  # SIGSEGV, in the kernel
    assert "exit 3" in res[6].error
    assert "fails on purpose" in res[5].error
    for r in (res[0], res[2], res[7]):
        assert r.ok and len(r.times) == 3 and all(t > 0 for t in r.times)
        assert len(r.baseline) == 3 and r.ratio is not None  # the default timed beside each batch
        assert json.loads(r.trace)  # the schedule's trace, to store and replay
    assert json.loads(res[2].decisions)["split"] == 4
    assert not res[1].ok and res[1].median == float("inf")


def test_in_process_measurement_checks_against_the_default():
    from ember.kernels.common import host

    msgs = []
    out = measure_in_process(FaultyBuilder(256), host(), [(0, {"split": 16}), (1, {"fault": "wrong"})],
                             repeat=2, emit=msgs.append)
    assert [m["event"] for m in msgs] == ["ready", "start", "result", "start", "result"]
    assert out[0]["error"] == "" and len(out[0]["times"]) == 2
    assert out[1]["error"].startswith("wrong: max difference")


def test_inputs_fill_twice_the_last_cache_level_in_copies():
    from ember.tune.measure import input_sets

    assert input_sets(3 << 20, 32 << 20) == 22  # a 3 MiB conv's inputs: 22 copies, 66 MiB
    assert input_sets(100 << 20, 32 << 20) == 1  # larger than the caches: one set is cold already
    assert input_sets(1000, 32 << 20) == 64  # a small kernel: at most 64
    assert input_sets(0, 32 << 20) == 64


def test_each_timed_call_takes_the_next_copy_and_the_default_is_timed_beside_it():
    """ABBA: candidate then default, default then candidate; every call on the next set."""
    from ember.tune.measure import _timed

    calls = []

    class Kernel:
        def __init__(self, name):
            self._cfunc = lambda *ptrs: calls.append((name, ptrs[0]))

    sets = [[i, "out"] for i in range(5)]
    times, baseline = _timed(Kernel("cand"), sets, repeat=3, batch_seconds=0.0, ref=Kernel("ref"))
    assert len(times) == len(baseline) == 3
    timed = calls[2:]  # (after the warm-up and the call that sizes the batches)
    assert [n for n, _ in timed] == ["cand", "ref", "ref", "cand", "cand", "ref"]
    assert [p for _, p in timed] == [0, 1, 2, 3, 4, 0]


def test_a_result_timed_beside_the_default_compares_by_the_pairs_ratio():
    from ember.tune.measure import Result
    from ember.tune.tuner import _comparable

    r = Result("{}", times=(2.0, 6.0, 3.0), baseline=(1.0, 2.0, 3.0))
    assert r.ratio == 2.0  # the median of 2, 3 and 1
    assert _comparable(r, 0.5) == (1.0, 1.5, 0.5)
    assert _comparable(Result("{}", times=(2.0,)), 0.5) == (2.0,)  # no baseline: as measured
    assert _comparable(Result("{}", error="crash: signal 11"), 0.5) == ()
