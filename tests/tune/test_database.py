"""The tuning records database, the same tests on SQLite (a file) and on a real PostgreSQL server
(started by tests/tune/conftest.py)."""
import io
import json
import math
import multiprocessing
import os
import socket

import pytest

import ember
from ember.errors import EmberError, TuneError
from ember.tune.database import Database, open_database
from ember.tune.records import PASSED_OVER, SET_ASIDE, Record

T = "llvm -mcpu=znver3"


def rec(workload="w1", trace="[]", times=(1.0,), target=T, created=0.0, **kw):
    return Record(workload=workload, target=target, trace=trace, decisions=kw.pop("decisions", "{}"),
                  times=times, created=created, **kw)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    """Where a fresh, empty store lives: an SQLite file path, or a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "tuning.db")
    return request.getfixturevalue("postgres_schema_url")


@pytest.fixture
def db(url):
    with open_database(url) as d:
        yield d


# -- Record -----------------------------------------------------------------------------------


def test_record_ok_median_and_json_round_trip():
    r = rec(times=(0.3, 0.1, 0.2), task="conv2d 1x8", features="[1.0, 2.5]", decisions='{"tile": 8}', created=12.5)
    assert r.ok and r.median == 0.2
    line = r.to_json()
    assert "\n" not in line and json.loads(line)["times"] == [0.3, 0.1, 0.2]
    assert Record.from_json(line) == r
    assert Record.from_json(line.encode()) == r
    bad = rec(times=(), error="crash: signal 11")
    assert not bad.ok and bad.median == math.inf
    assert not rec(times=(1.0,), error="wrong: max diff 3.1").ok
    assert not rec(times=()).ok
    assert Record.from_json(bad.to_json()) == bad


def test_record_from_json_tolerates_missing_optional_and_unknown_keys():
    r = Record.from_json('{"workload": "w", "target": "llvm", "trace": [["split", "s", ["i", 8], {}]], "later": 1}')
    assert r == Record("w", "llvm", '[["split", "s", ["i", 8], {}]]', "{}")
    assert r.times == () and r.error == "" and r.created == 0.0 and not r.ok


@pytest.mark.parametrize("line, says", [
    ("not json", "not JSON"),
    ("[1, 2]", "must be a JSON object, not list"),
    ('{"workload": "w", "target": "llvm"}', "lacks 'trace'"),
    ('{"workload": "w", "target": "llvm", "trace": "[]", "times": "fast"}', "times"),
    ('{"workload": "w", "target": "llvm", "trace": "[]", "times": [1, null]}', "times"),
    ('{"workload": 3, "target": "llvm", "trace": "[]"}', "Record.workload must be a str"),
    ('{"workload": "w", "target": "llvm", "trace": "[]", "created": "yesterday"}', "created"),
])
def test_record_from_json_errors_name_the_line(line, says):
    with pytest.raises(TuneError, match="records.jsonl:7") as e:
        Record.from_json(line, where="records.jsonl:7")
    assert says in str(e.value)
    assert isinstance(e.value, EmberError) and ember.TuneError is TuneError


# -- the store ----------------------------------------------------------------------------------


def test_add_best_records_count(db):
    assert db.best("w1", T) is None and db.count() == 0 and db.records() == []
    db.add(rec(trace="[0]", times=(0.3, 0.2, 0.4)))
    db.add(rec(trace="[1]", times=(0.1, 0.15, 0.9)))   # median 0.15: the best
    db.add(rec(trace="[2]", times=(0.5,)))
    db.add(rec(trace="[3]", times=(0.01,), target="cuda"))
    best = db.best("w1", T)
    assert best.trace == "[1]" and best.median == 0.15 and best.times == (0.1, 0.15, 0.9)
    assert db.best("w1", "cuda").trace == "[3]"
    assert db.best("w2", T) is None
    assert [r.trace for r in db.records()] == ["[0]", "[1]", "[2]", "[3]"]   # insertion order
    assert [r.trace for r in db.records("w1", T)] == ["[0]", "[1]", "[2]"]
    assert [r.trace for r in db.records(target="cuda")] == ["[3]"]
    assert [r.trace for r in db.records(limit=2)] == ["[0]", "[1]"]
    assert db.count() == 4 and db.count("w1") == 4 and db.count("w1", T) == 3 and db.count(target="cuda") == 1


def test_fields_survive_and_defaults_are_filled(db):
    r = rec(trace='[["split", "conv", ["oc", 8], {}]]', times=(1e-6, 2.5e-6), task="conv2d 1x32x112x112 -> 1x32x112x112",
            features="[0.5, 1e-09]", decisions='{"tile_oc": 8, "unroll": true}', ember_version="0.0.9",
            created=1700000000.123456)
    db.add(r)
    assert db.records() == [r]
    db.add(rec(trace="[9]"))
    filled = db.records()[-1]
    assert filled.ember_version == ember.__version__ and filled.created > 1.6e9


def test_failed_records_are_never_best(db):
    db.add_all([rec(trace="[0]", times=(), error="crash: signal 11"),
                rec(trace="[1]", times=(0.001,), error="wrong: max diff 3.1"),   # fast but wrong
                rec(trace="[2]", times=(), error="timeout: 10 s")])
    assert db.best("w1", T) is None
    assert db.best_per_workload(T) == {}
    assert db.count() == 3 and db.count(ok_only=True) == 0
    db.add(rec(trace="[3]", times=(0.5,)))
    assert db.best("w1", T).trace == "[3]" and db.count(ok_only=True) == 1


def test_workloads_and_best_per_workload(db):
    assert db.add_all(rec(w, trace=f"[{i}]", times=(t,), target=tg) for i, (w, t, tg) in enumerate([
        ("wb", 0.4, T), ("wa", 0.2, T), ("wb", 0.1, T), ("wa", 0.2, T), ("wc", 0.05, "cuda"),
        ("wd", 0.0, T)])) == 6
    db.add(rec("we", trace="[6]", times=(), error="build: ScheduleError loop i"))
    assert db.workloads() == ["wb", "wa", "wc", "wd", "we"]   # first added first
    assert db.workloads(T) == ["wb", "wa", "wd", "we"] and db.workloads("cuda") == ["wc"]
    best = db.best_per_workload(T)
    assert sorted(best) == ["wa", "wb", "wd"]          # "we" has no ok record
    assert best["wb"].trace == "[2]"
    assert best["wa"].trace == "[1]"                   # a tie goes to the first added
    assert best["wd"].median == 0.0
    assert {w: r.trace for w, r in best.items()} == {w: db.best(w, T).trace for w in best}
    assert list(db.best_per_workload("cuda")) == ["wc"] and db.best_per_workload("none") == {}


def test_set_aside_traces_and_slower_ones_are_not_applied(db):
    """A trace set aside (slower in the model than the default) is not applied, nor anything
    measured slower than it was: the default is, until tuning finds better."""
    db.add_all([rec("wa", trace="[1]", times=(1.0,)), rec("wa", trace="[2]", times=(2.0,)),
                rec("wa", trace="[3]", times=(3.0,)), rec("wb", trace="[1]", times=(1.0,)),
                rec("wa", trace="[1]", times=(1.0,), target="cuda")])
    db.add(rec("wa", trace="[2]", times=(), error=f"{SET_ASIDE}: 12.0 us a run against 10.0 us untuned"))
    assert {w: r.trace for w, r in db.best_per_workload(T).items()} == {"wa": "[1]", "wb": "[1]"}
    db.add(rec("wa", trace="[1]", times=(), error=f"{SET_ASIDE}: 11.0 us a run against 10.0 us untuned"))
    assert sorted(db.best_per_workload(T)) == ["wb"]      # nothing faster than [1]: the default
    assert db.best("wa", T) is None and db.best("wb", T).trace == "[1]"
    assert db.best_per_workload("cuda")["wa"].trace == "[1]"   # another target's verdict
    db.add(rec("wa", trace="[4]", times=(0.5,)))           # later tuning found better
    assert db.best_per_workload(T)["wa"].trace == "[4]" and db.best("wa", T).trace == "[4]"
    assert db.count("wa", T, ok_only=True) == 4


def test_export_import_round_trip(db, tmp_path):
    records = [rec(f"w{i % 3}", trace=f"[{i}]", times=(0.1 * (i + 1),) if i % 4 else (), error="" if i % 4 else "x",
                   created=1000.0 + i, features="[1.5]" if i % 2 else "", ember_version="0.0.9") for i in range(10)]
    db.add_all(records)
    path = tmp_path / "out.jsonl"
    assert db.export_jsonl(path) == 10
    lines = path.read_text().splitlines()
    assert len(lines) == 10 and [Record.from_json(x) for x in lines] == records
    with open_database(tmp_path / "other.db") as other:
        assert other.import_jsonl(str(path)) == 10
        assert other.records() == records
        assert other.best_per_workload(T) == db.best_per_workload(T)
    buf = io.StringIO()                               # open files too, text or binary
    assert db.export_jsonl(buf) == 10 and buf.getvalue() == path.read_text()
    raw = io.BytesIO()
    assert db.export_jsonl(raw) == 10 and raw.getvalue().decode() == path.read_text()


def test_import_skips_duplicates(db, tmp_path):
    db.add_all([rec(trace="[0]", created=1.0), rec(trace="[1]", created=2.0)])
    path = tmp_path / "r.jsonl"
    lines = [rec(trace="[0]", created=1.0).to_json(),      # already there
             rec(trace="[0]", created=3.0).to_json(),      # the same trace measured again: kept
             "",                                           # blank lines are skipped
             rec(trace="[2]", created=4.0).to_json(),
             rec(trace="[2]", created=4.0).to_json()]      # repeated in the file
    path.write_text("\n".join(lines) + "\n")
    assert db.import_jsonl(path) == 2
    assert [(r.trace, r.created) for r in db.records()] == [("[0]", 1.0), ("[1]", 2.0), ("[0]", 3.0), ("[2]", 4.0)]
    assert db.import_jsonl(path) == 0                      # importing again adds nothing
    with open(path) as f:
        assert db.import_jsonl(f) == 0
    assert db.count() == 4


def test_import_stops_at_a_bad_line_and_adds_nothing(db, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(rec(trace="[0]", created=1.0).to_json() + '\n{"workload": "w1"}\n')
    with pytest.raises(TuneError, match=r"bad\.jsonl:2.*lacks 'target', 'trace'"):
        db.import_jsonl(path)
    assert db.count() == 0
    with pytest.raises(TuneError, match="cannot read tuning records file"):
        db.import_jsonl(tmp_path / "missing.jsonl")


def test_reopen_keeps_records_and_schema_version(url):
    with open_database(url) as d:
        d.add(rec(trace="[0]", times=(0.2,)))
        assert d.schema_version == 1
    with open_database(url) as d:      # the tables exist already: nothing is created again
        assert d.count() == 1 and d.best("w1", T).trace == "[0]" and d.schema_version == 1
        assert isinstance(d, Database) and "password" not in d.url
    with pytest.raises(TuneError, match="closed"):
        d.count()


def test_newer_schema_is_refused(url):
    from sqlalchemy import text

    with open_database(url) as d, d._engine.begin() as conn:
        conn.execute(text("UPDATE ember_tuning_meta SET value = '99' WHERE key = 'schema_version'"))
    with pytest.raises(TuneError, match="schema version 99, newer than this Ember reads"):
        open_database(url)


def test_between_sqlite_and_postgresql(postgres_schema_url, tmp_path):
    records = [rec(f"w{i % 2}", trace=f'[["split", "s", ["i", {i}], {{}}]]', times=(i * 1e-4 + 1e-5, 2e-4),
                   created=1.7e9 + i / 7, task=f"task {i}", features=json.dumps([i / 3, 1e-12]), ember_version="0.0.9") for i in range(8)]
    with open_database(tmp_path / "a.db") as lite, open_database(postgres_schema_url) as pg:
        lite.add_all(records)
        assert lite.export_jsonl(tmp_path / "a.jsonl") == 8
        assert pg.import_jsonl(tmp_path / "a.jsonl") == 8
        assert pg.records() == records                 # floats exact through both databases
        assert pg.best_per_workload(T) == lite.best_per_workload(T)
        pg.add(rec("w9", trace="[9]", times=(0.5,), created=5.0))
        assert pg.export_jsonl(tmp_path / "b.jsonl") == 9
        assert lite.import_jsonl(tmp_path / "b.jsonl") == 1   # only the new one
        assert lite.records() == pg.records()


def _writer(url, name, n, start):
    start.wait()
    with open_database(url) as d:
        for i in range(n):
            d.add(rec(f"w-{name}", trace=f"[{i}]", times=(0.001 * (i + 1),)))
            if i % 10 == 0:
                d.count()


def test_processes_write_the_same_database_at_once(url):
    open_database(url).close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    n = 60
    procs = [ctx.Process(target=_writer, args=(url, name, n, start)) for name in ("a", "b")]
    for p in procs:
        p.start()
    start.set()
    with open_database(url) as d:        # and this process writes in batches meanwhile
        for i in range(5):
            d.add_all(rec("w-main", trace=f"[{i}, {j}]", times=(1.0,)) for j in range(10))
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        assert d.count() == 2 * n + 50
        assert d.count("w-a") == d.count("w-b") == n
        assert [r.trace for r in d.records("w-a")] == [f"[{i}]" for i in range(n)]
        assert d.best("w-b", T).trace == "[0]"


def test_forked_child_gets_its_own_connections(db):
    db.add(rec(trace="[0]"))
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=lambda: db.add(rec(trace="[child]")))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    db.add(rec(trace="[1]"))
    assert [r.trace for r in db.records()] == ["[0]", "[child]", "[1]"]


# -- opening --------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server_names_the_url_without_its_password():
    port = _closed_port()
    with pytest.raises(TuneError) as e:
        open_database(f"postgresql://tuner:s3cret@127.0.0.1:{port}/tuning")
    msg = str(e.value)
    assert f"postgresql+psycopg://tuner:***@127.0.0.1:{port}/tuning" in msg
    assert "s3cret" not in msg and "server is running" in msg


def test_bad_urls_and_paths(tmp_path):
    with pytest.raises(TuneError, match=r"'mysql' databases are not supported"):
        open_database("mysql://u:pw@host/db")
    with pytest.raises(TuneError, match=r"cannot be read") as e:
        open_database("postgresql://u:pw@host:notaport/db")
    assert "pw" not in str(e.value).split("cannot be read")[0] and "u:***@" in str(e.value)
    with pytest.raises(TuneError, match="is a directory"):
        open_database(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(TuneError, match="cannot create the folder"):
        open_database(blocker / "sub" / "t.db")
    with pytest.raises(TuneError, match="not supported|cannot be read"):
        open_database("nosuchdialect://x/y")


def test_paths_and_urls_of_sqlite(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with open_database("~/sub/t.db") as d:
        d.add(rec())
        assert d.url == f"sqlite:///{tmp_path}/sub/t.db"
    with open_database(f"sqlite:///{tmp_path}/sub/t.db") as d:
        assert d.count() == 1
    monkeypatch.chdir(tmp_path)
    with open_database("rel.db") as d:
        assert os.path.exists(tmp_path / "rel.db") and d.count() == 0


def test_passed_over_traces_and_the_ranked_candidates(db):
    """A trace passed over in the model (it lost there to a runner-up) is not applied, nor
    ranked; the runner-up is, though slower alone. The ranking: distinct traces, least median
    first, applicable ones only."""
    db.add_all([rec("wa", trace="[1]", times=(1.0,)), rec("wa", trace="[2]", times=(2.0,)),
                rec("wa", trace="[1]", times=(1.5,)), rec("wa", trace="[3]", times=(3.0,)),
                rec("wa", trace="[4]", times=(), error="wrong: max diff 3.1"),
                rec("wb", trace="[1]", times=(1.0,)), rec("wa", trace="[0]", times=(0.5,), target="cuda")])
    ranked = db.ranked_per_workload(T, 2)
    assert {w: [r.trace for r in rs] for w, rs in ranked.items()} == {"wa": ["[1]", "[2]"], "wb": ["[1]"]}
    assert ranked["wa"][0].median == 1.0 and list(db.ranked_per_workload(T, 5, workloads=["wb"])) == ["wb"]
    db.add(rec("wa", trace="[1]", times=(), error=f"{PASSED_OVER}: its rank 1 alone lost to rank 2's in place"))
    assert db.best_per_workload(T)["wa"].trace == "[2]" and db.best("wa", T).trace == "[2]"
    assert [r.trace for r in db.ranked_per_workload(T, 5)["wa"]] == ["[2]", "[3]"]
    assert db.best_per_workload("cuda")["wa"].trace == "[0]"
    db.add(rec("wa", trace="[2]", times=(), error=f"{SET_ASIDE}: 12.0 us a run against 10.0 us untuned"))
    assert "wa" not in db.best_per_workload(T) and "wa" not in db.ranked_per_workload(T, 5)


def test_a_trace_is_judged_by_all_its_measurements_and_not_applied_once_it_failed(db):
    """Measured more than once, a trace ranks by the mean of its records' medians, not by its
    luckiest (the tuner re-measures its apparent bests); a trace that failed once (a crash, a
    hang, a wrong output) is not applied, however fast it was the other times."""
    db.add_all([rec("w", trace="[1]", times=(1.0,)), rec("w", trace="[2]", times=(1.5,)),
                rec("w", trace="[3]", times=(0.5,))])
    assert db.best("w", T).trace == "[3]"
    db.add(rec("w", trace="[3]", times=(3.5,)))  # (mean 2.0: its first measurement was luck)
    ranked = db.ranked_per_workload(T, 3)["w"]
    assert [r.trace for r in ranked] == ["[1]", "[2]", "[3]"] and ranked[2].median == 0.5
    assert db.best_per_workload(T)["w"].trace == "[1]" and db.best("w", T).trace == "[1]"
    db.add(rec("w", trace="[1]", times=(), error="crash: signal 11"))
    assert [r.trace for r in db.ranked_per_workload(T, 3)["w"]] == ["[2]", "[3]"]
    assert db.best_per_workload(T)["w"].trace == "[2]" and db.best("w", T).trace == "[2]"
    # a set-aside trace cuts by its score too: [3] (2.0) set aside leaves [2] (1.5)
    db.add(rec("w", trace="[3]", times=(), error=f"{SET_ASIDE}: 12.0 us a run against 10.0 us untuned"))
    assert [r.trace for r in db.ranked_per_workload(T, 3)["w"]] == ["[2]"]
