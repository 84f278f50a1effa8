"""The converter table: ONNX (op_type, opset range) -> a function that builds Ember ops.

Converters register with :func:`converter`; an entry applies from its ``since`` opset up to the
next entry's ``since`` for the same op type (ONNX changes an op by adding a new version, so the
table mirrors that). The range of the whole frontend is opsets 7 to 28.

An entry also declares what the importer must check before converting anything:

- ``const_inputs``: inputs whose *values* decide the output's shape or an attribute (Reshape's
  shape, Squeeze's axes from opset 13, ...). The importer needs them at import time: an
  initializer, a Constant node, a foldable shape computation, or a graph input the caller binds
  with ``static_inputs``.
- ``check(attrs, opset, node_proto)``: returns the reason an attribute setting is unsupported, or None.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import onnx

MIN_OPSET, MAX_OPSET = 7, 28


@dataclasses.dataclass(frozen=True)
class Converter:
    op_type: str
    since: int
    fn: Callable
    const_inputs: tuple = ()
    check: Optional[Callable[[dict, int, onnx.NodeProto], Optional[str]]] = None


_TABLE: dict[str, list] = {}


DEFAULT_DOMAINS = ("", "ai.onnx")
# ONNX Runtime's contrib ops, which its transformer optimizer and quantizer write into the files
# people ship (SkipLayerNormalization, Attention, MatMulNBits, ...): one version each
CONTRIB = "com.microsoft"


def converter(*op_types: str, since: int = MIN_OPSET, const_inputs: Sequence[int] = (),
              check: Optional[Callable[[dict, int, onnx.NodeProto], Optional[str]]] = None, domain: str = ""):
    """Decorator: ``fn(node) -> list of output expressions`` converts ``op_types`` from ``since``
    (of another ``domain``: whatever the model's opset)."""
    def register(fn):
        for op in op_types:
            entries = _TABLE.setdefault(f"{domain}.{op}" if domain else op, [])
            if any(e.since == since for e in entries):
                raise ValueError(f"converter for {op} since opset {since} registered twice")
            entries.append(Converter(op, since, fn, tuple(const_inputs), check))
            entries.sort(key=lambda e: e.since)
        return fn

    return register


_LOADED: list = []


def _load() -> None:
    if _LOADED:  # (an import statement per lookup cost DenseNet-121's import ~60 ms)
        return
    from . import (attention, contrib, control, detection, dynamic, elementwise, layout, losses, nbits, nn, quantize, sequence,  # noqa: F401
                   kv_cache, optional, recurrent, reduce, sampling, signal, state_space)  # (converters register on import)
    _LOADED.append(True)


def lookup(op_type: str, opset: int) -> Optional[Converter]:
    """The converter for ``op_type`` in a model of ``opset``, or None."""
    _load()
    if not MIN_OPSET <= opset <= MAX_OPSET:
        return None
    best = None
    for e in _TABLE.get(op_type, ()):
        if e.since <= opset:
            best = e
    return best


def lookup_node(n: onnx.NodeProto, opset: Optional[int]) -> Optional[Converter]:
    """The converter for node ``n`` in a model whose default-domain opset is ``opset``, or None."""
    if n.domain in DEFAULT_DOMAINS:
        return lookup(n.op_type, opset) if opset is not None else None
    _load()
    entries = _TABLE.get(f"{n.domain}.{n.op_type}")
    return entries[-1] if entries else None


def supported_op_types() -> list:
    _load()
    return sorted(_TABLE)
