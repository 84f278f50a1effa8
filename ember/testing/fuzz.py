"""Fuzzing Ember's two front doors: ``ember.compile`` on mutated ONNX models and ``ember.load`` on
mutated exports.

    summary = fuzz(kind="both", seed=0, max_cases=100)        # or minutes=5
    print(summary.table()); summary.failures                   # saved inputs, one folder each

A *case* is one seed input (a small ONNX model built here with random weights, or that model
compiled and exported as a ``.so``) with one to three mutations: byte-level (flip, insert,
delete, truncate, splice, overwrite with interesting values), structure-aware for ONNX (attribute
values, tensor and value-info dims, op types, node inputs and outputs, dtypes, edge names, opset)
and ELF/JSON-aware for exports (bytes inside the ELF headers, a section, the embedded program or
metadata JSON, or whatever follows the sections; truncation). Cases are deterministic: case
``i`` of a run with seed ``s`` is the same on every machine and with any number of workers.

Every case runs in a child process (forked from a clean fork server, the :class:`Zygote`, that
has already imported Ember, so a case costs milliseconds, not an interpreter start) under a
memory limit and a timeout. The child compiles (or loads) the input and, when that succeeds, runs it
once on random inputs of its declared shapes (unless they are symbolic or too large). The
outcome is one of :data:`OUTCOMES`:

- ``ok``: compiled (or loaded) and ran;
- ``ember_error``: an :class:`~ember.errors.EmberError` subclass, the expected rejection;
- ``other_exception``: any other Python exception: a bug (the user should get an EmberError
  naming the node);
- ``crash``: the child died (a signal, or an exit without a result);
- ``hang``: the child ran past the timeout (its Python stack is dumped to the case's log first).

Crashes, hangs and other exceptions are saved under ``out/failures/<kind>-<outcome>-<case>/``
(the input, ``case.json`` with the seed, mutations, traceback and log) and replay with
:func:`replay` (``python bench/fuzz.py --replay DIR``).
"""
from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import random
import re
import shutil
import signal
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Callable, Dict, List, Optional

import numpy as np

from ..runtime.verify import DTYPES, reseal

OUTCOMES = ("ok", "ember_error", "other_exception", "crash", "hang")
FAILURES = ("other_exception", "crash", "hang")
KINDS = ("onnx", "export")
SUFFIX = {"onnx": ".onnx", "export": ".so"}

# ------------------------------------------------------------------------------------------------
# seed corpus: small models with random weights (they compile in about a second, cold)
# ------------------------------------------------------------------------------------------------


def _models():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def make(nodes, inputs, outputs, inits, name, opset=17):
        graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        try:  # value_info gives the structure-aware mutators more to mutate
            m = onnx.shape_inference.infer_shapes(m)
        except Exception:  # pragma: no cover - onnx's inference is a nicety here
            pass
        return m

    return onnx, TensorProto, helper, numpy_helper, make


def conv_net_model(rng: np.random.Generator):
    """Conv/Relu/MaxPool, a second conv, Flatten/Gemm/Softmax on a 1x3x16x16 image."""
    onnx, TP, h, nh, make = _models()
    f32 = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    inits = [nh.from_array(f32(8, 3, 3, 3), "w1"), nh.from_array(f32(8), "b1"),
             nh.from_array(f32(8, 8, 1, 1), "w2"), nh.from_array(f32(10, 128), "fc"),
             nh.from_array(f32(10), "fc_b")]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[1, 1]),
             h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             h.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", group=1),
             h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             h.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Flatten", ["p2"], ["f"], name="flatten", axis=1),
             h.make_node("Gemm", ["f", "fc", "fc_b"], ["g"], name="fc", transB=1, alpha=1.0),
             h.make_node("Softmax", ["g"], ["y"], name="softmax", axis=1)]
    return make(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 16, 16])],
                [h.make_tensor_value_info("y", TP.FLOAT, [1, 10])], inits, "conv_net")


def shape_ops_model(rng: np.random.Generator):
    """Shape/Gather/Unsqueeze/Concat -> Reshape, Transpose, ConstantOfShape, Expand, Slice."""
    onnx, TP, h, nh, make = _models()
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    inits = [nh.from_array(np.array(0, dtype=np.int64), "idx0"), nh.from_array(i64(0), "axes0"),
             nh.from_array(i64(-1), "minus1"), nh.from_array(rng.standard_normal((1, 2)).astype(np.float32), "bias"),
             nh.from_array(i64(0), "starts"), nh.from_array(i64(6), "ends"), nh.from_array(i64(0), "slice_axes")]
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Gather", ["s", "idx0"], ["d0"], name="gather", axis=0),
             h.make_node("Unsqueeze", ["d0", "axes0"], ["d0u"], name="unsqueeze"),
             h.make_node("Concat", ["d0u", "minus1"], ["shp"], name="concat_shape", axis=0),
             h.make_node("Reshape", ["x", "shp"], ["r"], name="reshape"),
             h.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[1, 0]),
             h.make_node("Shape", ["t"], ["ts"], name="shape_t"),
             h.make_node("ConstantOfShape", ["ts"], ["half"], name="const_of_shape",
                         value=h.make_tensor("v", TP.FLOAT, [1], [0.5])),
             h.make_node("Expand", ["bias", "ts"], ["e"], name="expand"),
             h.make_node("Add", ["t", "half"], ["a"], name="add"),
             h.make_node("Mul", ["a", "e"], ["m"], name="mul"),
             h.make_node("Slice", ["m", "starts", "ends", "slice_axes"], ["sl"], name="slice"),
             h.make_node("Concat", ["sl", "sl"], ["y"], name="concat", axis=0)]
    return make(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [2, 3, 4])],
                [h.make_tensor_value_info("y", TP.FLOAT, [12, 2])], inits, "shape_ops")


