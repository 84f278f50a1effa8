"""A compiled model file is kept: its next compile with the same settings loads the executable
(program and folded constants) instead of compiling again; anything else compiles."""
import json
import os
import shutil

import numpy as np

import ember
from ember.compiler import cache as kept


def _x():
    return np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)


def test_a_second_compile_of_a_model_file_loads_the_kept_executable(conv_net_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    path = str(tmp_path / "net.onnx")
    shutil.copy(conv_net_path, path)
    first = ember.compile(path)
    kept.wait()
    assert "load kept executable" not in first.compile_times
    second = ember.compile(path)
    assert "load kept executable" in second.compile_times and second.weights_mapped
    np.testing.assert_array_equal(second.run(_x())[0], first.run(_x())[0])
    assert [i.name for i in second.input_info] == [i.name for i in first.input_info]
    # the schedules a loop profiler rebuilds from come from a compile without the cache
    assert [n for _, _, n in second.kernel_sources] == [n for _, _, n in first.kernel_sources]
    # other settings are another compile; cache=False compiles
    assert "load kept executable" not in ember.compile(path, opt_level=2).compile_times
    assert "load kept executable" not in ember.compile(path, cache=False).compile_times


def test_a_compile_under_the_tuners_decisions_is_not_kept(conv_net_path, tmp_path, monkeypatch):
    """Kernels made under ``decisions()`` are not the defaults: such a compile neither loads the
    kept executable nor keeps its own for the next plain compile to load."""
    from ember.loop.knobs import decisions

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    path = str(tmp_path / "net.onnx")
    shutil.copy(conv_net_path, path)
    with decisions({"conv.columns": 1}):
        tuned = ember.compile(path)
    kept.wait()
    plain = ember.compile(path)
    assert "load kept executable" not in plain.compile_times
    kept.wait()
    with decisions({"conv.columns": 1}):
        assert "load kept executable" not in ember.compile(path).compile_times
    assert "load kept executable" in ember.compile(path).compile_times
    np.testing.assert_allclose(tuned.run(_x())[0], plain.run(_x())[0], rtol=1e-5, atol=1e-5)


def test_a_changed_model_file_compiles_again(conv_net_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    path = str(tmp_path / "net.onnx")
    shutil.copy(conv_net_path, path)
    ember.compile(path)
    kept.wait()
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # rewritten
    assert "load kept executable" not in ember.compile(path).compile_times


def test_a_damaged_kept_executable_is_a_miss_not_an_error(conv_net_path, tmp_path, monkeypatch):
    """A kept program that fails its checks, or constants cut short, compile the model again."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    path = str(tmp_path / "net.onnx")
    shutil.copy(conv_net_path, path)
    want = ember.compile(path).run(_x())[0]
    kept.wait()
    (folder,) = [os.path.join(tmp_path / "cache" / "models", d) for d in os.listdir(tmp_path / "cache" / "models")]
    doc_path = os.path.join(folder, "program.json")
    with open(doc_path) as f:
        doc = json.load(f)
    doc["program"]["calls"][0]["args"][0] = 10 ** 6  # a slot that does not exist
    with open(doc_path, "w") as f:
        json.dump(doc, f)
    exe = ember.compile(path)
    assert "load kept executable" not in exe.compile_times
    np.testing.assert_array_equal(exe.run(_x())[0], want)
    kept.wait()  # (the damaged one was removed and the compile kept a new one)
    assert "load kept executable" in ember.compile(path).compile_times
    with open(os.path.join(folder, "constants.bin"), "r+b") as f:
        f.truncate(16)
    exe = ember.compile(path)
    assert "load kept executable" not in exe.compile_times


def test_the_kept_executable_is_written_at_the_lowest_priority(conv_net_path, tmp_path, monkeypatch):
    """The background write takes the cores' idle time, not the script's first runs': its
    thread's priority is the lowest (19) where the OS schedules threads apart."""
    import threading

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    path = str(tmp_path / "net.onnx")
    shutil.copy(conv_net_path, path)
    seen = []
    write = kept._idle_priority

    def spy():
        write()
        seen.append((threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    monkeypatch.setattr(kept, "_idle_priority", spy)
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    ember.compile(path, wait=True)
    kept.wait()
    assert seen == [("ember-keep-model", 19)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # (the caller's is its own)
    assert "load kept executable" in ember.compile(path).compile_times
