"""How the benchmark sorts its rounds by where the cores were (ember.runtime.placement)."""
from ember.bench.isolated import by_placement
from ember.bench.models import _placement_note
from ember.runtime.placement import placements


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


def test_paired_ratios_take_each_round_against_its_neighbour():
    from ember.bench.isolated import paired_ratio

    res = _res()
    # round 1: 7.0 vs 6.8 (both near); round 2: ember far, onnxruntime moved: not a pair
    assert abs(paired_ratio(res, "ember", "onnxruntime") - 7.0 / 6.8) < 1e-12
    assert paired_ratio(res, "ember", "openvino") is None
