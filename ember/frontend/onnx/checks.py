"""Steps 1 and 2 of the ONNX import (:mod:`.importer`), before any node is converted: *load*
the file or proto (a missing, truncated or malformed model is a ``ModelError`` naming the file;
malformed includes names, cycles and nodes that break their ONNX schema, :func:`check_nodes`),
then *scan* every node (:func:`scan`): op types with no converter at the model's opset,
unsupported attribute settings and types, collected into ONE ``UnsupportedOpError``; and the
graph inputs whose values decide shapes (:func:`value_inputs`)."""
from __future__ import annotations

import os
from collections import defaultdict
from typing import Mapping, Optional, Union

import onnx

from ...errors import EmberError, UnsupportedOpError
from ..errors import ModelError
from . import fold
from .dtypes import is_supported, onnx_type_name
from .functions import expand_functions
from .optional import tensor_type_of
from .table import DEFAULT_DOMAINS, MAX_OPSET, MIN_OPSET, lookup, lookup_node

_DEFAULT_DOMAINS = DEFAULT_DOMAINS


# -- loading ------------------------------------------------------------------------------------

def load_model(model: Union[onnx.ModelProto, str, os.PathLike, bytes]) -> tuple:
    """``(ModelProto, source text for messages)``; ModelError when it cannot be read."""
    if isinstance(model, onnx.ModelProto):
        return model, "the ONNX model"
    if isinstance(model, (bytes, bytearray)):
        source, loader = "the ONNX model bytes", lambda: onnx.load_from_string(bytes(model))
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        source = f"ONNX file {path!r}"
        if not os.path.isfile(path):
            raise ModelError(f"{source}: no such file")
        loader = lambda: onnx.load(path)  # noqa: E731
    else:
        raise TypeError(f"from_onnx takes an onnx.ModelProto, a path or bytes, got {type(model).__name__}")
    try:
        proto = loader()
    except Exception as e:  # protobuf DecodeError, external-data errors, ...: all mean a bad file
        raise ModelError(f"{source} cannot be read as an ONNX model ({type(e).__name__}: {e}); "
                         "is it truncated or not an ONNX file?") from None
    return proto, source


def load_model_lean(model: Union[onnx.ModelProto, str, os.PathLike, bytes]) -> tuple:
    """``(ModelProto, source, weights)``, like :func:`load_model`; a file's large initializers'
    data read apart into ``weights`` (name -> bytes, :func:`.lean.load_lean`): the message
    keeps their dims and types, not their data."""
    if not isinstance(model, (str, os.PathLike)) or not os.path.isfile(os.fspath(model)):
        return (*load_model(model), {})
    from .lean import load_lean

    path = os.fspath(model)
    try:
        proto, weights = load_lean(path)
    except Exception as e:  # (what onnx.load raised: a bad file)
        raise ModelError(f"ONNX file {path!r} cannot be read as an ONNX model ({type(e).__name__}: {e}); "
                         "is it truncated or not an ONNX file?") from None
    return proto, f"ONNX file {path!r}", weights


def model_opset(proto: onnx.ModelProto, source: str) -> Optional[int]:
    """The opset of the default ONNX domain; None when the model imports none (then every
    node is from another domain, or the model is invalid: the scan reports either). A model
    older than the oldest opset Ember reads whose ops are all unchanged since is read at that
    opset (same schemas, same meaning)."""
    versions = [o.version for o in proto.opset_import if o.domain in _DEFAULT_DOMAINS]
    if not versions:
        return None
    v = max(versions)
    if v < MIN_OPSET and all(_same_schema(n.op_type, v, MIN_OPSET) for n in proto.graph.node
                             if n.domain in _DEFAULT_DOMAINS):
        return MIN_OPSET
    return v


def _same_schema(op: str, old: int, new: int) -> bool:
    try:
        return onnx.defs.get_schema(op, old).since_version == onnx.defs.get_schema(op, new).since_version
    except Exception:  # noqa: BLE001 - no schema: not the same
        return False


