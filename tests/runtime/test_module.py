"""Loaded modules: kernel lookup, argument validation, the compile cache, export and reload."""
import ctypes.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ember import ArgumentError, CompileError, DTypeError, EmberError, ShapeError
from ember import runtime as rt
from ember.codegen.llvm import build, export_library
from ember.loop import Buffer, Cast, For, PrimFunc, Store, Var

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def add_kernel(name="add", n=16, dtype="float32"):
    i = Var("i")
    A, B, C = (Buffer(x, (n,), dtype) for x in "ABC")
    return PrimFunc(name, (A, B, C), For(i, 0, n, "serial", Store(C, A[i] + B[i], (i,))))


def rows_kernel():
    """``T[i, j] = S[i, j] * k + i`` over a symbolic number of rows; ``k`` is a plain scalar."""
    i, j, n, k = Var("i"), Var("j"), Var("n"), Var("k")
    S, T = Buffer("S", (n, 4)), Buffer("T", (n, 4))
    return PrimFunc("rows", (S, T, n, k), For(i, 0, n, "serial", For(j, 0, 4, "serial", Store(
        T, S[i, j] * Cast("float32", k) + Cast("float32", i), (i, j)))))


@pytest.fixture(scope="module")
def mod():
    return build([add_kernel(), rows_kernel()], name="runtime_tests")


def f32(*shape):
    return rt.array(np.random.default_rng(0).standard_normal(shape).astype(np.float32))


def test_lookup(mod):
    assert mod["add"] is mod.add
    assert set(mod) == {"add", "rows"} and "rows" in mod and len(mod) == 2
    assert "add(A: float32[16]" in repr(mod["add"])
    with pytest.raises(ArgumentError, match="no kernel 'mul'.*add"):
        mod["mul"]
    with pytest.raises(AttributeError, match="mul"):
        mod.mul


def test_numpy_and_ndarray_arguments(mod):
    a, b, c = f32(16), f32(16), rt.empty(16)
    mod.add(a, b.numpy(), c)
    np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())


@pytest.mark.parametrize("n", [0, 1, 5, 100])
def test_symbolic_rows(mod, n):
    s, t = f32(n, 4), rt.zeros((n, 4))
    mod.rows(s, t, 3)  # n comes from the shapes; k is passed after the arrays
    want = s.numpy() * 3 + np.arange(n, dtype=np.float32)[:, None]
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6, atol=1e-6)  # a*b+c may fuse


def test_prepared_arguments_run_as_the_call_and_are_checked_as_it(mod):
    # (what a profiler times: the native call alone, the checks made before)
    s, t = f32(5, 4), rt.zeros((5, 4))
    cargs = mod.rows.prepare(s, t, 3)
    assert len(cargs) == 4 and cargs[2:] == (5, 3)  # two pointers, then n (from the shapes) and k
    mod.rows.run_prepared(cargs)
    want = s.numpy() * 3 + np.arange(5, dtype=np.float32)[:, None]
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(ShapeError, match=r"'T' \(#1\) has shape \(4, 4\)"):
        mod.rows.prepare(f32(5, 4), f32(4, 4), 1)


def test_wrong_count(mod):
    with pytest.raises(ArgumentError, match=r"'add' takes 3 argument\(s\).*got 2"):
        mod.add(f32(16), f32(16))
    with pytest.raises(ArgumentError, match="'rows' takes 3"):
        mod.rows(f32(3, 4), f32(3, 4))


def test_wrong_dtype(mod):
    with pytest.raises(DTypeError, match="'add'.*'B' \\(#1\\) has dtype float64, expected float32"):
        mod.add(f32(16), rt.empty(16, "float64"), f32(16))


def test_wrong_shape(mod):
    with pytest.raises(ShapeError, match=r"'add'.*'C' \(#2\) has shape \(8,\), expected \(16,\)"):
        mod.add(f32(16), f32(16), f32(8))
    with pytest.raises(ShapeError, match=r"'T' \(#1\) has shape \(4, 4\), expected \(n, 4\) with n=3"):
        mod.rows(f32(3, 4), f32(4, 4), 1)
    with pytest.raises(ShapeError, match=r"'S' \(#0\) has shape \(3, 5\)"):
        mod.rows(f32(3, 5), f32(3, 4), 1)
    with pytest.raises(ShapeError, match="'S'"):
        mod.rows(f32(12), f32(3, 4), 1)


def test_misaligned_raises_instead_of_copying(mod):
    base = rt.empty(17)
    shifted = base.numpy()[1:]  # one element (4 bytes) past a 64-byte boundary
    with pytest.raises(ArgumentError, match=r"'add'.*'A' \(#0\) is not 64-byte aligned.*4 bytes off"):
        mod.add(shifted, f32(16), f32(16))


def test_non_contiguous_and_non_array(mod):
    with pytest.raises(ArgumentError, match="'B'.*C-contiguous"):
        mod.add(f32(16), f32(32).numpy()[::2], f32(16))
    with pytest.raises(ArgumentError, match="'A'.*numpy array or ember NDArray, got list"):
        mod.add([0.0] * 16, f32(16), f32(16))
    with pytest.raises(ArgumentError, match="'rows'.*scalar"):
        mod.rows(f32(3, 4), f32(3, 4), "three")


