"""Ember as an ONNX backend (``onnx.backend.base.Backend``), so onnx's own
``onnx.backend.test.BackendTest`` runner can drive it.

``prepare`` imports and compiles the model (every check runs there: unsupported ops, malformed
models, shape errors). A graph input whose *value* decides a shape (the shape operand of a
Reshape fed by a graph input, say) cannot be compiled ahead: such a model is compiled at its
first ``run``, with those inputs bound to the values given, and recompiled when they change.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from ...errors import EmberError
from .checks import _graph_input_names, value_inputs
from .importer import from_onnx


class EmberRep(BackendRep):
    """A prepared model: ``run(inputs)`` takes the graph inputs in order (or a dict by name)."""

    def __init__(self, model: onnx.ModelProto, device: str, **options: Any):
        from ...compiler.compile import compile_model

        self.model = model
        self.device = device
        self.options = options
        self._compile = compile_model
        self.input_names = [i.name for i in model.graph.input
                            if i.name in _graph_input_names(model, False)]
        self.value_inputs = value_inputs(model)
        self._exes: dict = {}
        if not self.value_inputs:
            self.executable = self._build({})

    def _build(self, static: dict):
        narrow: dict = {}
        mod = from_onnx(self.model, static_inputs=static or None, io_narrow=narrow)
        exe = self._compile(mod, narrow=narrow, **self.options)
        exe.output_info = [type(i)(o.name, i.shape, i.dtype)
                           for i, o in zip(exe.output_info, self.model.graph.output)]
        return exe

    def run(self, inputs: Any, **kwargs: Any):
        if isinstance(inputs, dict):
            named = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            if len(inputs) > len(self.input_names):
                raise EmberError(f"the model takes {len(self.input_names)} inputs, got {len(inputs)}")
            named = dict(zip(self.input_names, inputs))
        static = {n: np.asarray(named.pop(n)) for n in self.value_inputs if n in named}
        key = tuple((n, v.dtype.str, v.shape, v.tobytes()) for n, v in sorted(static.items()))
        exe = self._exes.get(key)
        if exe is None:
            exe = self._exes[key] = self._build(static) if static or self.value_inputs else self.executable
        return tuple(exe.run(**named))


class EmberBackend(Backend):
    """``prepare`` / ``run_model`` / ``supports_device`` for onnx's backend test runner."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().split(":")[0] == "CPU"

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> EmberRep:
        if not cls.supports_device(device):
            raise EmberError(f"device {device!r} is not supported (Ember runs on the CPU)")
        return EmberRep(model, device, **kwargs)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        raise EmberError("run_node is not supported: Ember compiles whole models (use run_model on a "
                         "one-node model)")


prepare = EmberBackend.prepare
run_model = EmberBackend.run_model
run_node = EmberBackend.run_node
supports_device = EmberBackend.supports_device
