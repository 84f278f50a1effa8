"""The ONNX frontend: ``from_onnx(model) -> ember.graph.Module``.

    >>> import ember.frontend.onnx as ember_onnx
    >>> mod = ember_onnx.from_onnx("model.onnx")        # doctest: +SKIP

- :mod:`.importer` — loading, the up-front scan for unsupported ops, node-by-node conversion.
- :mod:`.table` — converters keyed by (ONNX op type, opset range), opsets 7 to 28.
- :mod:`.elementwise`, :mod:`.nn`, :mod:`.reduce`, :mod:`.layout` — the converters by family.
- :mod:`.fold` — import-time evaluation of small shape computations.
- :mod:`.backend` — an ``onnx.backend.base.Backend`` so onnx's test runner can drive Ember.

Needs the ``onnx`` package (``pip install ember[onnx]``).
"""
from .checks import load_model, scan, value_inputs
from .importer import from_onnx
from .table import MAX_OPSET, MIN_OPSET, supported_op_types

__all__ = ["MAX_OPSET", "MIN_OPSET", "from_onnx", "load_model", "scan", "supported_op_types", "value_inputs"]
