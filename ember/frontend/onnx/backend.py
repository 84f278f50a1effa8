"""Ember as an ONNX backend (``onnx.backend.base.Backend``), so onnx's own
``onnx.backend.test.BackendTest`` runner can drive it.

``prepare`` compiles the model with ``ember.compile`` (every check runs there: unsupported ops,
malformed models, shape errors). A model whose inputs' *values* or sequences' lengths decide
its structure is compiled per value at ``run`` (:mod:`ember.compiler.specialize`).
"""
from __future__ import annotations

from typing import Any

import onnx
from onnx.backend.base import Backend, BackendRep

from ...errors import EmberError
from .checks import _graph_input_names


class EmberRep(BackendRep):
    """A prepared model: ``run(inputs)`` takes the graph inputs in order (or a dict by name); a
    sequence input is a list of arrays, and a sequence output comes back as one."""

    def __init__(self, model: onnx.ModelProto, device: str, **options: Any):
        from ...compiler.compile import compile_model

        self.model = model
        self.device = device
        self.options = options
        self.input_names = [i.name for i in model.graph.input
                            if i.name in _graph_input_names(model, False)]
        # (what ember.compile gives: one program, or one per value or structure of some inputs)
        # A backend's runner checks what the first run gives: the model's own kernels (tier
        # 1), not the interim ones a tiered build starts on, and not both of them built for a
        # model run once (the onnx node cases spent ~20% of their time so).
        options.setdefault("wait", True)
        self.executable = compile_model(model, **options)

    def run(self, inputs: Any, **kwargs: Any):
        if isinstance(inputs, dict):
            named = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            if len(inputs) > len(self.input_names):
                raise EmberError(f"the model takes {len(self.input_names)} inputs, got {len(inputs)}")
            named = dict(zip(self.input_names, inputs))
        return tuple(self.executable.run(**named))


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
