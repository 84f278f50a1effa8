"""The onnx Backend skeleton: device support, prepare imports, execution is not there yet."""
import numpy as np
import pytest
from onnx.backend.base import Backend, BackendRep

from ember.errors import EmberError, UnsupportedOpError
from ember.frontend.onnx import backend
from ember.graph import Module

from .helpers import model, node, vi

RELU = model([node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])


def test_is_an_onnx_backend_for_the_cpu():
    assert issubclass(backend.EmberBackend, Backend)
    assert backend.supports_device("CPU") and backend.supports_device("cpu:0")
    assert not backend.supports_device("CUDA")


def test_prepare_imports_and_run_says_what_is_missing():
    rep = backend.prepare(RELU)
    assert isinstance(rep, BackendRep) and isinstance(rep.module, Module)
    with pytest.raises(EmberError, match="execution lands with the executable"):
        rep.run([np.zeros(2, np.float32)])
    with pytest.raises(EmberError, match="execution lands with the executable"):
        backend.run_model(RELU, [np.zeros(2, np.float32)])
    with pytest.raises(EmberError, match="device 'CUDA' is not supported"):
        backend.prepare(RELU, "CUDA")


def test_prepare_reports_unsupported_ops():
    m = model([node("NonZero", ["x"], ["y"], name="nz")], [vi("x", [2])], [vi("y", None)])
    with pytest.raises(UnsupportedOpError, match="NonZero: node\\(s\\) 'nz'"):
        backend.prepare(m)
