"""Ops Ember has no converter for, but which ONNX itself defines as a function of other ops
(LinearAttention, FlexAttention, ...): each such node is replaced by its function's body,
its edges renamed, before anything is converted. Ember then compiles what the body computes
with the ops it knows; an op with a converter of its own keeps it (a fused kernel beats the
body's many small ones)."""
from __future__ import annotations

from typing import Optional

import onnx

from .table import lookup_node

MAX_DEPTH = 4  # a body's ops may be functions too: expanded this many levels deep


def _domain_version(proto: onnx.ModelProto, domain: str) -> Optional[int]:
    for o in proto.opset_import:
        if (o.domain or "") == domain or (domain in ("", "ai.onnx") and (o.domain or "") in ("", "ai.onnx")):
            return o.version
    return None


def _function(node: onnx.NodeProto, version: int, types: dict) -> Optional[onnx.FunctionProto]:
    """The function body ONNX defines for ``node`` at opset ``version`` (given its inputs'
    types for a context-dependent one), or None."""
    try:
        schema = onnx.defs.get_schema(node.op_type, version, node.domain)
    except onnx.defs.SchemaError:
        return None
    data = None
    plain = [v for v in schema.function_opset_versions if v <= version]
    ctx = [v for v in schema.context_dependent_function_opset_versions if v <= version]
    try:
        if plain:
            data = schema.get_function_with_opset_version(max(plain))
        elif ctx:
            if any(i and i not in types for i in node.input):
                return None  # (an input whose type shape inference could not tell)
            filled = onnx.NodeProto()
            filled.CopyFrom(node)
            given = {a.name for a in node.attribute}
            for name, a in schema.attributes.items():  # (the body reads defaults as the node's)
                if name not in given and a.default_value.name:
                    filled.attribute.append(a.default_value)
            data = schema.get_context_dependent_function_with_opset_version(
                max(ctx), filled.SerializeToString(),
                [types[i].SerializeToString() if i else onnx.TypeProto().SerializeToString() for i in node.input])
    except Exception:  # (onnx could not build the body for this node: the op stays unsupported)
        return None
    if not data:
        return None
    fn = onnx.FunctionProto()
    fn.ParseFromString(data)
    return fn if fn.node else None


def _defined(n: onnx.NodeProto, opset: Optional[int]) -> bool:
    """Whether Ember can run body node ``n``: it has a converter, or ONNX defines it as a
    function in turn (expanded next)."""
    if lookup_node(n, opset) is not None:
        return True
    try:
        schema = onnx.defs.get_schema(n.op_type, domain=n.domain)
    except onnx.defs.SchemaError:
        return False
    return bool(schema.has_function or schema.has_context_dependent_function)


def _same_meaning(n: onnx.NodeProto, fn: onnx.FunctionProto, proto: onnx.ModelProto) -> bool:
    """Whether body node ``n``'s op is the same version at the function's opset and at the
    model's (the importer converts every node at the model's)."""
    theirs = next((o.version for o in fn.opset_import if (o.domain or "") == (n.domain or "")), None)
    mine = _domain_version(proto, n.domain or "")
    if theirs is None or mine is None or theirs == mine:
        return True
    try:
        return (onnx.defs.get_schema(n.op_type, theirs, n.domain).since_version
                == onnx.defs.get_schema(n.op_type, mine, n.domain).since_version)
    except onnx.defs.SchemaError:
        return False


def _rename_graph(g: onnx.GraphProto, rename) -> None:
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        vi.name = rename(vi.name)
    for t in g.initializer:
        t.name = rename(t.name)
    for n in g.node:
        _rename_node(n, rename, None)


def _rename_node(n: onnx.NodeProto, rename, attrs: Optional[dict]) -> None:
    n.input[:] = [rename(x) for x in n.input]
    n.output[:] = [rename(x) for x in n.output]
    kept = []
    for a in n.attribute:
        if a.ref_attr_name and attrs is not None:
            if a.ref_attr_name not in attrs:
                continue  # (an optional attribute the node does not give)
            b = onnx.AttributeProto()
            b.CopyFrom(attrs[a.ref_attr_name])
            b.name = a.name
            a = b
        if a.type == onnx.AttributeProto.GRAPH:
            _rename_graph(a.g, rename)
        elif a.type == onnx.AttributeProto.GRAPHS:
            for g in a.graphs:
                _rename_graph(g, rename)
        kept.append(a)
    del n.attribute[:]
    n.attribute.extend(kept)


def _inline(node: onnx.NodeProto, fn: onnx.FunctionProto, prefix: str, defaults: dict) -> list:
    io = {f: (node.input[i] if i < len(node.input) else "") for i, f in enumerate(fn.input)}
    io.update({f: node.output[i] for i, f in enumerate(fn.output) if i < len(node.output) and node.output[i]})

    def rename(name: str) -> str:
        return io[name] if name in io else (prefix + name if name else "")

    attrs = dict(defaults)
    attrs.update({a.name: a for a in node.attribute})
    out = []
    for m in fn.node:
        n = onnx.NodeProto()
        n.CopyFrom(m)
        n.name = f"{node.name or node.op_type}/{m.name or m.op_type}"
        _rename_node(n, rename, attrs)
        out.append(n)
    return out


def expand_functions(proto: onnx.ModelProto, opset: Optional[int]) -> onnx.ModelProto:
    """``proto`` with each main-graph node of an op Ember does not convert, whose ONNX schema
    defines it as a function, replaced by that function's body (the same proto where none)."""
    for depth in range(MAX_DEPTH):
        todo = [k for k, n in enumerate(proto.graph.node) if lookup_node(n, opset) is None
                and _domain_version(proto, n.domain or "") is not None]
        if not todo:
            return proto
        try:
            inferred = onnx.shape_inference.infer_shapes(proto)
        except Exception:
            inferred = proto
        g = inferred.graph
        types = {v.name: v.type for v in list(g.input) + list(g.value_info) + list(g.output) if v.type.WhichOneof("value")}
        for t in proto.graph.initializer:
            types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
        nodes, changed, imports = [], False, []
        for k, n in enumerate(proto.graph.node):
            fn = _function(n, _domain_version(proto, n.domain or ""), types) if k in todo else None
            if fn is not None and not all(_defined(m, opset) and _same_meaning(m, fn, proto) for m in fn.node):
                # (a body Ember cannot run either, or written against other versions of its
                # ops than the model's opset converts: the error names the node's own op)
                fn = None
            if fn is None:
                nodes.append(n)
                continue
            schema = onnx.defs.get_schema(n.op_type, _domain_version(proto, n.domain or ""), n.domain)
            defaults = {name: a.default_value for name, a in schema.attributes.items() if a.default_value.name}
            nodes += _inline(n, fn, f"__ember_f{depth}_{k}_", defaults)
            changed = True
            imports += [o for o in fn.opset_import if _domain_version(proto, o.domain or "") is None
                        and all((o.domain or "") != (x.domain or "") for x in imports)]
        if not changed:
            return proto
        expanded = onnx.ModelProto()  # (a new proto: the caller's is never changed)
        expanded.CopyFrom(proto)
        del expanded.graph.node[:]
        expanded.graph.node.extend(nodes)
        expanded.opset_import.extend(imports)  # (the bodies' ops may come from another domain)
        proto = expanded
    return proto
