"""The cache folder under its size bound: least recently used entries go first, fresh ones and
files Ember did not make stay, and a model whose entries were pruned compiles again."""
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import ember
from ember import cache_size
from ember.compiler import cache as kept

KEY = "ab" * 32


def _file(path, size, age):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"\0" * size)
    t = time.time() - age
    os.utime(path, (t, t))
    return path


def _key(i):
    return f"{i:064x}"


@pytest.mark.parametrize("text,want", [("", 5 << 30), ("0", 0), ("123", 123), ("2K", 2048), ("1.5G", 3 << 29),
                                       ("500MiB", 500 << 20), ("1 t", 1 << 40)])
def test_the_bound_reads_bytes_or_a_suffixed_size(monkeypatch, text, want):
    monkeypatch.setenv("EMBER_CACHE_SIZE", text)
    assert cache_size.size_bound() == want


def test_a_bound_that_is_not_a_size_says_what_to_write(monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_SIZE", "lots")
    with pytest.raises(cache_size.CacheSizeError, match="EMBER_CACHE_SIZE='lots' is not a size.*5G"):
        cache_size.size_bound()


def test_entries_group_a_library_with_its_object_and_metadata(tmp_path):
    root = str(tmp_path)
    for suffix in (".json", ".o", ".so"):
        _file(os.path.join(root, KEY + suffix), 10, 3600)
    _file(os.path.join(root, "objects", _key(1) + ".o"), 7, 3600)
    _file(os.path.join(root, "objects", _key(1) + ".json"), 3, 7200)
    _file(os.path.join(root, "models", _key(2), "program.json"), 5, 100)
    _file(os.path.join(root, "models", _key(2), "constants.bin"), 50, 100)
    _file(os.path.join(root, "index", "model-" + _key(3)), 1, 100)
    # not Ember's, or not an entry: never listed, never deleted
    _file(os.path.join(root, "zoo", "resnet18.onnx"), 1000, 10 ** 6)
    _file(os.path.join(root, "tuning.db"), 1000, 10 ** 6)
    _file(os.path.join(root, "host-0123.json"), 10, 10 ** 6)
    got = {e.kind: e for e in cache_size.entries(root)}
    assert sorted(got) == ["index", "library", "model", "object"]
    lib = got["library"]
    # the file a lookup checks first goes first
    assert [os.path.basename(p) for p in lib.paths] == [KEY + ".so", KEY + ".o", KEY + ".json"] and lib.size == 30
    assert got["object"].size == 10 and got["object"].used == pytest.approx(time.time() - 3600, abs=5)
    assert got["model"].paths[0].endswith("program.json") and got["model"].size == 55


def test_prune_deletes_the_least_recently_used_down_to_the_low_water_mark(tmp_path):
    root = str(tmp_path)
    for i in range(10):  # 10 objects of 100 bytes, object i last used i hours ago
        _file(os.path.join(root, "objects", _key(i) + ".o"), 90, 3600 * i + 700)
        _file(os.path.join(root, "objects", _key(i) + ".json"), 10, 3600 * i + 700)
    _file(os.path.join(root, "zoo", "big.onnx"), 10 ** 6, 10 ** 6)
    report = cache_size.prune(bound=500, root=root)
    assert report == {"before": 1000, "after": 400, "deleted": 6, "bound": 500}
    left = sorted(f for f in os.listdir(os.path.join(root, "objects")) if f.endswith(".o"))
    assert left == [_key(i) + ".o" for i in range(4)]
    assert os.path.exists(os.path.join(root, "zoo", "big.onnx"))
    # under the bound: nothing goes
    assert cache_size.prune(bound=500, root=root)["deleted"] == 0


def test_prune_keeps_entries_used_in_the_last_ten_minutes(tmp_path):
    root = str(tmp_path)
    for i in range(4):
        _file(os.path.join(root, "objects", _key(i) + ".o"), 100, 60 * i)  # all used minutes ago
    _file(os.path.join(root, "objects", _key(9) + ".o"), 100, 7200)
    report = cache_size.prune(bound=100, root=root)
    assert report["deleted"] == 1 and report["after"] == 400


def test_prune_removes_temporary_files_a_dead_process_left(tmp_path):
    root = str(tmp_path)
    old = _file(os.path.join(root, ".meta-x1.json"), 10, 2 * 86400)
    young = _file(os.path.join(root, ".meta-x2.json"), 10, 60)  # being written now
    _file(os.path.join(root, "models", ".ember-model-abc", "constants.bin"), 10, 2 * 86400)
    cache_size.prune(bound=0, root=root)
    assert not os.path.exists(old) and os.path.exists(young)
    assert not os.path.exists(os.path.join(root, "models", ".ember-model-abc"))


def test_a_hit_marks_the_entry_used(tmp_path, monkeypatch):
    """A library or kernel object found in the cache is touched, so a prune takes the unused ones
    first (a warm build finds its library: the kernels' objects, needed only to link another
    library, age)."""
    from ember.loop import compute as te
    from ember.loop.schedule import Schedule

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    a = te.placeholder((64,), "float32", "a")
    b = te.compute((64,), lambda i: a[i] + 1.0, "b")
    c = te.compute((64,), lambda i: a[i] * 2.0, "c")
    ember.build(Schedule(b), [a, b], "plus_one")
    old = time.time() - 7200
    for dirpath, _, files in os.walk(tmp_path):
        for f in files:
            os.utime(os.path.join(dirpath, f), (old, old))
    ember.build(Schedule(b), [a, b], "plus_one")  # the library's hit
    used = {e.kind: e.used for e in cache_size.entries(str(tmp_path))}
    assert used["library"] > time.time() - 60 and used["object"] < time.time() - 3600
    ember.build([(Schedule(b), [a, b], "plus_one"), (Schedule(c), [a, c], "times_two")])  # a new library
    got = [e.used for e in cache_size.entries(str(tmp_path)) if e.kind == "object"]
    # plus_one's object and the lanes' hand-off (every library's) were used (their hits touched),
    # times_two's and the new shared module's are new; only the first library's shared module
    # (its metadata) was not used
    assert len(got) == 5 and sum(u < time.time() - 3600 for u in got) == 1


def test_a_model_whose_cache_entries_were_pruned_compiles_again(conv_net_path, tmp_path, monkeypatch):
    """Whatever a prune took (the kept executable, its library, kernel objects), the next compile
    gives the same outputs."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    path = str(tmp_path / "net.onnx")
    shutil.copy(conv_net_path, path)
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    want = ember.compile(path).run(x)[0]
    kept.wait()
    old = time.time() - 7200
    for dirpath, _, files in os.walk(tmp_path / "cache"):
        for f in files:
            os.utime(os.path.join(dirpath, f), (old, old))
    # the libraries and half the objects go (the least recently used first: all equally old)
    cache_size.prune(bound=1, root=str(tmp_path / "cache"))
    assert not [e for e in cache_size.entries(str(tmp_path / "cache")) if e.kind == "library"]
    exe = ember.compile(path)
    assert "load kept executable" not in exe.compile_times
    np.testing.assert_array_equal(exe.run(x)[0], want)


def test_ember_cache_reports_prunes_and_clears(tmp_path):
    root = str(tmp_path)
    for i in range(3):
        _file(os.path.join(root, "objects", _key(i) + ".o"), 1000, 3600 * (i + 1))
    _file(os.path.join(root, "zoo", "m.onnx"), 10, 10)
    env = {**os.environ, "EMBER_CACHE_DIR": root, "EMBER_CACHE_SIZE": "2K"}

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "ember.cli", "cache", *args], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout

    shown = cli()
    assert "2.9 KiB of 2.0 KiB" in shown and "kernel objects" in shown
    assert "2.9 KiB -> 1000 B, 2 entries deleted" in cli("--prune")
    assert "1 entries deleted" in cli("--clear")
    assert os.listdir(os.path.join(root, "objects")) == [] and os.path.exists(os.path.join(root, "zoo", "m.onnx"))


def test_a_compile_prunes_an_oversized_cache_at_most_hourly(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_CACHE_SIZE", "1K")
    stale = _file(os.path.join(str(tmp_path), "objects", _key(7) + ".o"), 4096, 7200)
    cache_size.maybe_prune()
    for t in [t for t in __import__("threading").enumerate() if t.name == "ember-cache-prune"]:
        t.join(30)
    assert not os.path.exists(stale)
    stale = _file(stale, 4096, 7200)
    cache_size.maybe_prune()  # (pruned less than an hour ago: not again)
    assert os.path.exists(stale)
