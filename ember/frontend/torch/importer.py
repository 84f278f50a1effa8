"""A ``torch.export`` program (core ATen, after decompositions) -> Ember graph Module.

    >>> prog = import_program(ep)                            # doctest: +SKIP
    >>> print(prog.module)                                   # doctest: +SKIP

Like the ONNX importer, the import runs in steps, each with its own kind of error:

1. *Check the signature*: a program that updates buffers (a batch norm in training mode) or
   its inputs, or computes gradients, is a :class:`TrainingGraphError`; Ember compiles
   inference graphs.
2. *Scan* every node before converting any (:func:`scan`): targets with no converter and uses
   a converter refuses are collected and raised as ONE :class:`UnsupportedOpError` that lists
   each op with the places in the user's source (from the export's stack traces) that made it.
3. *Convert* node by node in graph order; every call is typed as it is built, so a shape or
   dtype error names the node, and each result is checked against the rank and dtype torch
   recorded for it.

Parameters, buffers and constant tensors become Constants (copied: later changes to the
module do not reach the compiled model); tensor user inputs become the function's
parameters, with symbolic sizes as Ember dims; non-tensor user inputs are specialized values
(the export recorded them), which the caller must pass unchanged.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any, Mapping, Optional

from ...errors import EmberError, ShapeError, UnsupportedOpError
from ...graph import Constant, Dim, Expr, Function, Module, TensorType, Tuple, Var, source_span
from .context import NodeContext, location
from .dtypes import tensor_to_numpy, to_ember
from .errors import TrainingGraphError
from .symbols import symint_to_dim
from .table import lookup, target_name

# ops that only exist in training graphs, and why
TRAINING_OPS = {
    "aten._native_batch_norm_legit.default": "batch norm on batch statistics (a module in training mode)",
    "aten._native_batch_norm_legit_functional.default": "batch norm on batch statistics (a module in training mode)",
    "aten.native_batch_norm.default": "batch norm on batch statistics (a module in training mode)",
    "aten.native_dropout.default": "dropout (a module in training mode)",
    "aten.rand.default": "random numbers", "aten.randn.default": "random numbers",
    "aten.bernoulli.p": "dropout (a module in training mode)",
}
_BACKWARD = "_backward"

_FIX = ("Ember compiles inference graphs: call model.eval() and export or compile under torch.no_grad() "
        "(or torch.inference_mode())")


@dataclasses.dataclass
class ImportedProgram:
    """An imported program: the graph and how to call it with the user's arguments.

    ``inputs``: per flat user input (the leaves of ``(args, kwargs)`` in ``in_spec`` order),
    ``("tensor", name)`` for a parameter of ``main`` or ``("value", v)`` for a value the export
    specialized. ``outputs``: per flat user output, ``("tensor", k)`` (the k-th result of the
    executable) or ``("value", v)``.
    """

    module: Module
    inputs: list
    outputs: list
    in_spec: Any
    out_spec: Any
    dim_names: dict  # torch symbol name -> Ember dim name


def _problem_location(n) -> str:
    where = location(n)
    return where or f"node {n.name!r}"


def scan(ep) -> dict:
    """Everything that would stop the import, found without converting anything:
    ``{"ops": {target: [locations]}, "training": {target: [locations]}, "reasons": [...]}``."""
    ops: dict = defaultdict(list)
    training: dict = defaultdict(list)
    reasons = []
    for n in ep.graph.nodes:
        if n.op == "get_attr":
            continue  # (a tensor attribute is a constant; anything else fails where it is used)
        if n.op != "call_function":
            continue
        name = target_name(n.target)
        if name in TRAINING_OPS or name.endswith(_BACKWARD + ".default") or _BACKWARD + "." in name:
            training[name].append(_problem_location(n))
            continue
        conv = lookup(name)
        if conv is None:
            ops[name].append(_problem_location(n))
            continue
        if conv.check is not None:
            why = conv.check(n)
            if why:
                reasons.append(f"{name} at {_problem_location(n)}: {why}")
    return {"ops": dict(ops), "training": dict(training), "reasons": reasons}


def _listing(found: dict) -> list:
    lines = []
    for op, where in sorted(found.items()):
        shown = where[:5]
        lines.append(f"  {op} ({len(where)} use{'s' if len(where) > 1 else ''}):")
        lines += [f"      {w}" for w in shown]
        if len(where) > len(shown):
            lines.append(f"      and {len(where) - len(shown)} more")
    return lines


def raise_problems(problems: dict, source: str) -> None:
    """One error listing everything :func:`scan` found, or nothing."""
    if problems["training"]:
        raise TrainingGraphError("\n".join([f"{source} is a training graph: it uses"]
                                           + _listing({f"{k} [{TRAINING_OPS.get(k, 'backward')}]": v
                                                       for k, v in problems["training"].items()})
                                           + [_FIX + "."]))
    if problems["ops"] or problems["reasons"]:
        lines = []
        if problems["ops"]:
            lines.append(f"{source} uses {len(problems['ops'])} ATen op(s) Ember does not convert:")
            lines += _listing(problems["ops"])
        if problems["reasons"]:
            lines.append("unsupported uses:")
            lines += [f"  {r}" for r in problems["reasons"]]
        lines.append("(python bench/torch_ops.py lists the core ATen ops Ember converts)")
        err = UnsupportedOpError("\n".join(lines))
        err.unsupported_ops = problems["ops"]
        raise err


def check_signature(ep, source: str) -> None:
    """A program that updates state or computes gradients is a TrainingGraphError."""
    from torch.export.graph_signature import OutputKind

    found = []
    for spec in ep.graph_signature.output_specs:
        if spec.kind == OutputKind.BUFFER_MUTATION:
            found.append(f"it updates buffer {spec.target!r} (a batch norm's running statistics in training mode?)")
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            found.append(f"it writes its input {spec.target!r} in place")
        elif spec.kind in (OutputKind.LOSS_OUTPUT, OutputKind.GRADIENT_TO_PARAMETER,
                           OutputKind.GRADIENT_TO_USER_INPUT):
            found.append(f"it computes a loss or gradients ({spec.kind.name})")
    if found:
        raise TrainingGraphError(f"{source} is not an inference graph: " + "; ".join(found) + ". " + _FIX + ".")


def weight(t) -> Constant:
    """A parameter or buffer as a Constant: a copy (later changes to the module stay there) in
    64-byte-aligned memory, which kernels that read it unpacked load with aligned vectors."""
    from ...runtime.ndarray import array

    return Constant.adopt(array(tensor_to_numpy(t), align=64).numpy())


class _Importer:
    def __init__(self, ep, dim_names: Mapping[str, str], source: str):
        self.ep = ep
        self.names = dict(dim_names)
        self.source = source
        self.env: dict = {}
        self.functions: dict = {}  # name -> Function: the steps of scanned recurrences

    # -- inputs ---------------------------------------------------------------------------------
    def _name_symbols(self, placeholders: list) -> None:
        """Names for symbols the caller did not name: the first input axis that carries them."""
        import sympy

        for n, spec in placeholders:
            val = n.meta.get("val")
            for axis, d in enumerate(getattr(val, "shape", ())):
                expr = getattr(getattr(d, "node", None), "expr", None)
                if isinstance(expr, sympy.Symbol) and expr.name not in self.names:
                    self.names[expr.name] = f"{n.name}_dim{axis}"

    def _state(self, spec):
        ep = self.ep
        if spec.target in ep.state_dict:
            return ep.state_dict[spec.target]
        if spec.target in ep.constants:
            return ep.constants[spec.target]
        raise ShapeError(f"{self.source}: no value for {spec.kind.name.lower()} {spec.target!r}")

    def _bind_inputs(self) -> tuple:
        from torch.export.graph_signature import InputKind

        nodes = [n for n in self.ep.graph.nodes if n.op == "placeholder"]
        specs = self.ep.graph_signature.input_specs
        user = [(n, s) for n, s in zip(nodes, specs) if s.kind == InputKind.USER_INPUT]
        self._name_symbols(user)
        params, inputs = [], []
        for n, spec in zip(nodes, specs):
            if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                t = self._state(spec)
                self.env[n] = weight(t)
            elif spec.kind == InputKind.USER_INPUT:
                val = n.meta.get("val")
                if hasattr(val, "shape") and hasattr(val, "dtype"):
                    shape = tuple(symint_to_dim(d, self.names) for d in val.shape)
                    v = Var(n.name, TensorType(shape, to_ember(val.dtype, f"input {n.name!r}")))
                    params.append(v)
                    inputs.append(("tensor", n.name))
                    self.env[n] = v
                else:  # an int, float, bool or None the export specialized
                    self.env[n] = val
                    inputs.append(("value", val))
            else:
                raise UnsupportedOpError(f"{self.source}: input {n.name!r} is a {spec.kind.name} "
                                         "(script objects and effect tokens are not supported)")
        return params, inputs

    # -- nodes ----------------------------------------------------------------------------------
    def _get_attr(self, n) -> None:
        import torch

        v = getattr(self.ep.graph_module, n.target, None)
        if not isinstance(v, torch.Tensor):
            raise UnsupportedOpError(f"{self.source}: attribute {n.target!r} is a {type(v).__name__} "
                                     "(a submodule of a control-flow operator?), not a tensor")
        self.env[n] = weight(v)

    def _convert(self, n) -> None:
        name = target_name(n.target)
        conv = lookup(name)
        node = NodeContext(n, self.env, self)
        where = location(n)
        try:
            with source_span(n.name):
                out = conv.fn(node)
            out = _check_result(node, out)
        except EmberError as e:
            at = f" (from {where})" if where else ""
            raise type(e)(f"{node.label}{at}: {e}") from None
        self.env[n] = out

    # -- outputs --------------------------------------------------------------------------------
    def _outputs(self) -> tuple:
        from torch.export.graph_signature import OutputKind
        import torch.fx

        out_node = next(n for n in self.ep.graph.nodes if n.op == "output")
        flat = out_node.args[0]
        flat = list(flat) if isinstance(flat, (list, tuple)) else [flat]
        specs = self.ep.graph_signature.output_specs
        results, outputs, seen = [], [], set()
        for v, spec in zip(flat, specs):
            if spec.kind != OutputKind.USER_OUTPUT:
                continue
            value = self.env[v] if isinstance(v, torch.fx.Node) else v
            if isinstance(value, Expr):
                # an input, a weight or a value returned twice gets a copy of its own: the
                # executable's outputs are new arrays
                if not _is_call(value) or value in seen:
                    value = _copy(value)
                seen.add(value)
                outputs.append(("tensor", len(results)))
                results.append(value)
            elif isinstance(value, Dim):
                raise UnsupportedOpError(f"{self.source} returns the symbolic size {value} "
                                         f"(output {len(outputs)}); return it as a tensor")
            else:
                outputs.append(("value", value))
        return results, outputs

    def run(self) -> ImportedProgram:
        params, inputs = self._bind_inputs()
        for n in self.ep.graph.nodes:
            if n.op == "call_function":
                self._convert(n)
            elif n.op == "get_attr":
                self._get_attr(n)
        results, outputs = self._outputs()
        if not results:
            raise UnsupportedOpError(f"{self.source} returns no tensors")
        body = results[0] if len(results) == 1 else Tuple(results)
        mod = Module({"main": Function(params, body, body.type), **self.functions})
        spec = self.ep.call_spec
        return ImportedProgram(mod, inputs, outputs, spec.in_spec, spec.out_spec, self.names)


def _is_call(e) -> bool:
    from ...graph import Call

    return isinstance(e, Call)


def _copy(e: Expr) -> Expr:
    from ...graph.ops import call

    return call("copy", e)


def _check_result(node: NodeContext, out):
    """The converter's tensor result against what torch recorded: the same rank and the same
    static sizes (else a converter is wrong: ShapeError), cast to torch's dtype where the
    Ember op computes in another one."""
    val = node.val()
    if isinstance(out, Expr) and hasattr(val, "shape") and hasattr(val, "dtype"):
        t = out.type
        if not isinstance(t, TensorType):
            raise ShapeError(f"the converter gave a {t}, torch records a tensor")
        if t.ndim != len(val.shape):
            raise ShapeError(f"the converter gave {t}, torch records shape {tuple(val.shape)}")
        for a, b in zip(t.shape, val.shape):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                raise ShapeError(f"the converter gave {t}, torch records shape {tuple(val.shape)}")
        want = to_ember(val.dtype, f"the result of {node.label}")
        if t.dtype != want:
            out = node.call("cast", out, dtype=want)
    return out


def import_program(ep, dim_names: Optional[Mapping[str, str]] = None,
                   source: str = "the exported program") -> ImportedProgram:
    """Import ``ep`` (a ``torch.export.ExportedProgram`` in core ATen: run its decompositions
    first, as :func:`ember.frontend.torch.export_program` does) as an Ember graph.

    ``dim_names`` maps torch's symbol names (``s17``) to the names the Ember dims get
    (``batch``); unnamed symbols are named after the first input axis carrying them.

    Raises TrainingGraphError (a training graph), UnsupportedOpError (every op Ember does not
    convert, each with the source locations that use it), ShapeError/DTypeError (naming the node).
    """
    check_signature(ep, source)
    raise_problems(scan(ep), source)
    return _Importer(ep, dim_names or {}, source).run()


__all__ = ["ImportedProgram", "TRAINING_OPS", "check_signature", "import_program", "raise_problems", "scan"]
