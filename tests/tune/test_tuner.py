"""ember tune end to end on a small model: records in the database, a compile applies them
(same outputs), a second run resumes; the cost model's transfer; Dask with two workers."""
import collections
import dataclasses
import itertools
import json
import math
import os
import shutil

import numpy as np
import pytest

import ember
from ember.tune.cost_model import CostModel
from ember.tune.database import open_database
from ember.tune.tuner import tune


def _pairs(db):
    """(workload, trace) of each trial: each trace's first record, but the in-model check's
    set-aside and passed-over records (verdicts on measured traces, not measurements)."""
    seen, out = set(), []
    for r in _measurements(db):
        if (r.workload, r.trace) not in seen:  # (later ones: measured again)
            seen.add((r.workload, r.trace))
            out.append((r.workload, r.trace))
    return out


def _measurements(db):
    from ember.tune.records import PASSED_OVER, SET_ASIDE

    return [r for r in db.records() if not r.error.startswith((SET_ASIDE, PASSED_OVER))]


def _measured_again(db) -> int:
    """Measurements of traces measured before, but the default's (one beside every batch):
    the apparent bests', each at most CONFIRM times in all."""
    from ember.tune.search import CONFIRM

    counts = collections.Counter((r.workload, r.trace) for r in _measurements(db))
    again = {k: n for k, n in counts.items() if k[1] != _default_trace(db, k[0])}
    assert all(n <= CONFIRM for n in again.values()), again
    return sum(n - 1 for n in again.values())


def _default_trace(db, workload):
    return db.records(workload=workload)[0].trace  # (the first measured of a task is its default)


def test_tune_records_apply_and_resume(small_model, tmp_path):
    dbpath = str(tmp_path / "t.db")
    # (validate=False: a kernel no faster than its default in the model could be set aside)
    rep = tune(small_model, dbpath, minutes=0.12, cluster="none", batch=4, progress=False, validate=False)
    assert rep.trials >= 4 and rep.tasks and rep.in_model is None
    assert rep.timed == "in the model" and "timed in the model" in rep.table()
    assert all(math.isfinite(t.default) for t in rep.tasks if t.trials)
    with open_database(dbpath) as db:
        first = _pairs(db)
        assert len(first) == rep.trials  # (never the same schedule twice as a trial)
        assert _measured_again(db) == rep.remeasured
        best = db.best_per_workload(db.records()[0].target)
        assert best and set(best) <= {t.workload for t in rep.tasks}
    x = np.random.default_rng(1).standard_normal((1, 16, 28, 28)).astype(np.float32)
    ref = ember.compile(small_model, cache=False).run(x)[0]
    exe = ember.compile(small_model, tuning_db=dbpath)
    assert exe.tuned_kernels
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-4, atol=1e-5)
    # a second run resumes: what was measured is not measured again
    rep2 = tune(small_model, dbpath, minutes=0.08, cluster="none", batch=4, progress=False, in_place=False)
    assert rep2.timed == "alone"
    with open_database(dbpath) as db:
        pairs = _pairs(db)
    assert len(pairs) == len(first) + rep2.trials
    with open_database(dbpath) as db:
        assert _measured_again(db) == rep.remeasured + rep2.remeasured
    report = json.loads(json.dumps(rep2.as_dict()))
    assert report["tasks"] and "trials_per_minute" in report