def transformer_model(rng: np.random.Generator):
    """An embedding lookup (Gather of token ids given at run time: the random inputs are 0 to
    2), one attention head and an MLP on 1x8x16: MatMul/Transpose/Div/Softmax, Add,
    LayerNormalization, an Erf GELU, and a ReduceMean/Sub/Pow/Sqrt layer norm."""
    onnx, TP, h, nh, make = _models()
    f32 = lambda *s: (rng.standard_normal(s) * 0.25).astype(np.float32)  # noqa: E731
    sc = lambda name, v: nh.from_array(np.array(v, dtype=np.float32), name)  # noqa: E731
    inits = [nh.from_array(f32(16, 16), n) for n in ("wq", "wk", "wv")]
    inits += [nh.from_array(f32(16, 32), "w1"), nh.from_array(f32(32), "b1"), nh.from_array(f32(32, 16), "w2"),
              nh.from_array(f32(16), "b2"), nh.from_array(np.ones(16, np.float32), "ln_s"),
              nh.from_array(np.zeros(16, np.float32), "ln_b"), sc("four", 4.0), sc("half", 0.5), sc("one", 1.0),
              sc("rsqrt2", 1 / math.sqrt(2)), sc("two", 2.0), sc("eps", 1e-5),
              nh.from_array(np.array([-1], dtype=np.int64), "last")]
    inits.append(nh.from_array(f32(10, 16), "embedding"))
    n = h.make_node
    nodes = [n("Gather", ["embedding", "ids"], ["emb"], name="embed", axis=0),
             n("Add", ["x0", "emb"], ["x"], name="add_embedding"),
             n("MatMul", ["x", "wq"], ["q"], name="q"), n("MatMul", ["x", "wk"], ["k"], name="k"),
             n("MatMul", ["x", "wv"], ["v"], name="v"),
             n("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
             n("MatMul", ["q", "kt"], ["s"], name="scores"), n("Div", ["s", "four"], ["s2"], name="scale"),
             n("Softmax", ["s2"], ["att"], name="softmax", axis=-1), n("MatMul", ["att", "v"], ["o"], name="attend"),
             n("Add", ["x", "o"], ["h"], name="residual1"),
             n("LayerNormalization", ["h", "ln_s", "ln_b"], ["ln"], name="ln1", axis=-1, epsilon=1e-5),
             n("MatMul", ["ln", "w1"], ["m1"], name="mlp1"), n("Add", ["m1", "b1"], ["m1b"], name="mlp1_bias"),
             n("Mul", ["m1b", "rsqrt2"], ["gs"], name="gelu_scale"), n("Erf", ["gs"], ["ge"], name="gelu_erf"),
             n("Add", ["ge", "one"], ["g1"], name="gelu_add"), n("Mul", ["m1b", "g1"], ["g2"], name="gelu_mul"),
             n("Mul", ["g2", "half"], ["g"], name="gelu_half"),
             n("MatMul", ["g", "w2"], ["m2"], name="mlp2"), n("Add", ["m2", "b2"], ["m2b"], name="mlp2_bias"),
             n("Add", ["ln", "m2b"], ["h2"], name="residual2"),
             n("ReduceMean", ["h2"], ["mu"], name="mean", axes=[-1], keepdims=1),
             n("Sub", ["h2", "mu"], ["d"], name="center"), n("Pow", ["d", "two"], ["d2"], name="square"),
             n("ReduceMean", ["d2"], ["var"], name="var", axes=[-1], keepdims=1),
             n("Add", ["var", "eps"], ["ve"], name="var_eps"), n("Sqrt", ["ve"], ["sd"], name="std"),
             n("Div", ["d", "sd"], ["y"], name="normalize")]
    return make(nodes, [h.make_tensor_value_info("x0", TP.FLOAT, [1, 8, 16]),
                        h.make_tensor_value_info("ids", TP.INT64, [1, 8])],
                [h.make_tensor_value_info("y", TP.FLOAT, [1, 8, 16])], inits, "transformer")


SEED_MODELS: Dict[str, Callable] = {"conv_net": conv_net_model, "shape_ops": shape_ops_model,
                                    "transformer": transformer_model}


def seed_models(seed: int = 0) -> Dict[str, bytes]:
    """The seed ONNX models, serialized (random weights from ``seed``)."""
    return {name: fn(np.random.default_rng([seed, k])).SerializeToString()
            for k, (name, fn) in enumerate(SEED_MODELS.items())}


# ------------------------------------------------------------------------------------------------
# interesting values
# ------------------------------------------------------------------------------------------------

INTERESTING_INTS = [0, 1, -1, 2, -2, 3, 4, 7, 8, 16, 64, 255, 1000, 65535, 65536, 2 ** 31 - 1, -2 ** 31,
                    2 ** 32, 2 ** 40, 2 ** 62, 2 ** 63 - 1, -2 ** 63]
INTERESTING_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, 1e30, 3.4e38, 1e-45, float("inf"), float("-inf"), float("nan")]


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


