"""One object per kernel: cached by content across builds, compiled in parallel workers."""
import numpy as np

from ember.codegen.llvm import build
from ember.loop import compute as te
from ember.loop.lower import lower
from ember.loop.schedule import Schedule


def _kernels(n, scale=1.0):
    out = []
    for k in range(n):
        a = te.placeholder((64,), "float32", "a")
        b = te.compute((64,), lambda i, k=k: a[i] * (k + scale), "b")
        out.append(lower(Schedule([b]), [a, b], f"times_{k}"))
    return out


def test_parallel_workers_build_what_one_process_builds(tmp_path, monkeypatch):
    import ember.codegen.llvm.objects as objects

    monkeypatch.setattr(objects, "PARALLEL_MIN_SECONDS", 0)  # small kernels: force the workers
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBER_COMPILE_JOBS", "2")
    stats: dict = {}
    mod = build(_kernels(6), stats=stats)  # 6 new kernels: two worker processes
    x = np.arange(64, dtype=np.float32)
    for k in range(6):
        y = np.empty_like(x)
        mod[f"times_{k}"](x, y)
        np.testing.assert_array_equal(y, x * (k + 1))
    assert all(not stats[f"times_{k}"]["cached"] and stats[f"times_{k}"]["llvm_opt"] > 0 for k in range(6))
    # the same kernels in another library (plus one new): objects come from the cache
    stats2: dict = {}
    mod2 = build(_kernels(7), stats=stats2)
    assert [stats2[f"times_{k}"]["cached"] for k in range(7)] == [True] * 6 + [False]
    y = np.empty_like(x)
    mod2["times_6"](x, y)
    np.testing.assert_array_equal(y, x * 7)


def test_workers_run_the_loop_passes_and_stay_for_the_next_build(tmp_path, monkeypatch):
    """With ``passes`` the workers get the lowered kernels as text and run the loop passes
    too (their time is reported); the worker process serves the next build as well."""
    import ember.codegen.llvm.objects as objects

    monkeypatch.setattr(objects, "PARALLEL_MIN_SECONDS", 0)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBER_COMPILE_JOBS", "2")
    objects._POOL.close()
    stats: dict = {}
    mod = build(_kernels(4, scale=2.0), stats=stats, passes=True)
    pids = [w.proc.pid for w in objects._POOL.workers]
    # (with 2 cores: one worker beside this process, which compiles too)
    assert len(pids) == 1 and all(stats[f"times_{k}"]["loop_passes"] >= 0 for k in range(4))
    x = np.arange(64, dtype=np.float32)
    for k in range(4):
        y = np.empty_like(x)
        mod[f"times_{k}"](x, y)
        np.testing.assert_array_equal(y, x * (k + 2.0))
    build(_kernels(3, scale=5.0), passes=True)
    assert [w.proc.pid for w in objects._POOL.workers] == pids
    objects._POOL.close()
    assert objects._POOL.workers == []


def test_a_dying_worker_is_a_compile_error_naming_the_kernel(tmp_path, monkeypatch):
    import pytest

    import ember.codegen.llvm.objects as objects
    from ember.errors import CompileError

    monkeypatch.setattr(objects, "PARALLEL_MIN_SECONDS", 0)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBER_COMPILE_JOBS", "2")
    objects._POOL.close()  # (workers read the environment when they start)
    monkeypatch.setenv("EMBER_TEST_WORKER_EXIT", "1")  # read by the worker: it exits mid-job
    with pytest.raises(CompileError, match="compile worker for kernel 'times_[0-9]+' died"):
        build(_kernels(12, scale=7.0), passes=True)  # (enough for the worker to take one)
    monkeypatch.delenv("EMBER_TEST_WORKER_EXIT")
    mod = build(_kernels(2, scale=7.0), passes=True)  # a fresh pool works again
    y = np.empty(64, np.float32)
    mod["times_1"](np.ones(64, np.float32), y)
    np.testing.assert_array_equal(y, 8.0)
