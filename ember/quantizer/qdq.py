"""Writing a QDQ model: QuantizeLinear/DequantizeLinear pairs on the activations that feed the
quantized ops, and int8 weights with a DequantizeLinear, in the format ONNX Runtime's
``quantize_static`` writes (so any runtime reads it, and Ember's integer kernels run it).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

# op type -> (the input quantized as an activation, the weight input, the weight's output-channel
# axis as a function of the node) of the ops whose products run on integers
OPS = {"Conv": (0, 1, lambda n: 0),
       "MatMul": (0, 1, lambda n: 1),
       "Gemm": (0, 1, lambda n: 0 if _attr(n, "transB", 0) else 1)}


def _attr(node, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def activation_product(node, inits) -> bool:
    """Whether ``node`` is a MatMul of two activations (attention's ``Q @ K^T`` and ``P @ V``):
    no initializer on either side."""
    return node.op_type == "MatMul" and node.domain in ("", "ai.onnx") and len(node.input) == 2 \
        and not any(i in inits for i in node.input)


def activation_inputs(node, inits) -> tuple:
    """The inputs of a quantized ``node`` that get QDQ pairs: both of an activation product,
    else the one activation of :data:`OPS`."""
    return (0, 1) if activation_product(node, inits) else (OPS[node.op_type][0],)


# activations whose per-element work a table of codes replaces (:mod:`ember.graph.passes.code_tables`)
TABLED = ("Sigmoid", "Tanh", "Erf", "Gelu", "HardSwish", "Softplus", "Mish", "Elu", "Selu", "Celu")
_ELEMENTWISE = set(TABLED) | {"Add", "Sub", "Mul", "Div", "Relu", "Clip", "LeakyRelu", "Neg", "Abs", "Exp", "Reciprocal"}


def table_inputs(model: onnx.ModelProto, quantized) -> list:
    """The tensors a transcendental activation of :data:`TABLED` reads (through a Div or Mul by
    a constant: GELU's ``erf(x / sqrt 2)`` reads ``x``) that a node makes, where what is
    computed from them elementwise ends in ``quantized`` tensors only (the inputs of quantized
    products): quantized, with every reader reading them dequantized, the activation is a
    function of one 8-bit code up to the next quantizer, as in ORT's QDQ files."""
    g = model.graph
    constants = {i.name for i in g.initializer} | {o for n in g.node if n.op_type == "Constant" for o in n.output}
    producers = {o: n for n in g.node for o in n.output}
    outputs = {o.name for o in g.output}
    out: dict = {}
    for n in g.node:
        if n.op_type not in TABLED or n.domain not in ("", "ai.onnx") or not n.input:
            continue
        t = n.input[0]
        p = producers.get(t)
        if p is not None and p.op_type in ("Div", "Mul") and len(p.input) == 2 and p.input[1] in constants:
            t, p = p.input[0], producers.get(p.input[0])
        if p is not None and p.op_type != "Constant" and t not in out and _ends_quantized(g, t, constants, quantized, outputs):
            out[t] = None
    return list(out)


def _ends_quantized(g, t: str, constants: set, quantized, outputs: set) -> bool:
    """Whether every value computed from ``t`` alone by elementwise ops that something else
    reads is a quantized product's input (nodes are in topological order)."""
    region = {t}
    inside = set()
    for k, n in enumerate(g.node):
        ins = [i for i in n.input if i and i not in constants]
        if n.op_type in _ELEMENTWISE and ins and all(i in region for i in ins):
            region.update(n.output)
            inside.add(k)
    if not inside:
        return False
    exits = {i for k, n in enumerate(g.node) if k not in inside for i in n.input if i in region} | (region & outputs)
    return bool(exits) and exits <= set(quantized)


def candidates(model: onnx.ModelProto, ops, activations: bool = False) -> list:
    """The nodes to quantize: of ``ops``, with a float32 weight initializer of rank >= 2 (and
    Gemm without transA, MatMul with a 2-D weight, Conv of one group); with ``activations``,
    also the MatMuls of two activations (when ``ops`` has MatMul)."""
    inits = {i.name: i for i in model.graph.initializer}
    # (a Constant node's output is a weight too, though no initializer: never an activation)
    constants = set(inits) | {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    out = []
    for n in model.graph.node:
        if n.op_type not in ops or n.op_type not in OPS or n.domain not in ("", "ai.onnx"):
            continue
        if activation_product(n, inits):
            if activations and not any(i in constants for i in n.input):
                out.append(n)
            continue
        _, w, _ = OPS[n.op_type]
        init = inits.get(n.input[w]) if len(n.input) > w else None
        if init is None or init.data_type != onnx.TensorProto.FLOAT or len(init.dims) < 2:
            continue
        if n.op_type == "Gemm" and _attr(n, "transA", 0):
            continue
        if n.op_type == "MatMul" and len(init.dims) != 2:
            continue
        if n.op_type == "Conv" and _attr(n, "group", 1) != 1:
            continue
        out.append(n)
    return out


def weight_int8(w: np.ndarray, axis: int, per_channel: bool) -> tuple:
    """Symmetric int8 weights: (q, scale) with scale per ``axis`` (or one), zero point 0."""
    if per_channel:
        red = tuple(k for k in range(w.ndim) if k != axis)
        amax = np.abs(w).max(axis=red)
    else:
        amax = np.array(np.abs(w).max())
    scale = (np.maximum(amax, 1e-12) / 127.0).astype(np.float32)
    shape = [1] * w.ndim
    if per_channel:
        shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def write(model: onnx.ModelProto, nodes: list, act_params: dict, per_channel: bool,
          share_codes: bool = True, everywhere=()) -> onnx.ModelProto:
    """``model`` with ``nodes``' activations (``act_params``: name -> (scale, zero point))
    quantized and dequantized before them, and their weights stored as int8. ``share_codes``:
    every other reader of such an activation reads the dequantized value too (a ResNet's
    residual add, as ORT's quantizer writes it), so a runtime stores the activation once, as
    8-bit codes, and not also as floats for the others. ``everywhere``: activations (of
    ``act_params``) every reader reads dequantized (:func:`table_inputs`)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    new_nodes, new_inits = [], []
    dq_of: dict = {}
    for name, (scale, zero) in act_params.items():
        s, z = f"{name}_scale", f"{name}_zero_point"
        new_inits += [numpy_helper.from_array(np.array(scale, np.float32), s),
                      numpy_helper.from_array(np.array(zero, np.uint8), z)]
        q, d = f"{name}_QuantizeLinear", f"{name}_DequantizeLinear"
        new_nodes.append(helper.make_node("QuantizeLinear", [name, s, z], [q], name=f"{name}_quantize"))
        new_nodes.append(helper.make_node("DequantizeLinear", [q, s, z], [d], name=f"{name}_dequantize"))
        dq_of[name] = d
    targets = {k for k, n in enumerate(model.graph.node) if any(n is t for t in nodes)}
    outputs = {o.name for o in g.output}
    for n in g.node:
        for i, name in enumerate(n.input):
            if name in dq_of and name not in outputs and (share_codes or name in everywhere):
                n.input[i] = dq_of[name]
    done_weights: dict = {}
    for k, n in enumerate(g.node):  # (the copy's nodes, at the positions of the original's)
        if k not in targets:
            continue
        a, wi, axis_of = OPS[n.op_type]
        for i in activation_inputs(n, inits):
            if n.input[i] in dq_of:
                n.input[i] = dq_of[n.input[i]]
        if activation_product(n, inits):
            continue  # (no weights)
        wname = n.input[wi]
        if wname not in done_weights:
            w = numpy_helper.to_array(inits[wname])
            axis = axis_of(n)
            q, scale = weight_int8(w, axis, per_channel)
            qn, sn, zn, dn = (f"{wname}_quantized", f"{wname}_scale", f"{wname}_zero_point",
                              f"{wname}_DequantizeLinear")
            new_inits += [numpy_helper.from_array(q, qn), numpy_helper.from_array(scale, sn),
                          numpy_helper.from_array(np.zeros(scale.shape, np.int8), zn)]
            attrs = {"axis": axis} if per_channel else {}
            new_nodes.append(helper.make_node("DequantizeLinear", [qn, sn, zn], [dn], name=f"{wname}_dequantize",
                                              **attrs))
            done_weights[wname] = dn
        n.input[wi] = done_weights[wname]
    # the float weights no node reads any more go
    used = {i for n in list(g.node) + new_nodes for i in n.input}
    keep = [i for i in g.initializer if i.name in used or i.name not in done_weights]
    del g.initializer[:]
    g.initializer.extend(keep + new_inits)
    # the new nodes first, in dependency order with the graph's (a Q/DQ pair right after its tensor)
    _insert(g, new_nodes)
    return m


def _insert(g, new_nodes: list) -> None:
    """Put ``new_nodes`` into ``g`` so that each follows what it reads (a topological order)."""
    produced = {o: k for k, n in enumerate(g.node) for o in n.output}
    where: dict = {}
    for n in new_nodes:
        after = max((produced.get(i, -1) for i in n.input), default=-1)
        where.setdefault(after, []).append(n)
        for o in n.output:
            produced[o] = after
    old = list(g.node)
    del g.node[:]
    g.node.extend(where.get(-1, []))
    for k, n in enumerate(old):
        g.node.append(n)
        g.node.extend(where.get(k, []))
