"""What a converter sees of one ONNX node: its inputs as Ember expressions, its attributes
decoded, the values of inputs known at import time, and a way to build typed calls.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import onnx
from onnx import helper

from ...errors import DTypeError, ShapeError, UnsupportedOpError
from ...graph import Constant, Dim, Expr, TensorType
from ...graph.ops import call as typed_call
from ...loop import dtype as dt
from .dtypes import tensor_to_numpy


def decode_attributes(node: onnx.NodeProto, what: str) -> dict:
    """ONNX attributes as Python values: bytes -> str, tensors -> numpy, a subgraph as its
    GraphProto (control flow converts it); lists of graphs are unsupported."""
    out = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out[a.name] = a.g
            continue
        if a.type == onnx.AttributeProto.GRAPHS:
            raise UnsupportedOpError(f"{what}: attribute {a.name!r} is a list of subgraphs")
        if a.type == onnx.AttributeProto.TYPE_PROTO:  # (Optional's element type: kept as the TypeProto)
            out[a.name] = a.tp
            continue
        if a.type in (onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.SPARSE_TENSORS,
                      onnx.AttributeProto.TYPE_PROTOS):
            raise UnsupportedOpError(f"{what}: attribute {a.name!r} of kind "
                                     f"{onnx.AttributeProto.AttributeType.Name(a.type)} is not supported")
        if a.ref_attr_name:
            raise UnsupportedOpError(f"{what}: attribute {a.name!r} refers to a function attribute")
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, onnx.TensorProto):
            v = tensor_to_numpy(v, f"{what}: attribute {a.name!r}")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        elif isinstance(v, list) and v and isinstance(v[0], onnx.TensorProto):
            v = [tensor_to_numpy(x, f"{what}: attribute {a.name!r}") for x in v]
        out[a.name] = v
    return out


class StructureValueError(UnsupportedOpError):
    """A number that decides a node's structure (an axis) comes from a model input's values;
    ``index``: which input. The importer compiles the node per possible value where the choices
    are few (:mod:`.versioning`); otherwise this is the error the user sees."""

    def __init__(self, message: str, index: int = -1):
        super().__init__(message)
        self.index = index


class NodeContext:
    """One ONNX node being converted. Converters return one expression per node output."""

    def __init__(self, proto: onnx.NodeProto, opset: int, inputs: list, values: dict, label: str,
                 importer=None, narrow: Optional[list] = None):
        self.importer = importer  # converts subgraphs (control flow)
        self._narrow = narrow or []  # each input's narrow type (its bytes are the input), or None
        self.narrow_out: dict = {}  # output index -> the narrow type its bytes hold
        self.proto = proto
        self.op_type = proto.op_type
        self.opset = opset
        self.label = label  # "Conv node 'conv1'" for messages
        self.attrs = decode_attributes(proto, label)
        self.inputs = inputs  # Expr per input; None where the optional input is absent ("")
        self.input_names = list(proto.input)
        self.output_names = list(proto.output)
        self._values = values

    # -- attributes ---------------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    # -- inputs -------------------------------------------------------------------------------
    def has(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def input(self, i: int) -> Expr:
        if not self.has(i):
            raise ShapeError(f"required input {i} is missing")
        return self.inputs[i]

    def narrow(self, i: int) -> Optional[str]:
        """The narrow type (float8, int4, ...: :data:`.dtypes.NARROW`) input ``i`` holds the
        bytes of, or None."""
        return self._narrow[i] if i < len(self._narrow) else None

    def set_narrow(self, k: int, name: str) -> None:
        """Output ``k`` holds the bytes of the narrow type ``name``."""
        self.narrow_out[k] = name

    def type(self, i: int) -> TensorType:
        t = self.input(i).type
        if not isinstance(t, TensorType):
            raise ShapeError(f"input {i} ({self.input_names[i]!r}) is not a typed tensor: {t}")
        return t

    def value(self, i: int) -> Optional[np.ndarray]:
        """The value of input ``i`` if known at import time (ints may be symbolic Dims)."""
        if not self.has(i):
            return None
        return self._values.get(self.input_names[i])

    def const(self, i: int, what: str, sizes_from_floats: bool = False) -> np.ndarray:
        """The value of input ``i``, which this op needs at import time (``what`` it is); from a
        model input, its elements as data sizes (of a float input too, truncated, where
        ``sizes_from_floats``: OneHot's depth)."""
        if not self.has(i):
            raise ShapeError(f"required input {i} (the {what}) is missing")
        v = self.value(i)
        if v is None:
            v = self._runtime_value(i, sizes_from_floats)
        if v is None:
            raise UnsupportedOpError(
                f"input {i} ({self.input_names[i]!r}, the {what}) must be known when the model is imported: "
                "an initializer, a Constant, a shape computation on static shapes, or a graph input "
                "bound with from_onnx(..., static_inputs=...)")
        return v

    def _runtime_value(self, i: int, floats: bool = False) -> Optional[np.ndarray]:
        """A model input of a few integers that decides sizes (a ConstantOfShape's shape fed by a
        graph input): its elements as data sizes, which the program binds from the input's
        values before it runs (so they must be sizes: >= 0)."""
        from ...graph import Var
        from ...graph.ops.dims import VALUE_SEP, data_dim

        x = self.input(i)
        t = x.type
        ok = ("int32", "int64") + (("float16", "float32", "float64") if floats else ())
        if not (isinstance(x, Var) and isinstance(t, TensorType) and t.is_static and t.dtype in ok):
            return None
        n = int(np.prod(t.shape, dtype=np.int64))
        if n > 64:
            return None
        out = np.empty(n, dtype=object)
        for k in range(n):
            out[k] = data_dim(f"{x.name}{VALUE_SEP}{k}")
        return out.reshape(t.shape)

    def dims(self, i: int, what: str) -> tuple:
        """A 1-D known input as a tuple of ints (symbolic dims allowed)."""
        c = self.const(i, what)
        if c.dtype != object and c.dtype.kind not in "iu":
            raise DTypeError(f"input {i} ({self.input_names[i]!r}, the {what}) must hold integers, got {c.dtype}")
        v = c.reshape(-1)
        return tuple(d if isinstance(d, Dim) else int(d) for d in v.tolist())

    def ints(self, i: int, what: str) -> tuple:
        """A known input as a tuple of plain ints."""
        out = self.dims(i, what)
        if any(isinstance(d, Dim) for d in out):
            src = "" if self.value(i) is not None else f" (it comes from {self.input_names[i]!r} when the model runs)"
            raise (UnsupportedOpError if self.value(i) is not None else StructureValueError)(f"the {what} {out} depends on a symbolic dimension{src}; it must be a number "
                                     f"known at import: pass the input with from_onnx(..., static_inputs=...)",
                                     *(() if self.value(i) is not None else (i,)))
        return out

    def int_scalar(self, i: int, what: str) -> int:
        """A known one-element input as a plain int (an axis, a k)."""
        x = self.scalar(i, what)
        if isinstance(x, Dim):
            src = "" if self.value(i) is not None else f" (it comes from {self.input_names[i]!r} when the model runs)"
            raise (UnsupportedOpError if self.value(i) is not None else StructureValueError)(
                f"the {what} depends on a symbolic dimension{src}; it must be a number known "
                f"at import: pass the input with from_onnx(..., static_inputs=...)",
                *(() if self.value(i) is not None else (i,)))
        return int(x)

    def scalar(self, i: int, what: str, sizes_from_floats: bool = False) -> Any:
        v = self.const(i, what, sizes_from_floats).reshape(-1)
        if v.size != 1:
            raise ShapeError(f"the {what} must have one element, got shape {v.shape}")
        x = v[0]
        return x if isinstance(x, Dim) else x.item()

    # -- outputs ------------------------------------------------------------------------------
    @property
    def num_outputs(self) -> int:
        return len(self.output_names)

    def wants(self, i: int) -> bool:
        """Whether output ``i`` exists and is used (optional outputs may be named '')."""
        return i < len(self.output_names) and bool(self.output_names[i])

    # -- building -----------------------------------------------------------------------------
    def call(self, op: str, *args: Expr, **attrs: Any) -> Expr:
        """A typed Ember call (type errors are raised here and name the ONNX node)."""
        return typed_call(op, *args, **attrs)

    @staticmethod
    def const_like(value: Any, dtype: str) -> Constant:
        """A scalar or small tensor constant of ``dtype``."""
        return Constant(np.asarray(value, dtype=dt.numpy_dtype(dtype)))