def _check_names(proto: onnx.ModelProto, source: str) -> None:
    """Every name is text: protobuf hands back bytes for a string field that is not UTF-8."""
    g = proto.graph
    names = [v.name for v in g.input] + [v.name for v in g.output] + [t.name for t in g.initializer]
    for n in g.node:
        names += [n.name, n.op_type, n.domain, *n.input, *n.output, *(a.name for a in n.attribute)]
    if all(type(name) is str for name in names):
        return
    # (which one, described only now: the descriptions of a large graph's names cost more than
    # checking them)
    named = [("graph input", v.name) for v in g.input] + [("graph output", v.name) for v in g.output]
    named += [("initializer", t.name) for t in g.initializer]
    for k, n in enumerate(g.node):
        named += [(f"node #{k}", n.name), (f"op type of node #{k}", n.op_type), (f"domain of node #{k}", n.domain)]
        named += [(f"an input of node #{k}", x) for x in n.input] + [(f"an output of node #{k}", x) for x in n.output]
        named += [(f"an attribute of node #{k}", a.name) for a in n.attribute]
    for what, name in named:
        if not isinstance(name, str):
            raise ModelError(f"{source}: the name of {what} is not valid UTF-8 ({name!r}); is the file corrupted?")


def check_structure(proto: onnx.ModelProto, source: str) -> None:
    """Structural validity a truncated or hand-broken file may lack (ModelError)."""
    if not proto.HasField("graph"):
        raise ModelError(f"{source} has no graph (truncated or not an ONNX model?)")
    _check_names(proto, source)
    g = proto.graph
    if not g.output:
        raise ModelError(f"{source}: the graph declares no outputs (truncated?)")
    seen_inputs = set()
    for k, i in enumerate(g.input):
        if not i.name:
            raise ModelError(f"{source}: graph input #{k} has no name")
        if i.name in seen_inputs:
            raise ModelError(f"{source}: graph input {i.name!r} is declared twice")
        seen_inputs.add(i.name)
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    producers = {}
    for k, n in enumerate(g.node):
        if not n.op_type:
            raise ModelError(f"{source}: node {k} ({n.name!r}) has no op_type")
        for o in n.output:
            if o and (o in producers or o in defined):
                raise ModelError(f"{source}: value {o!r} is produced twice (node {_node_label(n, k)})")
            if o:
                producers[o] = k
    for k, n in enumerate(g.node):
        for i in n.input:
            if i and i not in defined and i not in producers:
                raise ModelError(f"{source}: input {i!r} of {_node_label(n, k)} is produced by nothing")
    for o in g.output:
        if o.name not in defined and o.name not in producers:
            raise ModelError(f"{source}: graph output {o.name!r} is produced by nothing")


def _node_label(n: onnx.NodeProto, k: int) -> str:
    return f"{n.op_type} node {n.name or f'#{k}'!r}"


def _schema_problems(n: onnx.NodeProto, schema) -> list:
    """How ``n`` breaks its ONNX schema: input and output counts, required inputs left empty,
    required attributes missing, attributes of the wrong type."""
    out = []
    option = onnx.defs.OpSchema.FormalParameterOption
    params = schema.inputs
    for i, name in enumerate(n.input):
        if name:
            continue
        if i < len(params):
            p = params[i]
        elif params and params[-1].option == option.Variadic:
            p = params[-1]
        else:
            continue  # an empty name past the last input: absent (the count below ignores it)
        if p.option != option.Optional:
            out.append(f"input {i} is required but empty")
    ins = list(n.input)
    while ins and not ins[-1]:  # trailing empty names are absent optional inputs
        ins.pop()
    if not schema.min_input <= len(ins) <= schema.max_input:
        most = "or more" if schema.max_input >= 2 ** 30 else f"to {schema.max_input}"
        out.append(f"has {len(ins)} input(s); {n.op_type} takes {schema.min_input} {most}")
    if not schema.min_output <= len(n.output) <= schema.max_output:
        out.append(f"has {len(n.output)} output(s); {n.op_type} has {schema.min_output} to {schema.max_output}")
    present = set()
    for a in n.attribute:
        present.add(a.name)
        spec = schema.attributes.get(a.name)
        if a.type == onnx.AttributeProto.UNDEFINED:
            out.append(f"attribute {a.name!r} has no type")
        elif spec is not None and int(spec.type) != a.type:
            out.append(f"attribute {a.name!r} must be {spec.type.name}, "
                       f"got {onnx.AttributeProto.AttributeType.Name(a.type)}")
    missing = [name for name, spec in schema.attributes.items() if spec.required and name not in present]
    if missing:
        out.append(f"required attribute(s) {', '.join(map(repr, missing))} missing")
    return out


