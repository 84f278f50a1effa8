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
