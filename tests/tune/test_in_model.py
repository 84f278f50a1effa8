"""The in-model check: the best few candidates alone of each workload timed in place; the
one least slow there against its default is kept (a runner-up over the best alone), or the
default where none wins; and the figures per placement of the cores."""
import numpy as np
import pytest

import ember
from ember.kernels.common import host
from ember.tune import in_model
from ember.tune.database import open_database
from ember.tune.in_model import InModel, InModelCheck, check_in_model
from ember.tune.records import PASSED_OVER, SET_ASIDE
from ember.tune.tasks import extract_tasks
from ember.tune.tuner import tune
from ember.compiler.workload import target_name


def _fake_rounds(rank_us: dict):
    """A stand-in for the profiles: every call 100 us untuned; a tuned kernel of the j-th
    executable (the j-th best alone per workload) ``rank_us[j]`` us, in one placement."""
    def rounds(exes, inputs, n, start):
        leasts = []
        for j, e in enumerate(exes):
            tuned = set(getattr(e, "tuned_kernels", ())) if j else set()
            leasts.append({i: (name, (rank_us[j] if name in tuned else 100) * 1e-6)
                           for i, (name, _) in enumerate(e.kernel_calls)})
        return {"near": (leasts, n)}
    return rounds


@pytest.fixture(scope="module")
def tuned_db(small_model, tmp_path_factory):
    """Records of both tasks, at least three candidates each, no in-model verdict yet."""
    path = str(tmp_path_factory.mktemp("inmodel") / "t.db")
    tune(small_model, path, minutes=0.15, cluster="none", batch=4, progress=False, validate=False)
    return path


def _copy(src, tmp_path):
    with open_database(src) as a, open_database(str(tmp_path / "c.db")) as b:
        b.add_all(a.records())
    return str(tmp_path / "c.db")


def _checked(small_model, path, monkeypatch, rank_us):
    monkeypatch.setattr(in_model, "_rounds_by_placement", _fake_rounds(rank_us))
    _, exe = extract_tasks(small_model, host(), profile=False)
    with open_database(path) as db:
        before = db.ranked_per_workload(target_name(host()), 3)
        check = check_in_model(small_model, db, exe, host(), rounds=1)
        after = db.best_per_workload(target_name(host()))
        verdicts = [r for r in db.records() if r.error.startswith((PASSED_OVER, SET_ASIDE))]
    return before, check, after, verdicts


def test_a_runner_up_that_wins_in_place_is_kept_over_the_best_alone(small_model, tuned_db, tmp_path, monkeypatch):
    path = _copy(tuned_db, tmp_path)
    # the best alone 20% slower in place than the default, the runner-up 10% faster, the third 5%
    before, check, after, verdicts = _checked(small_model, path, monkeypatch, {1: 120, 2: 90, 3: 95})
    two = {w for w, recs in before.items() if len(recs) >= 2}
    assert two, "the tuning run left no workload with two candidates"
    for r in check.rows:
        if r.workload in two:
            assert r.kept and r.rank == 2 and r.tried >= 2 and r.where == "near"
            assert (r.untuned, r.tuned) == pytest.approx((100e-6 * _calls(r), 90e-6 * _calls(r)))
            assert after[r.workload].trace == before[r.workload][1].trace   # a compile applies the runner-up
    assert {(v.workload, v.trace) for v in verdicts} == {(w, before[w][0].trace) for w in two}
    assert all(v.error.startswith(PASSED_OVER) for v in verdicts)
    assert "a runner-up" in check.summary()
    # and it runs: the same outputs as the untuned model
    x = np.random.default_rng(1).standard_normal((1, 16, 28, 28)).astype(np.float32)
    ref = ember.compile(small_model, cache=False).run(x)[0]
    exe = ember.compile(small_model, tuning_db=path)
    assert exe.tuned_kernels
    np.testing.assert_allclose(exe.run(x)[0], ref, rtol=1e-4, atol=1e-5)


def _calls(row) -> int:
    return round(row.times[0][1] / 100e-6)


def test_the_default_where_none_of_the_best_wins_in_place(small_model, tuned_db, tmp_path, monkeypatch):
    path = _copy(tuned_db, tmp_path)
    before, check, after, verdicts = _checked(small_model, path, monkeypatch, {1: 120, 2: 110, 3: 104})
    assert check.rows and not any(r.kept for r in check.rows)
    assert after == {} and all(v.error.startswith(SET_ASIDE) for v in verdicts)
    # each set aside the best alone (the cut: it and everything measured slower)
    assert {(v.workload, v.trace) for v in verdicts} == {(w, recs[0].trace) for w, recs in before.items()}
    assert all(r.rank == min(3, r.tried) for r in check.rows if r.tried > 1)   # the least slow: the third
    assert ember.compile(small_model, tuning_db=path).tuned_kernels == []


def test_the_best_alone_kept_where_it_wins(small_model, tuned_db, tmp_path, monkeypatch):
    path = _copy(tuned_db, tmp_path)
    before, check, after, verdicts = _checked(small_model, path, monkeypatch, {1: 80, 2: 90, 3: 85})
    assert check.rows and all(r.kept and r.rank == 1 for r in check.rows)
    assert {w: r.trace for w, r in after.items()} == {w: recs[0].trace for w, recs in before.items()}
    assert verdicts == []   # nothing to record: a compile applies the best alone already


def test_defaults_and_slower_candidates_are_not_tried(small_model, tuned_db, tmp_path, monkeypatch):
    path = _copy(tuned_db, tmp_path)
    monkeypatch.setattr(in_model, "_rounds_by_placement", _fake_rounds({1: 120, 2: 90, 3: 95}))
    _, exe = extract_tasks(small_model, host(), profile=False)
    with open_database(path) as db:
        ranked = db.ranked_per_workload(target_name(host()), 3)
        # the runner-up named each workload's default: only the best alone is tried
        check = check_in_model(small_model, db, exe, host(), rounds=1,
                               defaults={w: recs[1].trace for w, recs in ranked.items() if len(recs) > 1})
    assert check.rows and all(r.tried == 1 and not r.kept for r in check.rows)


def test_the_in_model_figures_per_placement_of_the_cores():
    """A tuned kernel's figures in each placement the check saw; its row shows the placement
    where it fared worst, and each placement's kept figure is the untuned one less what the
    kept kernels saved there."""
    a = InModel("conv_a", "wa", (("near", 100e-6, 90e-6), ("far", 120e-6, 150e-6)), kept=False)
    b = InModel("conv_b", "wb", (("near", 50e-6, 40e-6), ("far", 60e-6, 55e-6)), kept=True, rank=2, tried=3)
    assert (a.where, a.untuned, a.tuned) == ("far", 120e-6, 150e-6)
    assert (b.where, b.untuned, b.tuned) == ("far", 60e-6, 55e-6)  # (0.92 of its default there, 0.80 near)
    check = InModelCheck((a, b), (("near", 3, 1e-3, 0.98e-3), ("far", 1, 1.3e-3, 1.33e-3)))
    assert (check.untuned, check.tuned) == (1e-3, 0.98e-3)
    assert abs(check.kept_in("near") - 0.99e-3) < 1e-12  # conv_b's 10 us saved
    assert abs(check.kept_in("far") - 1.295e-3) < 1e-12
    text = check.summary()
    assert "near (3 rounds): 1.00 -> 0.99 ms (1.01x); far (1 rounds): 1.30 -> 1.29 ms (1.00x)" in text
    assert "1 tuned kernel(s) kept (1 of them a runner-up" in text
    assert "1 set aside, slower there than their default: conv_a 150.0 vs 120.0 us (far)" in text
