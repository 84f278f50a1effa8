"""The types of a graph's inputs: declared dims (a ``dim_param`` is a symbolic size; the
sizes a decoder's first step has none of may be 0) and the shapes a caller gives instead."""
from __future__ import annotations

from typing import Optional, Sequence

import onnx

from ...errors import ShapeError
from ...graph import Dim, TensorType
from ...graph.ops.dims import data_dim
from .dtypes import storage_of


def empty_sizes(graph: onnx.GraphProto) -> frozenset:
    """The named sizes of ``graph``'s inputs that may be 0, which is rare enough that sizes are
    otherwise taken to be at least 1 (kernels over them then need no empty-axis cases): a
    decoder's past, which its first step has none of -- named so (optimum's
    ``past_sequence_length``, ``past_decoder_sequence_length``), or added to another size in a
    declared dim (``past_sequence_length + sequence_length`` of the attention mask)."""
    names = {d.dim_param for vi in graph.input if vi.type.HasField("tensor_type")
             for d in vi.type.tensor_type.shape.dim if d.dim_param}
    terms = {t.strip() for n in names if "+" in n for t in n.split("+")}
    return frozenset(n for n in names if "+" not in n and ("past" in n.lower() or n in terms))


def input_type(vi: onnx.ValueInfoProto, empty: frozenset = frozenset()) -> TensorType:
    """The declared type of a graph input; a size in ``empty`` may be 0 (a '?' size)."""
    from .optional import tensor_type_of

    tt = tensor_type_of(vi.type) or vi.type.tensor_type  # (an optional input: its element, as present)
    dtype = storage_of(tt.elem_type, f"graph input {vi.name!r}")
    if not tt.HasField("shape"):
        raise ShapeError(f"graph input {vi.name!r} has no shape; Ember needs at least its rank")
    dims = []
    for i, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.dim_param:
            dims.append(data_dim(d.dim_param) if d.dim_param in empty else Dim(d.dim_param))
        else:  # an unnamed unknown size: give it a name of its own
            dims.append(Dim(f"{vi.name}.{i}"))
    return TensorType(dims, dtype)


def given_shape(t: TensorType, name: str, shape: Optional[Sequence]) -> TensorType:
    """``t`` with the shape ``input_shapes`` gives input ``name`` (checked against ``t``)."""
    if shape is None:
        return t
    dims = tuple(Dim(d) if isinstance(d, str) else int(d) for d in shape)
    if len(dims) != t.ndim:
        raise ShapeError(f"input {name!r} has rank {t.ndim} ({t}); input_shapes gives {tuple(shape)}")
    for want, got in zip(t.shape, dims):
        if isinstance(want, int) and want != got:
            raise ShapeError(f"input {name!r} has shape {t.shape}; input_shapes gives {tuple(shape)}")
    return TensorType(dims, t.dtype)


__all__ = ["empty_sizes", "given_shape", "input_type"]