def test_outputs_must_be_writable_and_distinct(mod):
    a = f32(16)
    frozen = f32(16).numpy()
    frozen.flags.writeable = False
    mod.add(frozen, a, f32(16))  # read-only inputs are fine
    with pytest.raises(ArgumentError, match="'C' \\(#2\\) is written by the kernel but is read-only"):
        mod.add(a, a, frozen)
    with pytest.raises(ArgumentError, match="'C' \\(#2\\) is the same memory as argument 'A'"):
        mod.add(a, f32(16), a)


def test_ndarray_subclasses_are_accepted(mod):
    class Tagged(np.ndarray):
        pass

    a = f32(16).numpy().view(Tagged)
    c = rt.empty(16)
    mod.add(a, a, c)
    np.testing.assert_array_equal(c.numpy(), 2 * np.asarray(a))


def test_cache_hit_compiles_and_links_nothing_and_works(ember_cache_dir):
    # (what a hit costs is a benchmark's figure: a test timing it fails on a loaded machine)
    funcs = [add_kernel("cached_add", 32, "int32")]
    first = build(funcs)
    stats: dict = {}
    second = build(funcs, stats=stats)
    assert stats == {"cached_add": {"cached": True}}  # (no LLVM phase, no "(link)")
    assert second.path == first.path and os.path.dirname(second.path) == ember_cache_dir
    assert os.path.exists(second.path[:-3] + ".json")
    a = rt.array(np.arange(32, dtype=np.int32))
    c = rt.empty(32, "int32")
    second.cached_add(a, a, c)
    np.testing.assert_array_equal(c.numpy(), 2 * np.arange(32))


def test_export_and_load_without_llvmlite(tmp_path, mod):
    path = tmp_path / "kernels.so"
    export_library(mod, path)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from ember.runtime import array, empty, load_module
        m = load_module({str(path)!r})
        a = array(np.arange(16, dtype=np.float32))
        c = empty(16)
        m["add"](a, a, c)
        assert (c.numpy() == 2 * np.arange(16)).all()
        s = array(np.ones((5, 4), np.float32)); t = empty((5, 4))
        m.rows(s, t, 2)
        assert (t.numpy() == 2 + np.arange(5)[:, None]).all()
        assert "llvmlite" not in sys.modules, "loading a module imported llvmlite"
        print("OK", sorted(m))
    """)
    env = dict(os.environ, PYTHONPATH=REPO)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert "OK ['add', 'rows']" in res.stdout


def test_export_from_funcs(tmp_path):
    path = export_library([add_kernel("exported", 8)], tmp_path / "sub" / "x.so")
    m = rt.load_module(path)
    a, c = rt.array(np.ones(8, np.float32)), rt.empty(8)
    m.exported(a, a, c)
    assert (c.numpy() == 2).all()


def test_load_rejects_foreign_libraries(tmp_path):
    with pytest.raises(EmberError, match="no such"):
        rt.load_module(tmp_path / "missing.so")
    libm = ctypes.util.find_library("m")
    if libm is None or not os.path.exists(libm):
        libm = "/lib/x86_64-linux-gnu/libm.so.6"
    if os.path.exists(libm):
        with pytest.raises(EmberError, match="not an Ember kernel library"):
            rt.load_module(libm)


def test_missing_compiler(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/bin/cc")
    with pytest.raises(CompileError, match="install gcc or clang, or set CC"):
        build([add_kernel("needs_cc", 24)])


def test_linker_failure_names_kernel(monkeypatch):
    monkeypatch.setenv("CC", "false")
    with pytest.raises(CompileError, match="'link_fails'.*linking failed"):
        build([add_kernel("link_fails", 24)])


def test_debug_output(monkeypatch, capfd):
    monkeypatch.setenv("EMBER_DEBUG", "4")
    build([add_kernel("debugged", 40)])
    err = capfd.readouterr().err
    assert "loop program debugged" in err
    assert "optimized LLVM IR" in err and "define" in err
    assert "assembly" in err and "ret" in err


def test_concurrent_builds_share_the_cache(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        from ember.codegen.llvm import build
        from ember.loop import Buffer, For, PrimFunc, Store, Var
        from ember import runtime as rt
        i = Var("i"); A = Buffer("A", (64,)); B = Buffer("B", (64,))
        m = build([PrimFunc("race", (A, B), For(i, 0, 64, "serial", Store(B, A[i] * 3.0, (i,))))])
        a = rt.array(np.ones(64, np.float32)); b = rt.empty(64)
        m.race(a, b)
        assert (b.numpy() == 3).all()
    """)
    env = dict(os.environ, PYTHONPATH=REPO, EMBER_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for p in procs:
        assert p.wait() == 0, p.stderr.read()
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".so")]) == 1
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]  # no temp files left
