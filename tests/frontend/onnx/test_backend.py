"""Ember as an onnx Backend: device support, prepare compiles, run executes, errors are named."""
import numpy as np
import pytest
from onnx.backend.base import Backend, BackendRep

from ember.errors import DTypeError, EmberError, ShapeError, UnsupportedOpError
from ember.frontend.onnx import backend

from .helpers import model, node, vi

RELU = model([node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])


def test_is_an_onnx_backend_for_the_cpu():
    assert issubclass(backend.EmberBackend, Backend)
    assert backend.supports_device("CPU") and backend.supports_device("cpu:0")
    assert not backend.supports_device("CUDA")


def test_prepare_compiles_and_run_executes():
    rep = backend.prepare(RELU)
    assert isinstance(rep, BackendRep)
    x = np.array([-1.0, 2.0], np.float32)
    (y,) = rep.run([x])
    np.testing.assert_array_equal(y, [0.0, 2.0])
    (y,) = backend.run_model(RELU, [x])
    np.testing.assert_array_equal(y, [0.0, 2.0])
    with pytest.raises(EmberError, match="device 'CUDA' is not supported"):
        backend.prepare(RELU, "CUDA")


def test_prepare_waits_for_the_models_own_kernels(monkeypatch, tmp_path):
    """onnx's runner checks the first run: on tier-1 kernels, however many a build lacks (a
    tiered build would start on tier 0); ``wait=False`` still gives the tiered executable."""
    from ember.compiler import build as build_mod
    from ember.compiler.tiered import TieredExecutable

    monkeypatch.setattr(build_mod, "TIER_MIN_KERNELS", 1)
    chain = model([node("Exp", ["x"], ["a"]), node("Transpose", ["a"], ["b"], perm=[1, 0]),
                   node("ReduceSum", ["b"], ["y"], keepdims=0)], [vi("x", [3, 5])], [vi("y", [])])
    x = np.random.default_rng(0).random((3, 5)).astype(np.float32)
    # (each in a cache of its own, where its kernels are missing)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "a"))
    tiered = backend.prepare(chain, wait=False)
    assert isinstance(tiered.executable, TieredExecutable)
    tiered.executable.wait()
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "b"))
    rep = backend.prepare(chain)
    assert not isinstance(rep.executable, TieredExecutable)
    np.testing.assert_allclose(rep.run([x])[0], np.exp(x).sum(), rtol=1e-5)


def test_run_rejects_a_wrong_input_by_name():
    rep = backend.prepare(RELU)
    with pytest.raises(ShapeError, match="input 'x' must have shape \\(2,\\)"):
        rep.run([np.zeros(3, np.float32)])
    with pytest.raises(DTypeError, match="input 'x' must have dtype float32"):
        rep.run([np.zeros(2, np.int32)])


def test_a_shape_deciding_input_is_bound_at_run():
    m = model([node("Reshape", ["x", "s"], ["y"])], [vi("x", [2, 3]), vi("s", [2], 7)], [vi("y", None)])
    rep = backend.prepare(m)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = rep.run([x, np.array([3, 2], np.int64)])
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    (y,) = rep.run([x, np.array([6, 1], np.int64)])
    assert y.shape == (6, 1)


def test_prepare_reports_unsupported_ops():
    m = model([node("Bernoulli", ["x"], ["y"], name="nz")], [vi("x", [2])], [vi("y", None)])
    with pytest.raises(UnsupportedOpError, match="Bernoulli: node\\(s\\) 'nz'"):
        backend.prepare(m)
