"""Ember as an ONNX backend (``onnx.backend.base.Backend``), so onnx's own
``onnx.backend.test.BackendTest`` runner can drive it.

Today ``prepare`` imports the model (all of its checks run: unsupported ops, malformed
models, shape errors) and returns a :class:`EmberRep` whose ``run`` raises a clear
``EmberError``: execution lands with the executable (the ``ember.compile`` step of issue 3),
which will replace :meth:`EmberRep.run` with a call into the compiled program.
"""
from __future__ import annotations

from typing import Any

import onnx
from onnx.backend.base import Backend, BackendRep

from ...errors import EmberError
from ...graph import Module
from .importer import from_onnx

NOT_YET = ("execution lands with the executable: Ember imports and type-checks ONNX models today, "
           "compiling and running them is the next step of issue 3")


class EmberRep(BackendRep):
    """A prepared model: the imported graph module (``.module``), ready for compilation."""

    def __init__(self, module: Module, model: onnx.ModelProto, device: str):
        self.module = module
        self.model = model
        self.device = device

    def run(self, inputs: Any, **kwargs: Any):
        # hook: the Executable built from self.module runs here
        raise EmberError(NOT_YET)


class EmberBackend(Backend):
    """``prepare`` / ``run_model`` / ``supports_device`` for onnx's backend test runner."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().split(":")[0] == "CPU"

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> EmberRep:
        if not cls.supports_device(device):
            raise EmberError(f"device {device!r} is not supported (Ember runs on the CPU)")
        # inputs whose values decide shapes (see importer.value_inputs) can be bound here; once
        # execution exists, run() will bind them from its arguments and import again
        static = kwargs.pop("static_inputs", None)
        return EmberRep(from_onnx(model, static_inputs=static), model, device)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        raise EmberError(NOT_YET)


prepare = EmberBackend.prepare
run_model = EmberBackend.run_model
run_node = EmberBackend.run_node
supports_device = EmberBackend.supports_device
