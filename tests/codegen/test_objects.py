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

    monkeypatch.setattr(objects, "PARALLEL_MIN_IR_BYTES", 0)  # small kernels: force the workers
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