def test_tuned_kernels_are_checked_in_the_model(small_model, tmp_path, monkeypatch):
    """After the budget the tuned kernels are timed in place against the defaults; those
    slower there (here: every one, with a margin below -100%) are set aside, and a compile then
    applies none of them."""
    from ember.kernels.common import host
    from ember.runtime.placement import core_round_trip_ns
    from ember.tune.in_model import check_in_model
    from ember.tune.tasks import extract_tasks

    # (the check tries only candidates ranked above their default's own trace, and 6 s of
    # tuning may find none: CI once did. So a measured candidate of each task is made to rank
    # first, as a lucky measurement would, and the check, which times in the model, judges it.
    # Seeded before the copy, so the direct checks at the end judge the same candidates)
    dbpath = str(tmp_path / "unchecked.db")
    tune(small_model, dbpath, minutes=0.1, cluster="none", batch=4, progress=False, validate=False)
    with open_database(dbpath) as db:
        # (per task its fastest other trace that never failed; the database ranks a trace by the
        # mean of its records, so five lucky ones put it first unless it was 6x the default)
        lucky = {}
        failed = {(r.workload, r.trace) for r in db.records() if not r.ok}
        for r in sorted(db.records(), key=lambda r: r.median):
            if r.ok and (r.workload, r.trace) not in failed and r.trace != _default_trace(db, r.workload):
                lucky.setdefault(r.workload, dataclasses.replace(r, times=(1e-9,), created=0.0))
        assert lucky
        db.add_all([r for r in lucky.values() for _ in range(5)])
    checked = str(tmp_path / "t.db")
    shutil.copy(dbpath, checked)
    rep = tune(small_model, checked, minutes=0, cluster="none", batch=4, progress=False)
    assert rep.in_model.rows and all(r.untuned > 0 and r.tuned > 0 for r in rep.in_model.rows)
    assert {r.workload for r in rep.in_model.rows} == set(lucky)
    # (within one placement of the cores the model's kernels are a superset of the rows'; a
    # row's own figure is from the placement where it fared worst, which may be another)
    for where, _, untuned, _ in rep.in_model.placed:
        assert untuned >= sum(u for r in rep.in_model.rows for w, u, _ in r.times if w == where) * (1 - 1e-9)
    assert "in the model" in rep.table() and json.loads(json.dumps(rep.as_dict()))["in_model"]["rows"]
    # the checks below on records no check has judged yet
    _, exe = extract_tasks(small_model, host(), profile=False)
    import ember.runtime.placement as placement

    trip = core_round_trip_ns()
    with open_database(dbpath) as db:
        # where the cores cannot be seen (no round trip when tuning began), the machine in
        # another state than then (the untuned kernels 10x off the baseline): nothing is set
        # aside, and the note says why
        with monkeypatch.context() as m:
            m.setattr(placement, "core_round_trip_ns", lambda: None)
            check = check_in_model(small_model, db, exe, host(), rounds=1, margin=-2.0, baseline=1e3)
        assert check.rows and all(r.kept for r in check.rows) and "another state" in check.note
        assert db.best_per_workload(db.records()[0].target)
        # the cores moving during every round: nothing judged, nothing recorded, and the note says so
        with monkeypatch.context() as m:
            trips = itertools.cycle([50.0, 5000.0])
            m.setattr(placement, "core_round_trip_ns", lambda: next(trips))
            check = check_in_model(small_model, db, exe, host(), rounds=1, margin=-2.0, round_trip=50.0)
        assert not check.rows and "the cores moved during every round" in check.note
        assert db.best_per_workload(db.records()[0].target)
        if trip is not None:  # (two cores: where they are can be seen)
            # the cores placed otherwise than when tuning began (a round trip there of 0.5 ns:
            # every one measured now is "far" from it): where the cores can be seen the check
            # compares within each placement and takes no baseline, and its rounds are far ones.
            # (The cores held still, at the round trip measured above: on a loaded machine they
            # moved during both of a round's tries, and the check had nothing to judge)
            with monkeypatch.context() as m:
                m.setattr(placement, "core_round_trip_ns", lambda: trip)
                check = check_in_model(small_model, db, exe, host(), rounds=1, margin=-2.0, round_trip=0.5,
                                       baseline=1e3)
            assert check.note == "" and check.placed[0][0] == "far" and check.rows
            assert all(not r.kept and r.where == "far" for r in check.rows)
            assert any("(cores far)" in r.error for r in db.records())
        else:
            check = check_in_model(small_model, db, exe, host(), rounds=1, margin=-2.0)
            assert check.rows and not any(r.kept for r in check.rows) and check.note == ""
        assert check.untuned > 0 and check.tuned > 0
        assert db.best_per_workload(db.records()[0].target) == {}
    assert ember.compile(small_model, tuning_db=dbpath).tuned_kernels == []


def test_cost_model_transfers_across_workloads():
    rng = np.random.default_rng(0)
    m = CostModel()
    # workload A: the time grows with feature 0 (say, a spilled register block), not feature 1
    for i in range(40):
        f = [float(rng.integers(0, 8)), float(rng.normal())]
        m.add("A", f"t{i}", f, 1e-4 * (1 + f[0]))
    m.add("A", "bad", [3.0, 0.0], math.inf)
    assert m.fit()
    scores = m.predict([[0.0, 5.0], [7.0, -5.0]])  # workload B, never measured
    assert scores[0] > scores[1]
    assert CostModel().predict([[0.0, 0.0]]) is None  # untrained: no opinion


