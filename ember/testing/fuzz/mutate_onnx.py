"""Structure-aware ONNX mutators: ``(ModelProto, rng) -> description`` (None where one does
not apply): attribute values, tensor and value-info dims, op types, node inputs and outputs,
dtypes, edge names, opset."""
from __future__ import annotations

import random
from typing import List

import numpy as np

from .mutate_bytes import _float, _int, mutate_bytes


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
