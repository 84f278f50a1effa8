"""ONNX model -> Ember graph Module.

    >>> mod = from_onnx("resnet50.onnx")                                      # doctest: +SKIP
    >>> print(mod)                                                            # doctest: +SKIP

The import runs in three steps, each with its own kind of error (the first two in :mod:`.checks`):

1. *Load* the file or proto: a missing, truncated or malformed model is a :class:`ModelError`
   naming the file and the problem. Malformed includes nodes that break their ONNX schema
   (input counts, required attributes, attribute types: :func:`check_nodes`) and cycles.
2. *Scan* every node before converting any (:func:`scan`): op types with no converter for
   the model's opset, attribute settings that are not supported, and graph inputs whose
   values would have to be known at import are collected and raised as ONE
   ``UnsupportedOpError`` that lists each op type with the nodes that use it.
3. *Convert* node by node in dataflow order; every call is typed as it is built, so a shape
   or dtype error names the ONNX node it comes from.

Graph inputs that are not initializers become the function's parameters, with dims from the
model (``dim_param`` names become symbolic :class:`Dim` s). Initializers become Constants, also
when the graph lists them as inputs, unless ``keep_initializers_as_inputs=True``.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Mapping, Optional, Sequence, Union

import numpy as np
import onnx

from ...errors import CompileError, DTypeError, EmberError, ShapeError, UnsupportedOpError
from ...graph import Constant, Function, Module, TensorType, Tuple, TupleType, Var, source_span
from ...loop import dtype as dt
from ..errors import ModelError
from . import fold
from .checks import (_DEFAULT_DOMAINS, _node_label, check_nodes, check_structure, load_model, load_model_lean,
                     model_opset, raise_problems, scan)
from .boundary import SequenceOutputError, SubgraphSequenceError, bind_input, declared_item_dtype, flatten_output
from .context import NodeContext, StructureValueError
from .functions import expand_functions
from .optional import OptionalValue, tensor_type_of
from .sequence import SequenceValue
from .versioning import versioned
from .dtypes import narrow_of, onnx_type_name, tensor_to_numpy
from .inputs import empty_sizes, given_shape, input_type
from .table import lookup_node


# -- conversion ---------------------------------------------------------------------------------

def _tensor_outputs(graph, outs: list, what: str, error: type = UnsupportedOpError) -> None:
    """``error`` where an output of ``graph`` is a sequence known at import (:mod:`.sequence`):
    the values a subgraph returns are tensors (the model's outputs: :mod:`.boundary`)."""
    for o, e in zip(graph.output, outs):
        if not isinstance(getattr(e, "type", None), (TensorType, TupleType)):
            raise error(f"{what}: graph output {o.name!r} is a sequence (or optional): "
                        "Ember's outputs are tensors")


def _topo_order(nodes) -> list:
    """Nodes in dataflow order (ONNX requires it, but tools do not always deliver it)."""
    produced_by = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    order, state = [], [0] * len(nodes)  # 0 new, 1 in progress, 2 done
    for root in range(len(nodes)):
        stack = [(root, False)]
        while stack:
            k, done = stack.pop()
            if done:
                state[k] = 2
                order.append(nodes[k])
                continue
            if state[k]:
                continue
            state[k] = 1
            stack.append((k, True))
            for i in nodes[k].input:
                p = produced_by.get(i)
                if p is not None and state[p] == 0:
                    stack.append((p, False))
    return order


def from_onnx(model: Union[onnx.ModelProto, str, os.PathLike, bytes], *,
              static_inputs: Optional[Mapping[str, np.ndarray]] = None,
              input_shapes: Optional[Mapping[str, Sequence]] = None,
              keep_initializers_as_inputs: bool = False, io_narrow: Optional[dict] = None,
              structure: Optional[Mapping[str, tuple]] = None, io_structure: Optional[list] = None,
              weights: Optional[Mapping[str, np.ndarray]] = None) -> Module:
    """Import an ONNX model (a ModelProto, a path, or serialized bytes) as an Ember Module.

    ``io_narrow`` (a dict), when given, gets the narrow types (float8, int4, ...) of the graph's
    inputs (``{"inputs": {name: type}, "outputs": [type or None]}``): the module takes and gives
    their bytes as uint8.

    ``static_inputs`` binds graph inputs to values known now (they become Constants): needed
    for inputs that decide shapes, such as Reshape's shape fed as a graph input.
    ``input_shapes`` gives graph inputs shapes of their own before anything is imported
    (``{"x": (1, 3, 224, 224)}``; a string names a symbolic size): a model exported with a
    dynamic batch is then imported for one batch size, shape computations included.
    ``keep_initializers_as_inputs`` keeps initializers that the graph also lists as inputs as
    parameters (overridable weights) instead of Constants.
    ``structure`` gives graph inputs of sequence (or optional) type the structure a run gives
    them (:func:`.boundary.structure_of`): a sequence is imported as one tensor parameter per
    item. ``io_structure`` (a list), when given, lets graph outputs be sequences or optionals:
    their tensors are flattened into the outputs, and the list gets each graph output's layout
    (:func:`.boundary.regroup` takes a run's outputs back into lists). ``weights``: the bytes of
    main-graph initializers read apart from ``model`` (:func:`.lean.load_lean`), by name; a path
    is read that way itself.

    Raises ModelError (unreadable or malformed model), UnsupportedOpError (everything
    unsupported, listed at once), ShapeError/DTypeError (naming the ONNX node).
    """
    if isinstance(model, (str, os.PathLike)) and weights is None:
        proto, source, weights = load_model_lean(model)
    else:
        proto, source = load_model(model)
    check_structure(proto, source)
    opset = model_opset(proto, source)
    proto = expand_functions(proto, opset)  # (ops ONNX defines as functions of other ops)
    check_nodes(proto, opset, source)
    static_inputs = dict(static_inputs or {})
    structure = dict(structure or {})
    # (an input given a structure is imported as its tensors: no problem for the scan)
    problems = scan(proto, static_inputs={**static_inputs, **structure},
                    keep_initializers_as_inputs=keep_initializers_as_inputs, source=source)
    raise_problems(problems, opset, source)
    imp = _Importer(proto, opset, source, static_inputs, keep_initializers_as_inputs, input_shapes)
    imp.structure = structure
    imp.weights = dict(weights or {})
    mod = imp.run(io_structure)
    if io_narrow is not None:
        io_narrow.update(imp.io_narrow)
    return mod


class _Scope(dict):
    """A subgraph's names: its own, else the enclosing graph's, each captured once as a
    parameter of the subgraph's function (an import-time constant is used as it is)."""

    def __init__(self, importer, outer):
        super().__init__()
        self.importer, self.outer = importer, outer

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self.outer.env

    def __missing__(self, name):
        v = self._capture(self.outer.env[name])
        if name in self.outer.values:
            self.importer.values[name] = self.outer.values[name]
        self[name] = v
        return v

    def _capture(self, e):
        """The subgraph's parameter for the enclosing graph's ``e`` (a sequence's or optional's
        tensors each captured as one)."""
        if isinstance(e, Constant) or e is None:
            return e
        if isinstance(e, SequenceValue):
            return dataclasses.replace(e, items=tuple(self._capture(x) for x in e.items))
        if isinstance(e, OptionalValue):
            return OptionalValue(self._capture(e.item))
        v = Var(f"cap{len(self.importer.captured)}", e.type)
        self.importer.captured.append((v, e))
        return v


# ops that convert the narrow types, and ops that only move their bytes (the output holds the
# same type as input 0)
NARROW_OPS = ("Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "Constant")
NARROW_CARRIERS = ("Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Gather",
                   "Concat", "Expand", "Tile", "Split")


class _Importer:
    def __init__(self, proto, opset, source, static_inputs, keep, input_shapes=None, outer=None):
        self.proto, self.opset, self.source = proto, opset, source
        self.static, self.keep = static_inputs, keep
        self.shapes = dict(input_shapes or {})
        self.empty = empty_sizes(proto.graph) if outer is None else outer.empty
        self.outer = outer
        self.env: dict = _Scope(self, outer) if outer is not None else {}  # ONNX value name -> Ember expression
        self.values: dict = {}  # ONNX value name -> numpy value known at import
        self.captured: list = []  # a subgraph's (parameter, outer expression) pairs
        self.functions: dict = outer.functions if outer is not None else {}  # subgraphs' functions
        self.narrow: dict = {}  # ONNX value name -> the narrow type whose bytes it holds
        self.io_narrow: dict = {"inputs": {}, "outputs": []}  # the graph's narrow inputs and outputs
        self.weights: dict = {}  # main-graph initializer name -> its bytes, read apart (.lean)
        self.structure: dict = {}  # sequence inputs -> the structure a run gives them (.boundary)

    def narrow_of(self, name: str) -> Optional[str]:
        if name in self.narrow:
            return self.narrow[name]
        return self.outer.narrow_of(name) if self.outer is not None else None

    def run(self, io_structure: Optional[list] = None) -> Module:
        g = self.proto.graph
        params = self._bind_inputs(g)
        for k, n in enumerate(_topo_order(list(g.node))):
            self._convert(n, k)
        outs = [self.env[o.name] for o in g.output]
        if io_structure is None:
            _tensor_outputs(g, outs, self.source, SequenceOutputError)
            self.io_narrow["outputs"] = [self.narrow_of(o.name) for o in g.output]
        else:
            outs = self._flat_outputs(g, outs, io_structure)
        body = outs[0] if len(outs) == 1 else Tuple(outs)
        return Module({"main": Function(params, body, body.type), **self.functions})

    def _flat_outputs(self, g, outs: list, layouts: list) -> list:
        """The tensors of the graph's outputs, sequences and optionals flattened (their layouts
        appended to ``layouts``)."""
        flat, narrow = [], []
        for o, e in zip(g.output, outs):
            tensors, layout = flatten_output(e, o.name)
            layouts.append(layout)
            flat += tensors
            narrow += [self.narrow_of(o.name)] * len(tensors)
        if not flat:
            raise UnsupportedOpError(f"{self.source}: the graph's outputs hold no tensor (only empty sequences "
                                     "or optionals)")
        self.io_narrow["outputs"] = narrow
        return flat

    def _child(self, graph, label: str, inputs: Optional[dict] = None) -> "_Importer":
        """An importer for the subgraph ``graph`` in this graph's scope, its inputs bound to
        ``inputs`` and its initializers to constants, with its nodes converted."""
        child = _Importer(self.proto, self.opset, self.source, {}, False, outer=self)
        for name, v in (inputs or {}).items():
            dict.__setitem__(child.env, name, v)
            if isinstance(v, Constant):  # (known at import: shape computations on it fold)
                child.values[name] = v.value
        for t in graph.initializer:
            c = Constant.adopt(tensor_to_numpy(t, f"initializer {t.name!r} of {label}"))
            dict.__setitem__(child.env, t.name, c)
            child.values[t.name] = c.value
            if narrow_of(t.data_type):
                child.narrow[t.name] = narrow_of(t.data_type)
        for k, n in enumerate(_topo_order(list(graph.node))):
            child._convert(n, k)
        return child

    def inline(self, graph, label: str, inputs: Optional[dict] = None) -> list:
        """The subgraph ``graph`` converted in this graph's scope (the branch an ``If`` with a
        condition known at import takes; a loop's body, unrolled, with its ``inputs`` bound by
        name): ``[(output expression, its value known at import or None)]``."""
        from ...graph.visit import substitute

        child = self._child(graph, label, inputs)
        mapping = {v: e for v, e in child.captured}

        def back(e):  # (the enclosing graph's expressions for the captured parameters)
            if isinstance(e, SequenceValue):
                return dataclasses.replace(e, items=tuple(back(x) for x in e.items))
            if isinstance(e, OptionalValue):
                return OptionalValue(back(e.item))
            return substitute(e, mapping) if mapping and e is not None else e
        return [(back(child.env[o.name]), child.values.get(o.name)) for o in graph.output]

    def subgraph(self, graph, label: str, formal_types: Optional[list] = None) -> tuple:
        """Convert the subgraph ``graph`` (an If branch, a Loop body) to a module function whose
        parameters are its formal inputs (typed ``formal_types``, else as declared), then the
        enclosing graph's values it reads. Returns ``(function name, outer values it reads,
        its output expressions' types)``."""
        params = [Var(vi.name or f"in{k}", formal_types[k] if formal_types is not None and k < len(formal_types)
                      else input_type(vi)) for k, vi in enumerate(graph.input)]
        child = self._child(graph, label, {vi.name: v for vi, v in zip(graph.input, params)})
        outs = [child.env[o.name] for o in graph.output]
        if not outs:
            raise ModelError(f"{self.source}: the subgraph of {label} has no outputs")
        _tensor_outputs(graph, outs, f"the subgraph of {label}", SubgraphSequenceError)
        body = outs[0] if len(outs) == 1 else Tuple(outs)
        fn = Function(params + [v for v, _ in child.captured], body, body.type)
        name = f"subgraph{len(self.functions)}"
        self.functions[name] = fn
        return name, [e for _, e in child.captured], [o.type for o in outs]

    def _bind_inputs(self, g) -> list:
        inits = {t.name: t for t in g.initializer}
        params = []
        for vi in g.input:
            name = vi.name
            if name in self.static:
                self._bind_static(vi)
            elif name in self.structure:  # (a sequence: a parameter per item of the run's list)
                self.env[name], items = bind_input(name, self.structure[name], declared_item_dtype(vi.type, name))
                params += items
            elif name in inits and not self.keep:
                continue  # bound below as a Constant
            else:
                v = Var(name, given_shape(input_type(vi, self.empty), name, self.shapes.get(name)))
                self.env[name] = v
                params.append(v)
                kind = narrow_of((tensor_type_of(vi.type) or vi.type.tensor_type).elem_type)
                if kind:
                    self.narrow[name] = self.io_narrow["inputs"][name] = kind
        self._check_initializers([t for name, t in inits.items() if name not in self.env])
        for name, t in inits.items():
            if name not in self.env:
                # the array is new (or a view of the tensor's bytes): the Constant takes it as is
                c = Constant.adopt(tensor_to_numpy(t, f"initializer {name!r}", self.weights.get(name)))
                self.env[name], self.values[name] = c, c.value
                if narrow_of(t.data_type):
                    self.narrow[name] = narrow_of(t.data_type)
        unknown = set(self.shapes) - {vi.name for vi in g.input if vi.name not in inits or self.keep}
        if unknown:
            raise ShapeError(f"input_shapes names {', '.join(sorted(unknown))}, which are not inputs of "
                             f"{self.source} (inputs: {', '.join(p.name for p in params)})")
        unknown = (set(self.static) | set(self.structure)) - {vi.name for vi in g.input}
        if unknown:
            raise ShapeError(f"static_inputs names {sorted(unknown)}, which are not graph inputs of {self.source} "
                             f"(inputs: {', '.join(vi.name for vi in g.input)})")
        return params

    def _check_initializers(self, tensors: list) -> None:
        """Each initializer, then all of them, against the memory limit, before any is read."""
        from ...graph.limits import check_bytes, format_bytes

        sizes = []
        for t in tensors:
            try:
                itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
            except (KeyError, TypeError, ValueError):
                continue  # an unsupported type: the scan reported it
            n = itemsize
            for d in t.dims:
                n *= max(int(d), 0)
            sizes.append(n)
            check_bytes(n, f"initializer {t.name!r} of shape {list(t.dims)} "
                           f"({onnx_type_name(t.data_type)}) of {self.source}")
        if len(sizes) > 1:
            check_bytes(sum(sizes), f"the {len(sizes)} initializers of {self.source} (the largest "
                                    f"{format_bytes(max(sizes))})")

    def _bind_static(self, vi) -> None:
        want = input_type(vi)
        v = np.asarray(self.static[vi.name])
        if dt.from_numpy(v.dtype) != want.dtype:
            raise DTypeError(f"static input {vi.name!r} has dtype {v.dtype}, the model declares {want.dtype}")
        if len(v.shape) != want.ndim or any(isinstance(d, int) and d != s for d, s in zip(want.shape, v.shape)):
            raise ShapeError(f"static input {vi.name!r} has shape {v.shape}, the model declares {want.shape}")
        c = Constant(v)
        self.env[vi.name], self.values[vi.name] = c, c.value

    def _convert(self, n: onnx.NodeProto, k: int) -> None:
        label = _node_label(n, k)
        conv = lookup_node(n, self.opset)
        if conv is None:  # (in a subgraph: the model's scan only saw the main graph)
            raise UnsupportedOpError(f"{label}: {n.op_type} is not supported at opset {self.opset}"
                                     + (f" (domain {n.domain!r})" if n.domain not in _DEFAULT_DOMAINS else ""))
        for i in n.input:
            if i and i not in self.env:  # check_structure saw a producer: it comes later, a cycle
                raise ModelError(f"{self.source}: input {i!r} of {label} depends on the node's own output "
                                 "(the graph has a cycle)")
        inputs = [self.env[i] if i else None for i in n.input]
        narrow_in = [self.narrow_of(i) if i else None for i in n.input]
        if any(narrow_in) and n.op_type not in NARROW_OPS and n.op_type not in NARROW_CARRIERS:
            kind = next(x for x in narrow_in if x)
            raise UnsupportedOpError(f"{label}: {n.op_type} of {kind} values is not supported: Ember stores {kind} "
                                     f"without computing in it (Cast it to float first)")
        try:
            node = NodeContext(n, self.opset, inputs, self.values, label, importer=self, narrow=narrow_in)
            with source_span(n.name or f"{n.op_type}_{k}"):  # every op this node becomes
                try:
                    outs = list(conv.fn(node))
                except StructureValueError as e:  # an axis from an input's values: one version per choice
                    outs = versioned(node, e)
        except EmberError as e:
            raise type(e)(f"{label} (opset {self.opset}): {e}") from None
        except (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError) as e:
            # a converter's bug must still name the node, as an EmberError (the cause is chained)
            raise CompileError(f"{label} (opset {self.opset}): Ember's {n.op_type} converter failed "
                               f"({type(e).__name__}: {e}); this is a bug in Ember, please report it "
                               f"with the model") from e
        if len(outs) < len([o for o in n.output if o]):
            outs += [None] * (len(n.output) - len(outs))
        if n.op_type == "Constant" and n.attribute and n.attribute[0].type == onnx.AttributeProto.TENSOR \
                and narrow_of(n.attribute[0].t.data_type):
            node.set_narrow(0, narrow_of(n.attribute[0].t.data_type))
        for j, name in enumerate(n.output):
            kind = node.narrow_out.get(j) or (narrow_in[0] if n.op_type in NARROW_CARRIERS and narrow_in else None)
            if kind and name:
                self.narrow[name] = kind
        if not any(narrow_in) or n.op_type == "Constant":  # (no folding on a narrow type's bytes)
            self._fold(node, outs)
        for name, expr in zip(n.output, outs):
            if not name:
                continue
            if expr is None:
                raise UnsupportedOpError(f"{label}: output {name!r} is not produced by Ember's converter")
            self.env[name] = expr

    def _fold(self, node: NodeContext, outs: list) -> None:
        """Record import-time values of small shape computations (and use them as constants)."""
        if node.op_type == "Constant" and isinstance(outs[0], Constant):
            self.values[node.output_names[0]] = outs[0].value
            return
        types = [getattr(o, "type", None) for o in outs]
        vals = fold.evaluate(node, types)
        if vals is None:
            # (a converter that answers with a small constant -- SequenceLength, OptionalHasElement
            # -- gives a value known at import: a loop's trip count, an If's condition)
            for name, o in zip(node.output_names, outs):
                if name and isinstance(o, Constant) and o.value.size <= fold.LIMIT:
                    self.values.setdefault(name, o.value)
            return
        for i, v in enumerate(vals):
            self.values[node.output_names[i]] = v
            if not fold.is_symbolic(v):
                outs[i] = Constant(v)


__all__ = ["from_onnx"]
