"""Converters of ONNX control flow: ``If`` (its branches become module functions).

A branch reads the enclosing graph's values by name; each such value becomes a parameter of
its function (``_Importer.subgraph``). Where the branches' outputs disagree on a dimension,
the result has a data size there, bound from whichever branch ran.
"""
from __future__ import annotations

from ...errors import UnsupportedOpError
from ...graph import TensorType, TupleGetItem
from ...graph.ops.dims import data_dim
from .table import converter


def _unify(a: TensorType, b: TensorType, where: str, k: int) -> TensorType:
    if a == b:
        return a
    if a.dtype != b.dtype or a.ndim != b.ndim:
        raise UnsupportedOpError(f"{where}: the branches' output {k} differ in rank or dtype ({a} vs {b})")
    return TensorType(tuple(x if x == y else data_dim(f"{where}.o{k}.d{j}")
                            for j, (x, y) in enumerate(zip(a.shape, b.shape))), a.dtype)


@converter("If")
def _if(node):
    imp = node.importer
    base = node.output_names[0] or node.label
    known = node.value(0)
    if known is not None and known.dtype != object and known.size == 1:  # decided at import
        branch = "then_branch" if bool(known.reshape(-1)[0]) else "else_branch"
        outs = imp.inline(node.attr(branch), f"{node.label} ({branch[:-7]})")
        for name, (_, value) in zip(node.output_names, outs):
            if value is not None and name:
                imp.values[name] = value  # (a shape computed in the branch stays known)
        return [e for e, _ in outs]
    then_name, then_args, then_types = imp.subgraph(node.attr("then_branch"), f"{node.label} (then)")
    else_name, else_args, else_types = imp.subgraph(node.attr("else_branch"), f"{node.label} (else)")
    if len(then_types) != len(else_types):
        raise UnsupportedOpError(f"the branches have {len(then_types)} and {len(else_types)} outputs")
    types = tuple(_unify(a, b, base, k) for k, (a, b) in enumerate(zip(then_types, else_types)))
    call = node.call("if", node.input(0), *then_args, *else_args, then=then_name, **{"else": else_name},
                     n_then=len(then_args), types=types)
    if len(types) == 1:
        return [call]
    return [TupleGetItem(call, k) for k in range(len(types))]