def test_dask_two_workers_never_time_together():
    from ember.testing.tune_faults import FaultyBuilder
    from ember.tune.runners import DaskRunner

    before = dict(os.environ)
    runner = DaskRunner(n_workers=2, timeout=20, repeat=3)
    try:
        assert runner.workers == 2
        # the nannies (this process, on a LocalCluster) leave its environment alone: Ember's
        # runs take their team size from OMP_NUM_THREADS, Dask would set it to 1 for good
        assert dict(os.environ) == before
        futs = [runner.submit(FaultyBuilder(), "llvm", [{"split": s}, {"split": 8}]) for s in (4, 16)]
        out = [f.result(timeout=120) for f in futs]
    finally:
        runner.close()
    (h1, a0, a1, r1), (h2, b0, b1, r2) = out
    assert all(r.ok for r in r1 + r2)
    assert h1 == h2 and (a1 <= b0 or b1 <= a0)  # one machine: one measurement at a time


def test_tune_on_a_local_dask_cluster(small_model, tmp_path):
    rep = tune(small_model, str(tmp_path / "d.db"), minutes=0.1, cluster="local", workers=2, batch=4,
               progress=False)
    assert rep.trials >= 4 and "Dask" in rep.where


def test_a_dynamic_model_is_tuned_at_its_likely_shape_and_its_compile_uses_the_records(small_model, tmp_path):
    """With no input shape given, a model with dynamic axes is tuned at its likely one (a batch
    of 1, 224x224); the dynamic model compiled with the records runs them in its kernels'
    static twins at that shape (ember.compiler.twin) and its symbolic kernels elsewhere."""
    import onnx

    m = onnx.load(small_model)
    for v in (m.graph.input[0], m.graph.output[0]):
        for axis, name in ((0, "batch"), (2, "h"), (3, "w")):
            v.type.tensor_type.shape.dim[axis].dim_param = name
    path = str(tmp_path / "dynamic.onnx")
    onnx.save(m, path)
    dbpath = str(tmp_path / "t.db")
    rep = tune(path, dbpath, minutes=0.1, cluster="none", batch=4, progress=False, validate=False)
    assert rep.input_shapes == {"x": (1, 16, 224, 224)} and rep.trials >= 4
    exe = ember.compile(path, tuning_db=dbpath)
    assert exe.tuned_kernels
    ref = ember.compile(path, cache=False)
    for shape in ((1, 16, 224, 224), (2, 16, 20, 24)):
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(exe.run(x)[0], ref.run(x)[0], rtol=1e-4, atol=1e-5)


def test_the_table_shows_a_task_the_budget_never_reached_without_times():
    from ember.tune.tuner import TaskReport, TuneReport

    done = TaskReport("a", "w1", "conv a", 2e-3, 2e-4, 1e-4, 8, 0, 3, [(3, 1e-4)])
    never = TaskReport("b", "w2", "mean b", 1e-5, math.inf, math.inf, 0, 0, None, [])
    rep = TuneReport("m", 60.0, 8, 0, [done, never], [(0.0, 3e-3)], 3e-3, 0, "here")
    rows = rep.table().splitlines()
    assert "200.0" in rows[1] and "100.0" in rows[1] and "2.00x" in rows[1]
    assert "inf" not in rows[2] and rows[2].split()[3:5] == ["-", "-"]


def test_bf16_kernels_are_tuned_and_their_records_apply_to_a_bf16_compile(small_model, tmp_path):
    from ember.target import Target

    if not Target.host().has_feature("avx512bf16"):
        pytest.skip("the host has no AVX512-BF16")
    dbpath = str(tmp_path / "b.db")
    rep = tune(small_model, dbpath, minutes=0.1, cluster="none", batch=4, progress=False, validate=False,
               precision="bf16", only=lambda t: "add" in t.description)  # (the 1x1 conv: blocked input, bf16)
    assert rep.trials >= 1
    x = np.random.default_rng(1).standard_normal((1, 16, 28, 28)).astype(np.float32)
    ref = ember.compile(small_model, cache=False, precision="bf16").run(x)[0]
    tuned = ember.compile(small_model, tuning_db=dbpath, precision="bf16")
    assert tuned.tuned_kernels  # (the bf16 workloads' records: a float32 compile has other workloads)
    assert not ember.compile(small_model, tuning_db=dbpath, cache=False).tuned_kernels
    np.testing.assert_allclose(tuned.run(x)[0], ref, rtol=1e-3, atol=1e-3)
