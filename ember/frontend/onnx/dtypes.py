"""ONNX element types <-> Ember dtypes, and ONNX tensors -> numpy arrays."""
from __future__ import annotations

from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...errors import DTypeError, ModelError
from ...loop import dtype as dt

_TO_EMBER = {
    TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64", TensorProto.FLOAT16: "float16",
    TensorProto.BFLOAT16: "bfloat16", TensorProto.BOOL: "bool",
    TensorProto.INT8: "int8", TensorProto.INT16: "int16", TensorProto.INT32: "int32", TensorProto.INT64: "int64",
    TensorProto.UINT8: "uint8", TensorProto.UINT16: "uint16", TensorProto.UINT32: "uint32",
    TensorProto.UINT64: "uint64",
}
_TO_ONNX = {v: k for k, v in _TO_EMBER.items()}

# Narrow types Ember stores without computing in them: one byte per element (ml_dtypes' layout,
# int4 and the like unpacked), a ``uint8`` in the graph; Cast, CastLike and the quantization
# ops convert them (:mod:`.narrow`), data-movement ops carry them. By ml_dtypes' name.
NARROW = {
    TensorProto.FLOAT8E4M3FN: "float8_e4m3fn", TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    TensorProto.FLOAT8E5M2: "float8_e5m2", TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    TensorProto.FLOAT4E2M1: "float4_e2m1fn", TensorProto.INT4: "int4", TensorProto.UINT4: "uint4",
    **({TensorProto.FLOAT8E8M0: "float8_e8m0fnu"} if hasattr(TensorProto, "FLOAT8E8M0") else {}),
    **({TensorProto.INT2: "int2", TensorProto.UINT2: "uint2"} if hasattr(TensorProto, "INT2") else {}),
}


def onnx_type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type)
    except (ValueError, TypeError):  # TypeError: not an int (a missing attribute)
        return f"element type {elem_type}"


def is_supported(elem_type: int) -> bool:
    return elem_type in _TO_EMBER or elem_type in NARROW


def narrow_of(elem_type: int):
    """The ml_dtypes name of a narrow ONNX type (stored as uint8), else None."""
    return NARROW.get(elem_type)


def storage_of(elem_type: int, what: str) -> str:
    """The Ember dtype that holds ``elem_type`` (``uint8`` for a narrow type)."""
    return "uint8" if elem_type in NARROW else to_ember(elem_type, what)


def to_ember(elem_type: int, what: str) -> str:
    """The Ember dtype of ONNX element type ``elem_type``; DTypeError naming ``what`` if none."""
    try:
        return _TO_EMBER[elem_type]
    except KeyError:
        raise DTypeError(f"{what} has ONNX type {onnx_type_name(elem_type)}, which Ember does not support "
                         f"(supported: {', '.join(sorted(_TO_EMBER.values()))})") from None


def to_onnx(dtype: str) -> int:
    return _TO_ONNX[dtype]


def tensor_to_numpy(t: onnx.TensorProto, what: str, raw: Optional[np.ndarray] = None) -> np.ndarray:
    """The value of an ONNX tensor (initializer or attribute) as a numpy array of an Ember dtype
    (a narrow type's bytes as uint8). ``raw``: its data's bytes, read apart from the message
    (:func:`.lean.load_lean`; a plain element type)."""
    dtype = storage_of(t.data_type, what)
    try:
        if raw is not None:
            arr = raw.view(helper.tensor_dtype_to_np_dtype(t.data_type)).reshape(tuple(t.dims))
        else:
            arr = numpy_helper.to_array(t)
    except Exception as e:  # data that does not fill the dims, external data that is missing, ...
        raise ModelError(f"{what} cannot be read: {type(e).__name__}: {e} (dims {list(t.dims)}, "
                         f"{onnx_type_name(t.data_type)}); is the model corrupted?") from None
    if t.data_type in NARROW:
        return np.ascontiguousarray(arr).view(np.uint8)
    want = dt.numpy_dtype(dtype)
    return arr if arr.dtype == want else arr.astype(want)
