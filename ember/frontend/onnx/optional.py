"""ONNX's optionals: ``Optional``, ``OptionalHasElement``, ``OptionalGetElement``, and graph
inputs of optional type, for optionals known at import. An optional is an import-time value:
an :class:`OptionalValue` holding its element (a graph expression or a sequence) or nothing,
never a runtime value. A graph input of optional type is compiled as present (its element's
tensor type): a run gives it a tensor; ``OptionalHasElement`` of it is true."""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np
import onnx

from ...errors import ShapeError
from .table import converter


@dataclasses.dataclass(frozen=True)
class OptionalValue:
    """An ONNX optional known at import: its element, or None (empty)."""

    item: Any = None

    type = None  # (not a typed graph value: no folding, no graph output)


def tensor_type_of(t: onnx.TypeProto) -> Optional[onnx.TypeProto.Tensor]:
    """The tensor type of a graph value of tensor type, or of optional-of-tensor type (compiled
    as present); None for sequences and the rest."""
    if t.HasField("tensor_type"):
        return t.tensor_type
    if t.HasField("optional_type") and t.optional_type.elem_type.HasField("tensor_type"):
        return t.optional_type.elem_type.tensor_type
    return None


@converter("Optional", since=15)
def _optional(node):
    return [OptionalValue(node.input(0) if node.has(0) else None)]


@converter("OptionalHasElement", since=15)
def _has_element(node):
    if not node.has(0):  # (no input: an empty optional)
        return [node.const_like(np.bool_(False), "bool")]
    x = node.input(0)
    return [node.const_like(np.bool_(not isinstance(x, OptionalValue) or x.item is not None), "bool")]


@converter("OptionalGetElement", since=15)
def _get_element(node):
    x = node.input(0)
    if isinstance(x, OptionalValue):
        if x.item is None:
            raise ShapeError("OptionalGetElement of an empty optional")
        return [x.item]
    return [x]  # (a tensor or a sequence is its own element)
