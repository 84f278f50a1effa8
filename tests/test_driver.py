"""The kernel front door end to end: build, cache, export, reload without LLVM, debug output."""
import os
import subprocess
import sys
import textwrap

import numpy as np

import ember
from ember import kernels as K


def test_build_cache_and_export(tmp_path):
    s, args = K.matmul(40, 24, 16)
    mod = ember.build(s, args, "mm")
    s, args = K.matmul(40, 24, 16)
    stats: dict = {}
    mod2 = ember.build(s, args, "mm", stats=stats)
    assert stats["mm"]["cached"] and "(link)" not in stats  # a cache hit (its time: the benchmark's figure)
    a = np.random.rand(40, 16).astype("float32")
    b = np.random.rand(16, 24).astype("float32")
    c = np.empty((40, 24), "float32")
    mod2["mm"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    path = str(tmp_path / "mm.so")
    mod.export(path)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    code = textwrap.dedent(f"""
        import sys, numpy as np
        from ember.runtime import load_module
        m = load_module({path!r})
        a, b = np.load({str(tmp_path / 'a.npy')!r}), np.load({str(tmp_path / 'b.npy')!r})
        c = np.empty((40, 24), 'float32')
        m['mm'](a, b, c)
        assert 'llvmlite' not in sys.modules, 'llvmlite was imported'
        print(float(np.abs(c - a @ b).max()))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout) < 1e-4


def test_debug_prints_loop_program_and_llvm(tmp_path):
    code = textwrap.dedent("""
        from ember import kernels as K
        import ember
        s, args = K.softmax(4, 16)
        ember.build(s, args, "sm")
    """)
    env = dict(os.environ, EMBER_DEBUG="3", EMBER_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert "def sm(" in out.stderr  # the loop program
    assert "define" in out.stderr  # the LLVM IR


def test_bench_ops_quick_json(tmp_path):
    path = tmp_path / "ops.json"
    out = subprocess.run([sys.executable, "-m", "ember.cli", "bench-ops", "--quick", "--only", "add",
                          "--repeat", "3", "--json", str(path)], capture_output=True, text=True, check=True)
    import json

    res = json.loads(path.read_text())
    assert res["peak_gflops"] > 0
    assert {r["kernel"] for r in res["rows"]} == {"add", "add broadcast"}
    assert "ember vs numpy" in out.stdout


def test_target_string_overrides_cpu():
    from ember.target import Target

    t = Target.from_string("llvm -mcpu=x86-64")
    assert t.vector_bits == 128 and t.cpu == "x86-64"
    s, args = K.matmul(9, 10, 11, target=t)
    mod = ember.build(s, args, "mm", target="llvm -mcpu=x86-64")
    a = np.random.rand(9, 11).astype("float32")
    b = np.random.rand(11, 10).astype("float32")
    c = np.empty((9, 10), "float32")
    mod["mm"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_cache_hit_loads_no_llvm(tmp_path):
    code = textwrap.dedent("""
        import sys, numpy as np, ember
        from ember import kernels as K
        s, args = K.softmax(8, 40)
        k = ember.build(s, args, "sm")["sm"]
        x = np.random.rand(8, 40).astype("float32"); y = np.empty_like(x)
        k(x, y)
        assert np.allclose(y.sum(-1), 1, atol=1e-5)
        print("llvmlite.binding" in sys.modules)
    """)
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert first.stdout.strip() == "True"  # the cold build compiled with LLVM
    assert second.stdout.strip() == "False"  # the warm one only opened the cached library