def check_nodes(proto: onnx.ModelProto, opset: Optional[int], source: str) -> None:
    """Every node Ember converts against its ONNX schema at the model's opset (ModelError listing
    each problem): converters may then rely on the inputs, outputs and attributes the schema
    promises. Nodes of other domains or without a schema are left to :func:`scan`."""
    if opset is None:
        return
    problems = []
    for k, n in enumerate(proto.graph.node):
        if n.domain not in _DEFAULT_DOMAINS or lookup(n.op_type, opset) is None:
            continue
        try:
            schema = onnx.defs.get_schema(n.op_type, opset, "")
        except onnx.defs.SchemaError:
            continue
        if not schema.deprecated:
            problems += [f"{_node_label(n, k)}: {p}" for p in _schema_problems(n, schema)]
    if problems:
        more = f"\n  and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ModelError(f"{source} (opset {opset}) has node(s) that do not match their ONNX schema:\n  "
                         + "\n  ".join(problems[:20]) + more)


# -- scanning -----------------------------------------------------------------------------------

def _graph_input_names(proto: onnx.ModelProto, keep_initializers_as_inputs: bool) -> set:
    inits = {t.name for t in proto.graph.initializer}
    return {i.name for i in proto.graph.input if keep_initializers_as_inputs or i.name not in inits}


def scan(proto: onnx.ModelProto, *, static_inputs: Optional[Mapping] = None,
         keep_initializers_as_inputs: bool = False, source: str = "the ONNX model") -> dict:
    """Every problem that would stop the import, found without converting anything.

    Returns ``{"ops": {op type: [node names]}, "attributes": [...], "dynamic": [...],
    "dtypes": [...]}`` (empty lists/dicts when all is well).
    """
    from .context import decode_attributes

    opset = model_opset(proto, source)
    g = proto.graph
    static = set(static_inputs or ())
    inputs = _graph_input_names(proto, keep_initializers_as_inputs) - static
    ops: dict = defaultdict(list)
    attributes, dynamic, dtypes = [], [], []
    nodes = list(g.node)
    for n in list(nodes):  # the nodes of subgraphs (If branches) too
        nodes += _subgraph_nodes(n)
    for k, n in enumerate(nodes):
        label = _node_label(n, k)
        conv = lookup_node(n, opset)
        if conv is None:
            ops[n.op_type if n.domain in _DEFAULT_DOMAINS else f"{n.domain}.{n.op_type}"].append(n.name or f"#{k}")
            continue
        try:
            attrs = decode_attributes(n, label)
            reason = conv.check(attrs, opset, n) if conv.check else None
        except EmberError as e:
            reason = str(e)
        if reason:
            attributes.append(f"{label}: {reason}")
    dynamic = [f"{name!r} ({where})" for name, where in _shape_deciding_inputs(proto, opset, inputs).items()]
    for i in g.input:
        if i.name in static:
            continue
        tt = tensor_type_of(i.type)  # (an optional input of a tensor compiles as present)
        et = tt.elem_type if tt is not None else None
        if et is None:
            dtypes.append(f"graph input {i.name!r} is not a tensor")
        elif not is_supported(et):
            dtypes.append(f"graph input {i.name!r} has type {onnx_type_name(et)}")
    for t in g.initializer:
        if not is_supported(t.data_type):
            dtypes.append(f"initializer {t.name!r} has type {onnx_type_name(t.data_type)}")
    return {"ops": dict(ops), "attributes": attributes, "dynamic": dynamic, "dtypes": dtypes}