INTERESTING_BYTES = ([b"\x00", b"\xff", b"\x7f", b"\x80", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff"]
                     + [struct.pack("<q", v) for v in (0, -1, 2 ** 31 - 1, 2 ** 32, 2 ** 63 - 1, -2 ** 63)]
                     + [struct.pack("<i", v) for v in (-1, 2 ** 31 - 1, -2 ** 31, 65536)]
                     + [struct.pack("<f", v) for v in (float("nan"), float("inf"), 1e30)]
                     + [_varint(v) for v in (0, 2 ** 31, 2 ** 32, 2 ** 63 - 1, -1)])


def _int(rng: random.Random) -> int:
    return rng.choice(INTERESTING_INTS) if rng.random() < 0.7 else rng.randint(-10, 100)


def _float(rng: random.Random) -> float:
    return rng.choice(INTERESTING_FLOATS) if rng.random() < 0.7 else rng.uniform(-10, 10)


# ------------------------------------------------------------------------------------------------
# byte-level mutators: (bytes, rng, context) -> (bytes, description)
# ------------------------------------------------------------------------------------------------


def _span(rng: random.Random, lo: int, hi: int, n: int = 1) -> int:
    """A position in [lo, hi - n] (lo when the range is too small)."""
    return rng.randint(lo, max(lo, hi - n))


def flip_bits(data: bytes, rng: random.Random, lo: int = 0, hi: Optional[int] = None) -> tuple:
    hi = len(data) if hi is None else hi
    b = bytearray(data)
    if not b or hi <= lo:
        return data, "flip (empty)"
    k = rng.randint(1, 8)
    where = []
    for _ in range(k):
        i = _span(rng, lo, hi)
        b[i] ^= 1 << rng.randrange(8)
        where.append(i)
    return bytes(b), f"flip {k} bit(s) at {where[:4]}"


def overwrite_interesting(data: bytes, rng: random.Random, lo: int = 0, hi: Optional[int] = None) -> tuple:
    hi = len(data) if hi is None else hi
    v = rng.choice(INTERESTING_BYTES)
    if hi - lo < len(v):
        return flip_bits(data, rng, lo, hi)
    i = _span(rng, lo, hi, len(v))
    return data[:i] + v + data[i + len(v):], f"overwrite {v.hex()} at {i}"


def overwrite_random(data: bytes, rng: random.Random, lo: int = 0, hi: Optional[int] = None) -> tuple:
    hi = len(data) if hi is None else hi
    n = min(rng.choice([1, 2, 4, 8, 16, 64]), max(0, hi - lo))
    if not n:
        return data, "overwrite (empty)"
    i = _span(rng, lo, hi, n)
    fill = rng.choice([bytes(n), b"\xff" * n, bytes(rng.randrange(256) for _ in range(n))])
    return data[:i] + fill + data[i + n:], f"overwrite {n} byte(s) at {i} with {fill[:8].hex()}"


def insert_bytes(data: bytes, rng: random.Random) -> tuple:
    i = rng.randint(0, len(data))
    v = rng.choice(INTERESTING_BYTES) if rng.random() < 0.5 else bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return data[:i] + v + data[i:], f"insert {v.hex()} at {i}"


def delete_bytes(data: bytes, rng: random.Random) -> tuple:
    if not data:
        return data, "delete (empty)"
    n = rng.randint(1, min(64, len(data)))
    i = _span(rng, 0, len(data), n)
    return data[:i] + data[i + n:], f"delete {n} byte(s) at {i}"


def truncate(data: bytes, rng: random.Random) -> tuple:
    n = rng.choice([0, rng.randint(0, len(data)), max(0, len(data) - rng.randint(1, 64))])
    return data[:n], f"truncate to {n} of {len(data)} bytes"


def splice(data: bytes, rng: random.Random, others: List[bytes]) -> tuple:
    other = rng.choice(others)
    i, j = rng.randint(0, len(data)), rng.randint(0, len(other))
    return data[:i] + other[j:], f"splice at {i} with another seed from {j}"


def mutate_bytes(data: bytes, rng: random.Random, others: List[bytes]) -> tuple:
    """One byte-level mutation anywhere in ``data``."""
    m = rng.choice([flip_bits, flip_bits, overwrite_interesting, overwrite_interesting, overwrite_random,
                    insert_bytes, delete_bytes, truncate, splice])
    return m(data, rng, others) if m is splice else m(data, rng)


# ------------------------------------------------------------------------------------------------
# structure-aware ONNX mutators: (ModelProto, rng) -> description, or None when not applicable
# ------------------------------------------------------------------------------------------------

OP_POOL = ["Conv", "Relu", "MaxPool", "Gemm", "Softmax", "Flatten", "Shape", "Gather", "Reshape", "Concat",
           "ConstantOfShape", "Expand", "MatMul", "Add", "Sub", "Mul", "Div", "LayerNormalization", "Transpose",
           "Slice", "Unsqueeze", "Squeeze", "ReduceMean", "ReduceSum", "Pow", "Sqrt", "Erf", "Sigmoid", "Tanh",
           "AveragePool", "GlobalAveragePool", "BatchNormalization", "Pad", "Split", "Tile", "Where", "Cast",
           "Identity", "Clip", "Resize", "TopK", "ArgMax", "Einsum", "ConvTranspose", "Range", "OneHot",
           "GatherElements", "ScatterND", "CumSum", "Trilu", "Size", "Constant", "Dropout", "LRN", "Min", "Max",
           "InstanceNormalization", "DepthToSpace", "Hardmax", "NotAnOp"]
ATTR_NAMES = ["axis", "axes", "perm", "pads", "strides", "kernel_shape", "dilations", "group", "transA", "transB",
              "alpha", "beta", "epsilon", "keepdims", "to", "auto_pad", "ceil_mode", "value", "mode", "allowzero",
              "batch_dims", "stash_type", "split", "num_outputs", "output_padding", "k", "largest", "upper"]
ELEM_TYPES = [1, 1, 2, 3, 5, 6, 7, 9, 10, 11, 16, 8, 14, 0, 99]  # float x2, uint8, int8, int16, ..., string, complex


def _value_names(m) -> List[str]:
    g = m.graph
    names = [i.name for i in g.input] + [t.name for t in g.initializer]
    names += [o for n in g.node for o in n.output if o]
    return names or ["x"]


def _tensors(m) -> list:
    """Initializers and the tensors inside node attributes (Constant's value, ...)."""
    out = [(f"initializer {t.name!r}", t) for t in m.graph.initializer]
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == 4:  # TENSOR
                out.append((f"{n.name}.{a.name}", a.t))
    return out


def m_attribute_value(m, rng):
    cands = [(n, a) for n in m.graph.node for a in n.attribute if a.type in (1, 2, 3, 6, 7)]
    if not cands:
        return None
    n, a = rng.choice(cands)
    if a.type == 2:  # INT
        a.i = _int(rng)
        return f"{n.name}.{a.name} = {a.i}"
    if a.type == 1:  # FLOAT
        a.f = _float(rng)
        return f"{n.name}.{a.name} = {a.f}"
    if a.type == 3:  # STRING
        a.s = rng.choice([b"", b"bogus", b"NOTSET", b"SAME_UPPER", b"SAME_LOWER", b"VALID", b"\xff\xfe", b"nearest"])
        return f"{n.name}.{a.name} = {a.s!r}"
    field = a.ints if a.type == 7 else a.floats
    new = _int if a.type == 7 else _float
    op = rng.choice(["set", "set", "append", "pop", "clear", "double"])
    if op == "set" and len(field):
        field[rng.randrange(len(field))] = new(rng)
    elif op == "append" or (op == "set" and not len(field)):
        field.append(new(rng))
    elif op == "pop" and len(field):
        field.pop(rng.randrange(len(field)))
    elif op == "clear":
        del field[:]
    elif op == "double":
        field.extend(list(field))
    return f"{n.name}.{a.name} {op} -> {list(field)[:8]}"


def m_attribute_drop(m, rng):
    cands = [n for n in m.graph.node if len(n.attribute)]
    if not cands:
        return None
    n = rng.choice(cands)
    a = n.attribute.pop(rng.randrange(len(n.attribute)))
    return f"drop {n.name}.{a.name}"


def m_attribute_add(m, rng):
    from onnx import helper

    if not m.graph.node:
        return None
    n = rng.choice(m.graph.node)
    name = rng.choice(ATTR_NAMES)
    kind = rng.choice(["int", "ints", "float", "string"])
    value = {"int": lambda: _int(rng), "float": lambda: _float(rng), "string": lambda: rng.choice(["", "VALID", "x"]),
             "ints": lambda: [_int(rng) for _ in range(rng.randint(0, 6))]}[kind]()
    for k, a in enumerate(n.attribute):
        if a.name == name:
            n.attribute.pop(k)
            break
    n.attribute.append(helper.make_attribute(name, value))
    return f"{n.name}.{name} := {value!r}"


def m_tensor_dims(m, rng):
    cands = _tensors(m)
    if not cands:
        return None
    what, t = rng.choice(cands)
    op = rng.choice(["set", "set", "append", "pop", "clear"])
    if op == "set" and len(t.dims):
        t.dims[rng.randrange(len(t.dims))] = _int(rng)
    elif op in ("append", "set"):
        t.dims.append(_int(rng) if rng.random() < 0.5 else 1)
    elif op == "pop" and len(t.dims):
        t.dims.pop(rng.randrange(len(t.dims)))
    else:
        del t.dims[:]
    return f"{what} dims {op} -> {list(t.dims)}"


def m_tensor_data(m, rng):
    cands = _tensors(m)
    if not cands:
        return None
    what, t = rng.choice(cands)
    op = rng.choice(["dtype", "dtype", "truncate", "extend", "clear", "float_data", "external"])
    if op == "dtype":
        t.data_type = rng.choice(ELEM_TYPES)
        return f"{what} data_type = {t.data_type}"
    if op == "truncate" and t.raw_data:
        t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data))]
    elif op == "extend":
        t.raw_data = t.raw_data + bytes(rng.choice([1, 4, 8, 64]))
    elif op == "clear":
        t.ClearField("raw_data")
    elif op == "float_data":
        t.ClearField("raw_data")
        t.float_data.extend(_float(rng) for _ in range(rng.randint(0, 4)))
    elif op == "external":
        t.ClearField("raw_data")
        t.data_location = 1  # EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", rng.choice(["missing.bin", "", "../../../../dev/null"])
    return f"{what} data {op}"


def m_tensor_values(m, rng):
    """An element of a tensor set to an interesting value: indices, shapes, axes, slice bounds
    and the value of ConstantOfShape are where semantics break."""
    from onnx import numpy_helper

    cands = [(w, t) for w, t in _tensors(m) if t.data_type in (1, 6, 7) and not t.external_data]
    ints = [(w, t) for w, t in cands if t.data_type in (6, 7)]
    if not cands:
        return None
    what, t = rng.choice(ints if ints and rng.random() < 0.8 else cands)
    try:
        a = numpy_helper.to_array(t).copy()
    except Exception:  # an earlier mutation broke it
        return None
    if not a.size:
        return None
    flat = a.reshape(-1)
    k = rng.randrange(flat.size)
    if a.dtype.kind == "f":
        flat[k] = _float(rng)
    else:
        info = np.iinfo(a.dtype)
        flat[k] = min(max(_int(rng), info.min), info.max)
    t.CopyFrom(numpy_helper.from_array(a, t.name))
    return f"{what}[{k}] = {flat[k]}"


