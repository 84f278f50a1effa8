"""Sequences and optionals at a graph's boundary: graph inputs and outputs whose ONNX type is a
sequence of tensors (or an optional) rather than a tensor.

Inside a graph a sequence is an import-time tuple of tensors (:mod:`.sequence`); at the
boundary it is a Python list of arrays. Its length (and its items' shapes) decide the graph, so
no one program takes every list: the model is imported for the *structure* a run gives
(:func:`structure_of`: a list's length and its items' dtypes and shapes, or None for an empty
optional), each item a tensor input of its own named ``name[k]`` (:func:`bind_input`), and
:class:`ember.compiler.specialize.SpecializingExecutable` compiles one executable per
structure. A sequence (or optional) *output* is flattened into the executable's tensors, with a
*layout* per graph output (:func:`flatten_output`) that :func:`regroup` turns back into lists
and Nones after a run.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import onnx

from ...errors import ArgumentError, DTypeError, UnsupportedOpError
from ...graph import TensorType, Var
from ...loop import dtype as dt
from .dtypes import to_ember
from .optional import OptionalValue
from .sequence import SequenceValue


class SequenceOutputError(UnsupportedOpError):
    """A graph output is a sequence or an optional: the model's executable regroups its tensors
    (``ember.compile`` makes a :class:`~ember.compiler.specialize.SpecializingExecutable`)."""


class SubgraphSequenceError(UnsupportedOpError):
    """A subgraph (an If's branch) returns a sequence or an optional, which a runtime branch
    cannot: the If is decided at import where its condition is known (:mod:`.control`)."""


def kind(t: onnx.TypeProto) -> str:
    """``"tensor"``, ``"sequence"``, ``"optional"`` (of what: :func:`optional_element`), or
    ``"other"`` (maps, sparse tensors, an unset type)."""
    which = t.WhichOneof("value")
    return {"tensor_type": "tensor", "sequence_type": "sequence", "optional_type": "optional"}.get(which, "other")


def optional_element(t: onnx.TypeProto) -> onnx.TypeProto:
    """The element type of an optional type."""
    return t.optional_type.elem_type


def is_structured(t: onnx.TypeProto) -> bool:
    """Whether a graph input of type ``t`` needs the structure of each run's value: a sequence,
    or an optional of one. (An optional of a tensor compiles as present, one program for all.)"""
    k = kind(t)
    return k == "sequence" or (k == "optional" and kind(optional_element(t)) == "sequence")


def structured_inputs(proto: onnx.ModelProto) -> list:
    """The graph inputs (not initializers) whose values' structure decides the graph."""
    inits = {t.name for t in proto.graph.initializer}
    return [i.name for i in proto.graph.input if i.name not in inits and is_structured(i.type)]


def _item_dtype(t: onnx.TypeProto, what: str) -> Optional[str]:
    """The dtype a sequence type declares for its items, or None where it declares none."""
    elem = t.sequence_type.elem_type
    if kind(elem) != "tensor" or not elem.tensor_type.elem_type:
        return None
    return to_ember(elem.tensor_type.elem_type, what)


def _tensor_spec(a: Any, what: str, want: Optional[str]) -> tuple:
    if not isinstance(a, np.ndarray):
        if isinstance(a, (list, tuple)) or a is None:
            raise ArgumentError(f"{what} must be an array, got {type(a).__name__}")
        a = np.asarray(a)
    try:
        got = dt.from_numpy(a.dtype)
    except Exception:  # noqa: BLE001 - an object or string array: no Ember dtype
        raise DTypeError(f"{what} has dtype {a.dtype}, which Ember does not support") from None
    if want is not None and got != want:
        raise DTypeError(f"{what} has dtype {got}, the model declares {want}")
    return ("tensor", got, tuple(int(d) for d in a.shape))


def structure_of(value: Any, t: onnx.TypeProto, name: str) -> tuple:
    """The structure of ``value``, which a run gives graph input ``name`` of ONNX type ``t``:
    ``("sequence", (item structures...))``, ``("none",)`` for an empty optional, or
    ``("tensor", dtype, shape)``. ArgumentError where the kind of value is wrong (an array where
    the model takes a list, or the reverse)."""
    k = kind(t)
    if k == "optional":
        if value is None:
            return ("none",)
        return structure_of(value, optional_element(t), name)
    if k == "sequence":
        if not isinstance(value, (list, tuple)):
            raise ArgumentError(f"input {name!r} is a sequence: give it a list of arrays, got {type(value).__name__}")
        want = _item_dtype(t, f"input {name!r}")
        return ("sequence", tuple(_tensor_spec(a, f"item {k} of input {name!r}", want) for k, a in enumerate(value)))
    if value is None:
        raise ArgumentError(f"input {name!r} is a tensor: give it an array, got None")
    if isinstance(value, (list, tuple)):
        raise ArgumentError(f"input {name!r} is a tensor: give it an array, got a {type(value).__name__}")
    want = to_ember(t.tensor_type.elem_type, f"input {name!r}") if k == "tensor" else None
    return _tensor_spec(value, f"input {name!r}", want)


def item_name(name: str, k: int) -> str:
    """The executable's input holding item ``k`` of sequence input ``name``."""
    return f"{name}[{k}]"


def feed(name: str, value: Any, spec: tuple) -> dict:
    """The executable's tensor inputs for ``value`` of structure ``spec`` (graph input ``name``)."""
    if spec[0] == "none":
        return {}
    if spec[0] == "tensor":
        return {name: value}
    return {item_name(name, k): a for k, a in enumerate(value)}


def bind_input(name: str, spec: tuple, declared_dtype: str = "float32") -> tuple:
    """``(the graph's value for input name, its tensor parameters)`` for a run's structure
    ``spec``: a sequence of one parameter per item, an empty optional, or a tensor."""
    if spec[0] == "none":
        return OptionalValue(None), []
    if spec[0] == "tensor":
        v = Var(name, TensorType(spec[2], spec[1]))
        return v, [v]
    items = [Var(item_name(name, k), TensorType(s[2], s[1])) for k, s in enumerate(spec[1])]
    dtype = items[0].type.dtype if items else declared_dtype
    return SequenceValue(tuple(items), dtype), items


def declared_item_dtype(t: onnx.TypeProto, name: str) -> str:
    """The dtype of an empty sequence input's items (float32 where the type declares none)."""
    if kind(t) == "optional":
        t = optional_element(t)
    return (_item_dtype(t, f"input {name!r}") if kind(t) == "sequence" else None) or "float32"


def flatten_output(expr: Any, name: str) -> tuple:
    """``(tensors, layout)`` of a graph output: ``"tensor"``, ``("sequence", n)`` or
    ``("none",)``; an optional holding a value is that value."""
    if isinstance(expr, OptionalValue):
        if expr.item is None:
            return [], ("none",)
        return flatten_output(expr.item, name)
    if isinstance(expr, SequenceValue):
        return list(expr.items), ("sequence", len(expr.items))
    if isinstance(getattr(expr, "type", None), TensorType):
        return [expr], "tensor"
    raise UnsupportedOpError(f"graph output {name!r} is not a tensor, a sequence of tensors or an optional")


def regroup(arrays: list, layouts: list) -> list:
    """A run's outputs, one per graph output: the executable's flat ``arrays`` taken back into
    arrays, lists (sequences) and Nones (empty optionals) by ``layouts``."""
    out, k = [], 0
    for lay in layouts:
        if lay == "tensor":
            out.append(arrays[k])
            k += 1
        elif lay[0] == "none":
            out.append(None)
        else:
            out.append(list(arrays[k:k + lay[1]]))
            k += lay[1]
    return out


__all__ = ["SequenceOutputError", "SubgraphSequenceError", "bind_input", "declared_item_dtype", "feed", "flatten_output", "is_structured",
           "item_name", "kind", "regroup", "structure_of", "structured_inputs"]