def _subgraph_nodes(n: onnx.NodeProto) -> list:
    out = []
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            for m in a.g.node:
                out += [m] + _subgraph_nodes(m)
    return out


def _free_names(n: onnx.NodeProto) -> list:
    """The enclosing graph's names that ``n``'s subgraphs read."""
    out = []
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            inner = {i.name for i in a.g.input} | {t.name for t in a.g.initializer}
            for m in a.g.node:
                out += [x for x in list(m.input) + _free_names(m) if x and x not in inner]
                inner |= set(m.output)
    return out


def raise_problems(problems: dict, opset: int, source: str) -> None:
    """One UnsupportedOpError listing everything :func:`scan` found, or nothing. (Inputs whose
    values decide shapes are no problem: their values become sizes bound when the model runs,
    and an op that needs a plain number names the input when it is converted.)"""
    if not any(v for k, v in problems.items() if k != "dynamic"):
        return
    lines = []
    if problems["ops"]:
        lines.append(f"{source} (opset {opset if opset is not None else 'none'}) uses {len(problems['ops'])} op type(s) Ember does not "
                     f"support at this opset (supported opsets: {MIN_OPSET} to {MAX_OPSET}):")
        for op, nodes in sorted(problems["ops"].items()):
            shown = ", ".join(repr(n) for n in nodes[:10]) + (f" and {len(nodes) - 10} more" if len(nodes) > 10 else "")
            lines.append(f"  {op}: node(s) {shown}")
    if problems["attributes"]:
        lines.append("unsupported attributes:")
        lines += [f"  {a}" for a in problems["attributes"]]
    if problems["dtypes"]:
        lines.append("unsupported types:")
        lines += [f"  {a}" for a in problems["dtypes"]]
    err = UnsupportedOpError("\n".join(lines))
    err.unsupported_ops = problems["ops"]
    err.problems = problems
    raise err


def _shape_deciding_inputs(proto: onnx.ModelProto, opset: Optional[int], inputs: set) -> dict:
    """Graph inputs (among ``inputs``) whose values decide a shape or an attribute, mapped to
    where they are needed. An input counts when it feeds such a ``const_input`` directly or
    through a chain of small computations the importer folds (Shape/Gather/Concat/...)."""
    nodes = list(proto.graph.node)
    for n in list(nodes):  # (a subgraph's nodes too: an Expand in an If branch may need a value)
        nodes += _subgraph_nodes(n)
    producer = {o: n for n in nodes for o in n.output if o}
    found: dict = {}
    for k, n in enumerate(nodes):
        conv = lookup_node(n, opset)
        for i in conv.const_inputs if conv else ():
            if i >= len(n.input) or not n.input[i]:
                continue
            where = f"input {i} of {_node_label(n, k)}"
            stack, seen = [n.input[i]], set()
            while stack:
                name = stack.pop()
                if name in seen:
                    continue
                seen.add(name)
                if name in inputs:
                    found.setdefault(name, where)
                p = producer.get(name)
                # Shape and Size read only their input's type: the chain stops there
                if p is not None and fold.foldable(p.op_type) and p.op_type not in ("Shape", "Size"):
                    feeds = p.input[:1] if p.op_type == "CastLike" else p.input  # CastLike: only input 0's value
                    stack.extend(x for x in feeds if x)
                elif p is not None and p.op_type == "If":  # (a branch known at import passes values on)
                    stack.extend(x for x in list(p.input) + _free_names(p) if x)
    return found


def value_inputs(model, *, keep_initializers_as_inputs: bool = False) -> list:
    """Graph inputs whose values the import needs (they decide shapes): bind them with
    ``from_onnx(model, static_inputs={name: array})``."""
    proto, source = load_model(model)
    inputs = _graph_input_names(proto, keep_initializers_as_inputs)
    opset = model_opset(proto, source)
    return list(_shape_deciding_inputs(expand_functions(proto, opset), opset, inputs))


__all__ = ["check_nodes", "check_structure", "load_model", "model_opset", "raise_problems", "scan", "value_inputs"]