def _value_infos(m) -> list:
    g = m.graph
    inits = {t.name for t in g.initializer}
    return ([("input", v) for v in g.input if v.name not in inits] + [("output", v) for v in g.output]
            + [("value_info", v) for v in g.value_info])


def m_value_dims(m, rng):
    cands = [(w, v) for w, v in _value_infos(m) if v.type.HasField("tensor_type")]
    if not cands:
        return None
    where, v = rng.choice(cands)
    tt = v.type.tensor_type
    dims = tt.shape.dim
    op = rng.choice(["set", "set", "set", "param", "append", "pop", "noshape"])
    if op == "set" and len(dims):
        dims[rng.randrange(len(dims))].dim_value = rng.choice([0, -1, -5, 2 ** 20, 2 ** 31, 2 ** 40, 2 ** 62, 3, 1000])
    elif op == "param" and len(dims):
        dims[rng.randrange(len(dims))].dim_param = rng.choice(["N", "batch", ""])
    elif op in ("append", "set", "param"):
        dims.add().dim_value = rng.choice([1, 2, 0, 2 ** 31])
    elif op == "pop" and len(dims):
        dims.pop(rng.randrange(len(dims)))
    else:
        tt.ClearField("shape")
    shape = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tt.shape.dim]
    return f"{where} {v.name!r} shape {op} -> {shape if tt.HasField('shape') else None}"


def m_op_type(m, rng):
    if not m.graph.node:
        return None
    n = rng.choice(m.graph.node)
    old = n.op_type
    if rng.random() < 0.1:
        n.domain = rng.choice(["com.microsoft", "ai.onnx.ml", "bogus"])
        return f"{n.name} domain = {n.domain!r}"
    n.op_type = rng.choice(OP_POOL)
    return f"{n.name} op {old} -> {n.op_type}"


def m_node_inputs(m, rng):
    if not m.graph.node:
        return None
    n = rng.choice(m.graph.node)
    ins = n.input
    op = rng.choice(["drop", "duplicate", "empty", "swap", "rewire", "rewire", "unknown"])
    if op == "drop" and len(ins):
        ins.pop(rng.randrange(len(ins)))
    elif op == "duplicate" and len(ins):
        ins.append(rng.choice(list(ins)))
    elif op == "empty":
        ins.insert(rng.randint(0, len(ins)), "")
    elif op == "swap" and len(ins) >= 2:
        i, j = rng.sample(range(len(ins)), 2)
        ins[i], ins[j] = ins[j], ins[i]
    elif op == "rewire" and len(ins):  # may make a cycle: a node fed by a later one
        ins[rng.randrange(len(ins))] = rng.choice(_value_names(m))
    elif op == "unknown" and len(ins):
        ins[rng.randrange(len(ins))] = "no_such_value"
    else:
        return None
    return f"{n.name} inputs {op} -> {list(ins)}"


def m_node_outputs(m, rng):
    g = m.graph
    if not g.node:
        return None
    n = rng.choice(g.node)
    op = rng.choice(["drop", "extra", "rename", "reuse", "graph_output", "graph_output_drop"])
    if op == "drop" and len(n.output) > 1:
        n.output.pop(rng.randrange(len(n.output)))
    elif op == "extra":
        n.output.append(f"extra_{len(n.output)}")
    elif op == "rename" and len(n.output):
        n.output[0] = n.output[0] + "_renamed"
    elif op == "reuse" and len(n.output):  # produced twice, or overwriting an input/initializer
        n.output[0] = rng.choice(_value_names(m))
    elif op == "graph_output" and len(g.output):
        g.output[rng.randrange(len(g.output))].name = rng.choice(_value_names(m))
    elif op == "graph_output_drop" and len(g.output):
        g.output.pop(rng.randrange(len(g.output)))
    else:
        return None
    return f"{n.name} outputs {op} -> {list(n.output)} (graph outputs {[o.name for o in g.output]})"


def m_dtype(m, rng):
    g = m.graph
    cands = [("value", v) for _, v in _value_infos(m) if v.type.HasField("tensor_type")]
    cands += [("attr", (n, a)) for n in g.node for a in n.attribute if a.name == "to"]
    if not cands:
        return None
    kind, x = rng.choice(cands)
    et = rng.choice(ELEM_TYPES)
    if kind == "value":
        x.type.tensor_type.elem_type = et
        return f"{x.name!r} elem_type = {et}"
    n, a = x
    a.i = et
    return f"{n.name}.to = {et}"


def m_rename(m, rng):
    """Rename a value everywhere it appears except in one place (or everywhere)."""
    names = _value_names(m)
    old = rng.choice(names)
    new = rng.choice(["", "x", "y", old + "'", "\u00e9", "a" * 300]) if rng.random() < 0.5 else rng.choice(names)
    every = rng.random() < 0.5
    g = m.graph
    seen = 0
    for n in g.node:
        for seq in (n.input, n.output):
            for i, s in enumerate(seq):
                if s == old and (every or seen == 0):
                    seq[i] = new
                    seen += 1
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.name == old and every:
            v.name = new
    for t in g.initializer:
        if t.name == old and every:
            t.name = new
    return f"rename {old!r} -> {new!r} ({'everywhere' if every else 'first use'})"


def m_opset(m, rng):
    op = rng.choice(["version", "version", "drop", "extra", "ir"])
    if op == "version" and len(m.opset_import):
        m.opset_import[0].version = rng.choice([1, 6, 7, 8, 10, 11, 12, 13, 14, 16, 18, 19, 20, 21, 22, 28, 29, 100,
                                                0, -1])
        return f"opset -> {m.opset_import[0].version}"
    if op == "drop":
        del m.opset_import[:]
        return "no opset_import"
    if op == "extra":
        o = m.opset_import.add()
        o.domain, o.version = rng.choice([("", 11), ("ai.onnx", 13), ("com.microsoft", 1)])
        return f"extra opset_import {o.domain!r} {o.version}"
    m.ir_version = rng.choice([0, 1, 3, 7, 10, 100])
    return f"ir_version -> {m.ir_version}"


def m_nodes(m, rng):
    g = m.graph
    if not g.node:
        return None
    op = rng.choice(["delete", "duplicate", "move", "clear_name"])
    k = rng.randrange(len(g.node))
    n = g.node[k]
    if op == "delete":
        g.node.pop(k)
    elif op == "duplicate":
        g.node.insert(rng.randint(0, len(g.node)), n)
    elif op == "move":
        copy = type(n)()
        copy.CopyFrom(n)
        g.node.pop(k)
        g.node.insert(rng.randint(0, len(g.node)), copy)
    else:
        n.name = ""
    return f"node {k} ({n.op_type}) {op}"


def m_graph_inputs(m, rng):
    from onnx import TensorProto, helper

    g = m.graph
    op = rng.choice(["drop", "duplicate", "shadow_initializer", "extra"])
    if op == "drop" and len(g.input):
        g.input.pop(rng.randrange(len(g.input)))
    elif op == "duplicate" and len(g.input):
        g.input.append(rng.choice(g.input))
    elif op == "shadow_initializer" and len(g.initializer):
        t = rng.choice(g.initializer)
        g.input.append(helper.make_tensor_value_info(t.name, rng.choice([TensorProto.FLOAT, TensorProto.INT64]),
                                                     [rng.choice([1, 2, 0, 7]) for _ in range(rng.randint(0, 3))]))
    elif op == "extra":
        g.input.append(helper.make_tensor_value_info("extra_input", TensorProto.FLOAT, [rng.choice([1, 2 ** 31, 0])]))
    else:
        return None
    return f"graph input {op} -> {[i.name for i in g.input]}"


