"""Reading an ONNX file with its large weights straight into arrays.

``onnx.load`` parses the whole file with protobuf, which copies every weight into its arena,
and ``numpy_helper.to_array`` copies it again out of a bytes object: for a 548 MB VGG-19, 0.8
s of a compile's first second. :func:`load_lean` walks the protobuf wire format of the file
itself: it copies the model's structure (every field but the large weights' ``raw_data``) into a
small message that protobuf then parses, and reads each large weight from the file once,
straight into its own array. Anything it does not expect (external data, a tensor in segments,
a malformed field) makes it read the file with ``onnx.load`` instead, which says what is wrong.
"""
from __future__ import annotations

import io
import os
from typing import Optional

import numpy as np
import onnx

from ...runtime.ndarray import raw_bytes

__all__ = ["LARGE", "load_lean"]

# weights of at least this many bytes are read apart (the rest stay in the parsed message)
LARGE = 1 << 20

_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 5, 9
_TENSOR_SEGMENT, _TENSOR_EXTERNAL, _TENSOR_LOCATION = 3, 13, 14


# the element types read apart (narrow ones -- int4, float8 -- go through onnx)
_PLAIN = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                    onnx.TensorProto.BFLOAT16, onnx.TensorProto.INT8, onnx.TensorProto.UINT8,
                    onnx.TensorProto.INT16, onnx.TensorProto.UINT16, onnx.TensorProto.INT32,
                    onnx.TensorProto.UINT32, onnx.TensorProto.INT64, onnx.TensorProto.UINT64,
                    onnx.TensorProto.BOOL})


class _Unexpected(Exception):
    """Something the lean reader leaves to ``onnx.load``."""


def _varint(f) -> Optional[int]:
    shift = value = 0
    while True:
        b = f.read(1)
        if not b:
            if shift:
                raise _Unexpected("a varint runs past the end")
            return None
        value |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return value
        shift += 7
        if shift > 63:
            raise _Unexpected("a varint of more than 64 bits")


def _encode(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        out.append(b | 0x80 if value else b)
        if not value:
            return bytes(out)


def _fields(f, end: int):
    """``(field, wire type, the field's offset)`` of each field up to offset ``end``, its tag
    read (a length-delimited one's length follows: the caller reads or skips it)."""
    while f.tell() < end:
        start = f.tell()
        tag = _varint(f)
        if tag is None:
            raise _Unexpected("a message runs past the end")
        yield tag >> 3, tag & 7, start


def _skip(f, wire: int) -> None:
    if wire == 0:
        _varint(f)
    elif wire == 1:
        f.seek(8, io.SEEK_CUR)
    elif wire == 5:
        f.seek(4, io.SEEK_CUR)
    elif wire == 2:
        f.seek(_varint(f), io.SEEK_CUR)
    else:
        raise _Unexpected(f"wire type {wire}")


def _copy(f, start: int, wire: Optional[int]) -> bytes:
    """The bytes of the field that starts at ``start``, as they are: its tag read (``wire``:
    its payload then skipped here; None: already skipped)."""
    if wire is not None:
        _skip(f, wire)
    end = f.tell()
    f.seek(start)
    return f.read(end - start)


def _tensor(f, end: int, raws: list) -> bytes:
    """A TensorProto's bytes without a large ``raw_data`` (its place and length go to ``raws``)."""
    out = bytearray()
    for field, wire, start in _fields(f, end):
        if field in (_TENSOR_SEGMENT, _TENSOR_EXTERNAL, _TENSOR_LOCATION):
            raise _Unexpected("a tensor in segments or external data")
        if field == _TENSOR_RAW_DATA and wire == 2:
            n = _varint(f)
            if n >= LARGE:
                raws.append((f.tell(), n))
                f.seek(n, io.SEEK_CUR)
                continue
            f.seek(n, io.SEEK_CUR)
            out += _copy(f, start, None)
            continue
        out += _copy(f, start, wire)
    if f.tell() != end:
        raise _Unexpected("a tensor runs past its message")
    return bytes(out)


def _graph(f, end: int, arrays: list) -> bytes:
    out = bytearray()
    for field, wire, start in _fields(f, end):
        if field == _GRAPH_INITIALIZER and wire == 2:
            n = _varint(f)
            raws: list = []
            body = _tensor(f, f.tell() + n, raws)
            if raws:
                arrays.append((body, raws[-1]))
            out += _encode(field << 3 | 2) + _encode(len(body)) + body
            continue
        out += _copy(f, start, wire)
    if f.tell() != end:
        raise _Unexpected("the graph runs past the model")
    return bytes(out)


def load_lean(path: str) -> tuple:
    """``(ModelProto, arrays)``: the model at ``path`` with its large initializers' data apart --
    ``arrays`` maps each one's name to its bytes (uint8; :func:`.dtypes.tensor_to_numpy` takes
    them with the tensor's type and dims), the message keeps their dims and type. Files the
    lean reader does not expect are read by ``onnx.load`` (``arrays`` empty). Raises what
    ``onnx.load`` raises."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb", buffering=1 << 16) as f:
            model = bytearray()
            found: list = []
            for field, wire, start in _fields(f, size):
                if field == _MODEL_GRAPH and wire == 2:
                    n = _varint(f)
                    graph = _graph(f, f.tell() + n, found)
                    model += _encode(field << 3 | 2) + _encode(len(graph)) + graph
                    continue
                model += _copy(f, start, wire)
            proto = onnx.ModelProto()
            proto.ParseFromString(bytes(model))
            arrays = {}
            names = [t.name for t in proto.graph.initializer]
            for body, (offset, n) in found:
                t = onnx.TensorProto()
                t.ParseFromString(body)
                if t.name in arrays or names.count(t.name) != 1:
                    raise _Unexpected("initializers of one name")
                if t.data_type not in _PLAIN or n != int(np.prod(t.dims, dtype=np.int64)) * \
                        onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize:
                    raise _Unexpected("a narrow type, or data that does not fill the dims")
                data = raw_bytes(n)  # (not numpy's huge-page-advised memory: see raw_bytes)
                f.seek(offset)
                if f.readinto(data) != n:
                    raise _Unexpected("a weight runs past the end")
                arrays[t.name] = data
            return proto, arrays
    except Exception:  # (_Unexpected, or protobuf's DecodeError: a malformed file, which onnx.load reports)
        return onnx.load(path), {}
