"""The fuzzer (ember.testing.fuzz): its mutators, its child-process runner, and CI's short fixed-seed
fuzz run of both front doors: no crash, no hang, no exception that is not an EmberError.
The long run is ``python bench/fuzz.py --minutes 30``."""
import json
import os
import random
import sys

import pytest

pytest.importorskip("onnx")

from ember.testing import fuzz as F  # noqa: E402

CI_SEED = 2024


def _failures(summary) -> str:
    lines = [summary.table()]
    for r in summary.records:
        lines.append(f"\n{r['kind']} case {r['index']} ({r['outcome']}, {r['signature']}), from {r['source']}: "
                     f"{'; '.join(r['mutations'])}\n  {r['detail'][:500]}\n{r['traceback'][-1500:]}")
    return "\n".join(lines)


# -- CI's fuzz run ------------------------------------------------------------------------------

def test_short_fuzz_of_onnx_models_finds_no_crash_hang_or_other_exception(tmp_path):
    summary = F.fuzz(kind="onnx", seed=CI_SEED, max_cases=250, out=str(tmp_path))
    assert summary.cases == 250
    assert summary.total("ok") > 20 and summary.total("ember_error") > 50  # both doors of the check are hit
    assert not summary.records, _failures(summary)


def test_short_fuzz_of_exports_finds_no_crash_hang_or_other_exception(tmp_path):
    # damage the checksum catches, and (resealed) damage to the program, metadata and weights
    # that the structure checks behind it must catch
    summary = F.fuzz(kind="export", seed=CI_SEED, max_cases=150, out=str(tmp_path))
    assert summary.cases == 150
    assert summary.total("ok") > 5 and summary.total("ember_error") > 50
    assert not summary.records, _failures(summary)


# -- the runner ---------------------------------------------------------------------------------

def test_each_outcome_is_told_apart_in_the_child(tmp_path):
    z = F.Zygote()
    try:
        def run(action, timeout=20.0):
            req = {"kind": "selftest", "action": action, "env": {}, "memory_mb": 0, "timeout": timeout,
                   "log": str(tmp_path / f"{action}.log")}
            return z.request(req)

        assert run("ok").outcome == "ok"
        assert run("ember_error").outcome == "ember_error"
        res = run("other_exception")
        assert res.outcome == "other_exception" and "ValueError: self test" in res.detail
        res = run("segfault")
        assert (res.outcome, res.detail.split()[0]) == ("crash", "SIGSEGV")
        assert "Fatal Python error" in (tmp_path / "segfault.log").read_text()  # faulthandler's stack
        res = run("exit")
        assert res.outcome == "crash" and "exit 3" in res.detail
        res = run("hang", timeout=2.0)
        assert res.outcome == "hang" and 2.0 <= res.seconds < 10
        assert "_child_case" in (tmp_path / "hang.log").read_text()  # where it hung, dumped before the kill
        assert run("ok").outcome == "ok"  # the zygote lives on
    finally:
        z.close()


def test_a_saved_failure_replays(tmp_path):
    corpus = F.Corpus(F.seed_models())
    case = corpus.make_case("onnx", 0, 0)
    case.data = b"\x08\x07" + bytes(40)  # not a model: an EmberError when replayed
    d = F.save_failure(str(tmp_path), case, F.Result("crash", "SIGSEGV (signal 11)", phase="compile"), 0)
    meta = json.loads(open(os.path.join(d, "case.json")).read())
    assert meta["kind"] == "onnx" and meta["seed"] == case.seed and "--replay" in meta["replay"]
    res = F.replay(d)
    assert res.outcome == "ember_error" and "ModelError" in res.detail


# -- the mutators -------------------------------------------------------------------------------

def test_cases_are_deterministic_and_mutated():
    corpus = F.Corpus(F.seed_models())
    a = [corpus.make_case("onnx", 5, i) for i in range(30)]
    b = [corpus.make_case("onnx", 5, i) for i in range(30)]
    assert [(c.data, c.mutations, c.seed) for c in a] == [(c.data, c.mutations, c.seed) for c in b]
    assert sum(c.data != corpus.onnx[c.source] for c in a) >= 25
    assert any(m.startswith("bytes:") for c in a for m in c.mutations)
    assert any(m.startswith("m_") for c in a for m in c.mutations)


def test_every_onnx_mutator_runs_on_every_seed():
    import onnx

    for name, data in F.seed_models().items():
        for fn in set(F.ONNX_MUTATORS):
            for k in range(5):
                m = onnx.ModelProto()
                m.ParseFromString(data)
                try:
                    fn(m, random.Random(k))
                except (ValueError, TypeError, IndexError):
                    continue  # protobuf refusing a value: mutate_onnx records it and goes on
                m.SerializeToString()


def test_elf_regions_and_json_mutations():
    data = open(sys.executable, "rb").read()
    if data[:4] != b"\x7fELF":
        pytest.skip("the interpreter is not an ELF file")
    regions = F.elf_regions(data)
    assert regions["elf_header"] == (0, 64) and "section_headers" in regions and ".text" in regions
    doc = {"a": 1, "b": [1, 2, {"c": "x"}]}
    blob = b"\x7fELF" + bytes(60) + b'junk{"kernels": [1, 2, 3], "name": "k"}\x00tail'
    jr = [v for k, v in F.elf_regions(blob).items() if k.startswith("json:")]
    assert len(jr) == 1 and blob[jr[0][0]:jr[0][1]].startswith(b'{"kernels"')
    rng = random.Random(0)
    for _ in range(50):
        d = json.loads(json.dumps(doc))
        F.mutate_json(d, rng)
        out, _ = F.mutate_export(blob, rng, F.elf_regions(blob), [blob])
        assert isinstance(out, bytes)