ONNX_MUTATORS = [m_attribute_value, m_attribute_value, m_attribute_value, m_attribute_drop, m_attribute_add,
                 m_tensor_dims, m_tensor_dims, m_tensor_data, m_tensor_values, m_tensor_values, m_tensor_values,
                 m_value_dims, m_value_dims, m_op_type, m_op_type, m_node_inputs, m_node_inputs, m_node_outputs,
                 m_dtype, m_rename, m_opset, m_nodes, m_graph_inputs]


def mutate_onnx(data: bytes, rng: random.Random, others: List[bytes]) -> tuple:
    """One to three structure-aware and/or byte-level mutations of a serialized model:
    ``(bytes, [descriptions])``."""
    import onnx

    muts: List[str] = []
    r = rng.random()
    if r < 0.7:  # structure (and sometimes bytes on top)
        m = onnx.ModelProto()
        m.ParseFromString(data)
        for _ in range(rng.choice([1, 1, 2, 3])):
            fn = rng.choice(ONNX_MUTATORS)
            try:
                d = fn(m, rng)
            except (ValueError, TypeError, IndexError) as e:  # a value protobuf refuses
                d = f"{fn.__name__} refused ({type(e).__name__})"
            muts.append(f"{fn.__name__}: {d}" if d else f"{fn.__name__}: n/a")
        data = m.SerializeToString()
    if r >= 0.55:
        for _ in range(rng.choice([1, 1, 2])):
            data, d = mutate_bytes(data, rng, others)
            muts.append(f"bytes: {d}")
    return data, muts


# ------------------------------------------------------------------------------------------------
# export mutators: the ELF layout and the JSON documents inside
# ------------------------------------------------------------------------------------------------


def elf_regions(data: bytes) -> Dict[str, tuple]:
    """Named byte ranges ``[start, end)`` of a little-endian ELF64 file: ``elf_header``,
    ``program_headers``, ``section_headers``, every section with bytes in the file (``.text``,
    ``.rodata``, ``.dynsym``, ...), ``trailer`` (whatever follows the last section and the section
    headers; the last 256 bytes when nothing does) and ``json:<start>`` for each JSON object
    embedded as a NUL-terminated string (the program, the kernel metadata). Best effort: a
    region that cannot be read is left out."""
    out: Dict[str, tuple] = {}
    n = len(data)
    if n >= 64 and data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1:
        out["elf_header"] = (0, 64)
        phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
        if phoff + phnum * phentsize <= n:
            out["program_headers"] = (phoff, phoff + phnum * phentsize)
        end = 0
        if shentsize >= 64 and shoff + shnum * shentsize <= n:
            out["section_headers"] = (shoff, shoff + shnum * shentsize)
            end = shoff + shnum * shentsize
            secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize) for k in range(shnum)]
            strtab = secs[shstrndx] if shstrndx < shnum else None
            for s in secs:
                name_off, sh_type, _, _, off, size = s[:6]
                if sh_type == 8 or not size or off + size > n:  # NOBITS
                    continue
                name = "?"
                if strtab is not None:
                    a = strtab[4] + name_off
                    z = data.find(b"\0", a, a + 64)
                    name = data[a:z].decode("latin-1") if z > a else "?"
                out.setdefault(name or "?", (off, off + size))
                end = max(end, off + size)
        out["trailer"] = (end, n) if 0 < end < n else (max(0, n - 256), n)
    for mo in re.finditer(rb'\{"', data):
        a = mo.start()
        z = data.find(b"\0", a, a + (1 << 22))
        if z < 0 or any(a < s < z for s, _ in (v for k, v in out.items() if k.startswith("json:"))):
            continue
        try:
            doc = json.loads(data[a:z].decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict):
            out[f"json:{a}"] = (a, z)
            if isinstance(doc.get("constants"), list) and "calls" in doc:  # the program: weights follow
                try:
                    w0 = -(-(z + 1) // 64) * 64
                    size = max((c["offset"] + math.prod(c["shape"]) * DTYPES.get(c["dtype"], 1)
                                for c in doc["constants"]), default=0)
                    out["weights"] = (w0, min(n, w0 + size))
                except (TypeError, KeyError, ValueError, AttributeError):
                    pass  # a mutated program: no weights region
    return out


def _json_paths(doc, path=()) -> list:
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _json_paths(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _json_paths(v, path + (i,))
    return out


def _json_strings(doc) -> list:
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for v in doc.values() for s in _json_strings(v)] + list(doc)
    if isinstance(doc, list):
        return [s for v in doc for s in _json_strings(v)]
    return []


def mutate_json(doc, rng: random.Random) -> str:
    """Change one value of a JSON document in place (an int to an interesting one, a string to
    another string of the document, a list shortened or lengthened, a key dropped)."""
    paths = _json_paths(doc)[1:]
    if not paths:
        return "json: empty"
    path = rng.choice(paths)
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    v = parent[key]
    label = "/".join(str(p) for p in path)
    if isinstance(v, bool) or v is None:
        parent[key] = rng.choice([0, 1, None, True, "x"])
    elif isinstance(v, int):
        parent[key] = rng.choice([0, -1, 1, v + 1, v - 1, v * 2, v + 64, 2 ** 31, 2 ** 62, -2 ** 63, 2 ** 64])
    elif isinstance(v, float):
        parent[key] = rng.choice([0.0, -1.0, 1e308])
    elif isinstance(v, str):
        parent[key] = rng.choice(_json_strings(doc) + ["", "float64", "int8", "bogus", "output", "arena", "view"])
    elif isinstance(v, list):
        op = rng.choice(["drop", "dup", "clear"])
        if op == "drop" and v:
            v.pop(rng.randrange(len(v)))
        elif op == "dup" and v:
            v.append(v[rng.randrange(len(v))])
        else:
            v.clear()
        return f"json {label}: list {op}"
    elif isinstance(v, dict):
        if v and rng.random() < 0.7:
            k = rng.choice(list(v))
            del v[k]
            return f"json {label}: drop key {k!r}"
        parent[key] = rng.choice([[], 0, "x", None])
    return f"json {label}: {v!r:.40} -> {parent[key]!r:.40}"


def mutate_export(data: bytes, rng: random.Random, regions: Dict[str, tuple], others: List[bytes],
                  may_reseal: bool = True) -> tuple:
    """One mutation of an exported library: ``(bytes, description)``. ``may_reseal``: whether the
    bytes hold no change to code (only then may a change to data be resealed)."""
    r = rng.random()
    jsons = [k for k in regions if k.startswith("json:")]
    # A change to the program, the metadata or the weights is resealed (the trailer's checksum
    # made anew) most of the time: the checksum alone would catch it, and the structure checks
    # behind it need testing too. Code is never resealed: a library is native code, and loading
    # code changed consistently runs it (ember.load checks integrity, not trust).
    if r < 0.3 and jsons:  # a field of the program or the metadata, written back in place
        a, z = regions[rng.choice(jsons)]
        doc = json.loads(data[a:z].decode("utf-8"))
        d = mutate_json(doc, rng)
        for sep in ((", ", ": "), (",", ":")):
            text = json.dumps(doc, separators=sep).encode("utf-8")
            if len(text) <= z - a:
                out = data[:a] + text.ljust(z - a) + data[z:]
                if may_reseal and rng.random() < 0.8:
                    return reseal(out), f"{d} (json at {a}, resealed)"
                return out, f"{d} (json at {a})"
        return data, f"{d} (did not fit, not written)"
    if r < 0.4 and "weights" in regions and regions["weights"][1] > regions["weights"][0]:
        a, z = regions["weights"]
        m = rng.choice([flip_bits, overwrite_interesting, overwrite_random])
        out, d = m(data, rng, a, z)
        return (reseal(out), f"weights: {d} (resealed)") if may_reseal else (out, f"weights: {d}")
    if r < 0.75 and regions:  # bytes inside one ELF region
        name = rng.choice(sorted(regions))
        a, z = regions[name]
        if z - a <= 0:
            return data, f"region {name} empty"
        m = rng.choice([flip_bits, overwrite_interesting, overwrite_random])
        out, d = m(data, rng, a, z)
        return out, f"{name}: {d}"
    if r < 0.9:
        if rng.random() < 0.3 and regions:  # cut inside a region
            a, z = regions[rng.choice(sorted(regions))]
            n = rng.randint(a, z)
            return data[:n], f"truncate to {n} of {len(data)} bytes (inside a region)"
        return truncate(data, rng)
    if rng.random() < 0.3:
        extra = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        return data + extra, f"append {len(extra)} bytes"
    return mutate_bytes(data, rng, others)


# ------------------------------------------------------------------------------------------------
# cases
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    """One fuzz input: ``data`` is the mutated model (ONNX bytes or a library)."""

    kind: str
    index: int
    seed: int  # the random inputs of the run
    source: str  # the seed model it was made from
    mutations: List[str]
    data: bytes = dataclasses.field(repr=False)


class Corpus:
    """Seed inputs: ONNX models (serialized) and, for ``export`` cases, those models exported."""

    def __init__(self, onnx_models: Dict[str, bytes], exports: Optional[Dict[str, bytes]] = None):
        self.onnx = dict(onnx_models)
        self.exports = dict(exports or {})
        self.regions = {k: elf_regions(v) for k, v in self.exports.items()}

    def make_case(self, kind: str, run_seed: int, index: int) -> Case:
        rng = random.Random(f"ember-fuzz:{run_seed}:{kind}:{index}")
        seeds = self.onnx if kind == "onnx" else self.exports
        source = rng.choice(sorted(seeds))
        others = [seeds[k] for k in sorted(seeds)]
        if kind == "onnx":
            data, muts = mutate_onnx(seeds[source], rng, others)
        else:
            data, muts = seeds[source], []
            data_only = True  # no change outside the program, metadata and weights so far
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                regions = self.regions[source] if not muts else elf_regions(data)
                data, d = mutate_export(data, rng, regions, others, may_reseal=data_only)
                data_only = data_only and d.startswith(("json", "weights:"))
                muts.append(d)
        return Case(kind, index, rng.getrandbits(32), source, muts, data)


# ------------------------------------------------------------------------------------------------
# running one input in a child process
# ------------------------------------------------------------------------------------------------

MAX_RUN_ELEMENTS = 1 << 22  # of the inputs, and of the outputs: larger models compile but do not run
MAX_RUN_ARENA_BYTES = 1 << 28  # nor do those with more intermediates
_PRELOAD = ["numpy", "onnx", "ember", "ember.compiler.compile", "ember.frontend.onnx.importer",
            "ember.graph.ops.compute", "ember.runtime.load"]


@dataclasses.dataclass
class Result:
    outcome: str
    detail: str = ""  # the error message, the signal, the phase that hung
    traceback: str = ""
    phase: str = ""  # compile/load/run: how far the child got
    seconds: float = 0.0
    ran: bool = False
    log: str = ""  # the child's stdout and stderr (faulthandler's stacks on a crash or hang)

    def signature(self) -> str:
        """What groups results that are likely the same bug."""
        if self.outcome == "other_exception":
            frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', self.traceback)
            ours = [f for f in frames if "/ember/" in f[0] and "/ember/testing/" not in f[0]] or frames
            where = ""
            if ours:
                f = ours[-1]
                where = f" at {f[0].split('/ember/')[-1]}:{f[1]} ({f[2]})"
            return f"{self.detail.split(':')[0]}{where}"
        if self.outcome == "crash":
            return f"crash {self.detail.split(' ')[0]} in {self.phase}"
        if self.outcome == "hang":
            return f"hang in {self.phase}"
        return self.outcome


def _small(exe) -> bool:
    """Whether a run of ``exe`` is quick enough to do: outputs and intermediates of bounded size
    (a mutated model may be valid and just big; a slow run is not a hang)."""
    try:
        out = sum(int(np.prod(o.shape, dtype=object)) for o in exe.output_info)
        arena = int(exe.program.get("arena_bytes", 0))
    except (TypeError, ValueError, AttributeError):
        return True  # let the run find out
    return out <= MAX_RUN_ELEMENTS and arena <= MAX_RUN_ARENA_BYTES


def _random_inputs(infos, rng: np.random.Generator) -> Optional[list]:
    """Arrays for ``[(name, shape, dtype)]``; None when a shape is symbolic or too large."""
    from ember.runtime.ndarray import numpy_dtype

    total = 0
    for _, shape, dtype in infos:
        if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
            return None
        total += int(np.prod(shape, dtype=object)) if shape else 1
        if total > MAX_RUN_ELEMENTS:
            return None
    arrays = []
    for _, shape, dtype in infos:
        dt = numpy_dtype(dtype)
        if dt.kind == "f" or dt.name == "bfloat16":
            a = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            a = rng.random(shape) < 0.5
        elif dt.kind in "iu":  # small indices, now and then some far out of range
            info = np.iinfo(dt)
            a = rng.integers(0, 3, size=shape).astype(dt)
            if a.size and rng.random() < 0.3:
                v = [int(info.max), int(info.min), 1000, -1000][int(rng.integers(4))]
                a.reshape(-1)[rng.integers(0, a.size)] = min(max(v, int(info.min)), int(info.max))
        else:
            a = np.zeros(shape, dt)
        arrays.append(a)
    return arrays


# -- the child: one case, in a process forked from the zygote -------------------------------------

def _send(fd: int, *msg) -> None:
    os.write(fd, (json.dumps(msg) + "\n").encode("utf-8"))


def _child_case(fd: int, req: dict) -> None:
    """Compile (or load) ``req["path"]``, then run it once; writes ``["phase", name]`` lines and
    one ``["result", outcome, detail, traceback, ran]`` line to ``fd``."""
    import faulthandler
    import resource

    log = open(req["log"], "w", buffering=1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    faulthandler.enable(file=log)
    faulthandler.dump_traceback_later(max(0.5, req["timeout"] - 1.0), file=log)  # a hang's stack, before the kill
    os.environ.update(req["env"])
    if req.get("memory_mb"):
        lim = int(req["memory_mb"]) << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    ran = False
    try:
        import ember

        if req["kind"] == "selftest":  # each outcome on demand, for the runner's own tests
            action = req["action"]
            if action == "segfault":
                import ctypes

                ctypes.string_at(0)
            elif action == "hang":
                time.sleep(3600)
            elif action == "exit":
                os._exit(3)
            elif action == "other_exception":
                raise ValueError("self test")
            elif action == "ember_error":
                raise ember.errors.ModelError("self test")
            _send(fd, "result", "ok", "", "", False)
            return
        if req["kind"] == "build":  # compile and export the seed models
            for src, dst in req["items"]:
                ember.compile(src).export(dst)
            _send(fd, "result", "ok", "", "", False)
            return
        _send(fd, "phase", "compile" if req["kind"] == "onnx" else "load")
        # the compile's default memory limit counts the room under this child's rlimit
        exe = ember.compile(req["path"]) if req["kind"] == "onnx" else ember.load(req["path"])
        arrays = _random_inputs(exe.input_info, np.random.default_rng(req["seed"])) if _small(exe) else None
        if arrays is not None:
            _send(fd, "phase", "run")
            exe.run(*arrays)
            ran = True
        _send(fd, "result", "ok", "" if ran else "not run (symbolic shapes or too large)", "", ran)
    except BaseException as e:  # noqa: B036 - every exception is an outcome here
        from ember.errors import EmberError

        outcome = "ember_error" if isinstance(e, EmberError) else "other_exception"
        detail = f"{type(e).__name__}: {e}"[:4000]
        _send(fd, "result", outcome, detail, traceback.format_exc()[-20000:], ran)
    finally:
        faulthandler.cancel_dump_traceback_later()


# -- the zygote: a process that imported Ember once and forks a child per case ---------------------

def _wait(pid: int, seconds: float):
    """The child's wait status, or None if it is still running after ``seconds``."""
    end = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= end:
            return None
        time.sleep(0.01)


def _kill_group(pid: int) -> int:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass
    return os.waitpid(pid, 0)[1]


def _fork_case(req: dict) -> dict:
    """Run ``req`` in a forked child with its timeout; the result as a dict (see :class:`Result`)."""
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            os.close(r)
            os.setpgid(0, 0)  # its own process group: a hang's helpers die with it
            _child_case(w, req)
        except BaseException:  # noqa: B036
            code = 70
        os._exit(code)
    os.close(w)
    timeout = req["timeout"]
    deadline = t0 + timeout
    phase, result, buf, eof = "start", None, b"", False
    while result is None and not eof:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([r], [], [], left)[0]:
            break
        chunk = os.read(r, 1 << 16)
        eof = not chunk
        buf += chunk
        while b"\n" in buf and result is None:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg[0] == "phase":
                phase = msg[1]
            else:
                result = msg
    out = {"phase": phase, "ran": False, "detail": "", "traceback": ""}
    if result is not None:
        status = _wait(pid, max(5.0, deadline - time.monotonic()))
        if status is None:  # did its work but does not exit
            _kill_group(pid)
            out.update(outcome="hang", detail="did not exit after its result", phase="exit")
        else:
            out.update(outcome=result[1], detail=result[2], traceback=result[3], ran=result[4])
    else:
        status = _wait(pid, 5.0 if eof else 0.0)
        if status is None:  # no result by the deadline (or a closed pipe and no exit)
            time.sleep(0.5)  # let faulthandler finish its dump
            status = _kill_group(pid)
            out.update(outcome="hang", detail=f"no result after {timeout:g} s")
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            out.update(outcome="crash", detail=f"{name} (signal {sig})")
        else:
            out.update(outcome="crash", detail=f"exit {os.WEXITSTATUS(status)} without a result")
    os.close(r)
    try:  # anything the child's process group left behind
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    out["seconds"] = time.monotonic() - t0
    return out


def _zygote_main() -> None:
    """Read one JSON request a line on stdin, answer one JSON line on stdout."""
    proto_out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints must not corrupt the protocol
    for name in _PRELOAD:
        __import__(name)
    for line in sys.stdin:
        req = json.loads(line)
        proto_out.write(json.dumps(_fork_case(req)) + "\n")


class Zygote:
    """A clean process (no OpenMP threads, no kernels loaded) that imported Ember once and forks
    one child per case, so a case costs a fork, not an interpreter start. One per worker."""

    def __init__(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                   OPENBLAS_NUM_THREADS="1")  # numpy's BLAS threads would start before the forks
        self.proc = subprocess.Popen([sys.executable, "-c", "from ember.testing.fuzz import _zygote_main; _zygote_main()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, bufsize=1)

    def request(self, req: dict) -> Result:
        """Run one request; a zygote that dies (it should not) is a crash of the case."""
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            ready = select.select([self.proc.stdout], [], [], req["timeout"] + 60)[0]
            line = self.proc.stdout.readline() if ready else ""
        except (OSError, ValueError):
            line = ""
        if not line:
            self.close()
            self.__init__()
            return Result("crash", "the fork server died or did not answer", phase="zygote")
        d = json.loads(line)
        return Result(d["outcome"], d["detail"], d["traceback"], d["phase"], d["seconds"], d["ran"])

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _read(path: str, limit: int = 20000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-limit:].decode("utf-8", "replace")
    except OSError:
        return ""


def run_input(kind: str, path: str, seed: int = 0, *, timeout: float = 30.0, cache_dir: Optional[str] = None,
              memory_mb: int = 4096, zygote: Optional[Zygote] = None) -> Result:
    """Compile (``kind="onnx"``) or load (``"export"``) the file at ``path`` in a child process and
    run it once; the :class:`Result`. ``cache_dir`` becomes the child's ``EMBER_CACHE_DIR``."""
    own = zygote is None
    z = Zygote() if own else zygote
    env = {"EMBER_COMPILE_JOBS": "1", **({"EMBER_CACHE_DIR": cache_dir} if cache_dir else {})}
    log = path + ".log"
    try:
        res = z.request({"kind": kind, "path": os.path.abspath(path), "seed": int(seed), "env": env,
                         "memory_mb": memory_mb, "timeout": float(timeout), "log": log})
    finally:
        if own:
            z.close()
    if res.outcome in FAILURES:
        res.log = _read(log)
    try:
        os.unlink(log)
    except OSError:
        pass
    return res


def build_corpus(workdir: str, kinds=KINDS, seed: int = 0, cache_dir: Optional[str] = None,
                 timeout: float = 300.0, zygote: Optional[Zygote] = None) -> Corpus:
    """The seed models, and when ``"export"`` is in ``kinds`` their exports (compiled in a
    child process, so this process never loads a kernel)."""
    models = seed_models(seed)
    exports = {}
    if "export" in kinds:
        os.makedirs(workdir, exist_ok=True)
        items = []
        for name, data in models.items():
            src = os.path.join(workdir, f"seed-{name}.onnx")
            with open(src, "wb") as f:
                f.write(data)
            items.append((src, os.path.join(workdir, f"seed-{name}.so")))
        own = zygote is None
        z = Zygote() if own else zygote
        env = {"EMBER_COMPILE_JOBS": "1", **({"EMBER_CACHE_DIR": cache_dir} if cache_dir else {})}
        log = os.path.join(workdir, "build.log")
        try:
            res = z.request({"kind": "build", "items": items, "env": env, "memory_mb": 0, "timeout": timeout,
                             "log": log})
        finally:
            if own:
                z.close()
        if res.outcome != "ok":
            raise RuntimeError(f"building the seed exports failed ({res.outcome}: {res.detail})\n"
                               f"{res.traceback}{_read(log)}")
        for (_, dst), name in zip(items, models):
            with open(dst, "rb") as f:
                exports[name] = f.read()
    return Corpus(models, exports)


# ------------------------------------------------------------------------------------------------
# a fuzz run
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Summary:
    seed: int
    seconds: float = 0.0
    counts: Dict[str, collections.Counter] = dataclasses.field(
        default_factory=lambda: {k: collections.Counter() for k in KINDS})
    failures: List[str] = dataclasses.field(default_factory=list)  # saved case folders
    records: List[dict] = dataclasses.field(default_factory=list)  # case.json of each saved failure
    signatures: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    ran: int = 0

    @property
    def cases(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())

    def per_minute(self) -> float:
        return self.cases / self.seconds * 60 if self.seconds > 0 else 0.0

    def rows(self) -> list:
        """``[kind, cases, ok, ember_error, other_exception, crash, hang, cases/min]`` per kind
        with cases, then ``total``."""
        rows = []
        for kind in KINDS:
            c = self.counts[kind]
            n = sum(c.values())
            if n:
                rows.append([kind, n] + [c[o] for o in OUTCOMES] + [n / self.seconds * 60 if self.seconds else 0.0])
        rows.append(["total", self.cases] + [self.total(o) for o in OUTCOMES] + [self.per_minute()])
        return rows

    def table(self) -> str:
        head = ["kind", "cases"] + list(OUTCOMES) + ["cases/min"]
        body = [[str(x) if not isinstance(x, float) else f"{x:.1f}" for x in r] for r in self.rows()]
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
        fmt = lambda r: "  ".join(s.rjust(w) if i else s.ljust(w) for i, (s, w) in enumerate(zip(r, widths)))  # noqa: E731
        return "\n".join([fmt(head)] + [fmt(r) for r in body])

    def progress_line(self) -> str:
        parts = [f"{self.cases} cases"] + [f"{o} {self.total(o)}" for o in OUTCOMES]
        return f"[{self.seconds / 60:5.1f} min] " + "  ".join(parts) + f"  ({self.per_minute():.0f}/min)"


def save_failure(out: str, case: Case, res: Result, run_seed: int) -> str:
    """``out/failures/<kind>-<outcome>-<index>/``: the input, ``case.json`` and ``log.txt``."""
    d = os.path.join(out, "failures", f"{case.kind}-{res.outcome}-{case.index:06d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "input" + SUFFIX[case.kind]), "wb") as f:
        f.write(case.data)
    meta = {"kind": case.kind, "run_seed": run_seed, "index": case.index, "seed": case.seed,
            "source": case.source, "mutations": case.mutations, "outcome": res.outcome, "detail": res.detail,
            "phase": res.phase, "signature": res.signature(), "seconds": round(res.seconds, 3),
            "traceback": res.traceback, "replay": f"python bench/fuzz.py --replay {d}"}
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=2)
    if res.log:
        with open(os.path.join(d, "log.txt"), "w") as f:
            f.write(res.log)
    return d


def replay(case_dir: str, *, timeout: float = 60.0, cache_dir: Optional[str] = None, memory_mb: int = 4096) -> Result:
    """Run a saved failure again (same input, same random inputs) in a child process."""
    with open(os.path.join(case_dir, "case.json")) as f:
        meta = json.load(f)
    kind = meta["kind"]
    tmp = tempfile.mkdtemp(prefix="ember-fuzz-replay-")
    try:
        path = os.path.join(tmp, "input" + SUFFIX[kind])
        shutil.copyfile(os.path.join(case_dir, "input" + SUFFIX[kind]), path)
        return run_input(kind, path, meta["seed"], timeout=timeout, cache_dir=cache_dir or os.path.join(tmp, "cache"),
                         memory_mb=memory_mb)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fuzz(*, kind: str = "both", seed: int = 0, minutes: Optional[float] = None, max_cases: Optional[int] = None,
         out: Optional[str] = None, workers: int = 1, timeout: Optional[float] = None, cache_dir: Optional[str] = None,
         memory_mb: int = 4096, keep_per_signature: int = 5,
         progress: Optional[Callable[[Summary], None]] = None) -> Summary:
    """Run cases until ``minutes`` have passed or ``max_cases`` ran (at least one of them).

    ``kind``: ``onnx``, ``export`` or ``both`` (alternating). ``out``: where failures are saved
    (a temporary folder, removed, when None). ``timeout``: seconds per case (30 for ONNX, 20 for
    exports by default). ``cache_dir``: the children's kernel cache (a fresh one for the run by
    default). At most ``keep_per_signature`` inputs are saved per likely-same bug.
    """
    if minutes is None and max_cases is None:
        raise ValueError("fuzz needs minutes or max_cases")
    kinds = list(KINDS) if kind == "both" else [kind]
    if any(k not in KINDS for k in kinds):
        raise ValueError(f"kind must be onnx, export or both, got {kind!r}")
    scratch = tempfile.mkdtemp(prefix="ember-fuzz-")
    out = out or os.path.join(scratch, "out")
    cache = cache_dir or os.path.join(scratch, "cache")
    summary = Summary(seed)
    lock = threading.Lock()
    t0 = time.monotonic()
    stop_at = t0 + minutes * 60 if minutes is not None else None
    zygotes: list = []
    try:
        zygotes.append(Zygote())
        corpus = build_corpus(os.path.join(scratch, "seeds"), kinds, seed, cache, zygote=zygotes[0])
        zygotes += [Zygote() for _ in range(max(1, workers) - 1)]
        counter = iter(range(max_cases) if max_cases is not None else iter(int, 1))
        next_index = [0]

        def take() -> Optional[Case]:
            with lock:
                if stop_at is not None and time.monotonic() >= stop_at:
                    return None
                if next(counter, None) is None:
                    return None
                i = next_index[0]
                next_index[0] += 1
            return corpus.make_case(kinds[i % len(kinds)], seed, i)

        errors: list = []

        def work(zygote: Zygote) -> None:
            try:
                work_on(zygote)
            except BaseException as exc:  # noqa: B036 - the fuzzer's own bug: raised after the join
                errors.append(exc)

        def work_on(zygote: Zygote) -> None:
            while True:
                case = take()
                if case is None:
                    return
                path = os.path.join(scratch, f"case-{case.index}{SUFFIX[case.kind]}")
                with open(path, "wb") as f:
                    f.write(case.data)
                t = timeout if timeout is not None else (30.0 if case.kind == "onnx" else 20.0)
                res = run_input(case.kind, path, case.seed, timeout=t, cache_dir=cache, memory_mb=memory_mb,
                                zygote=zygote)
                os.unlink(path)
                with lock:
                    summary.counts[case.kind][res.outcome] += 1
                    summary.ran += res.ran
                    if res.outcome in FAILURES:
                        sig = f"{case.kind}: {res.signature()}"
                        summary.signatures[sig] += 1
                        if summary.signatures[sig] <= keep_per_signature:
                            d = save_failure(out, case, res, seed)
                            summary.failures.append(d)
                            with open(os.path.join(d, "case.json")) as f:
                                summary.records.append(json.load(f))
                    summary.seconds = time.monotonic() - t0
                    if progress is not None:
                        progress(summary)

        threads = [threading.Thread(target=work, args=(z,), daemon=True) for z in zygotes]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if errors:
            raise errors[0]
    finally:
        summary.seconds = time.monotonic() - t0
        for z in zygotes:
            z.close()
        shutil.rmtree(scratch, ignore_errors=True)  # with the failures too when no ``out`` was given
    return summary


__all__ = ["Case", "Corpus", "OUTCOMES", "Result", "Summary", "build_corpus", "elf_regions", "fuzz",
           "mutate_export", "mutate_onnx", "replay", "run_input", "seed_models"]
