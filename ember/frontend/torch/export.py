"""A PyTorch module -> an exported program in core ATen, with the names of its dynamic sizes.

``torch.export.export`` traces the module (non-strict: the user's Python runs on fake tensors;
recurrent layers as one op each, :mod:`.recurrent`), then the core-ATen decompositions lower
every op to the ~190 operators torch documents as core ATen, except the ops Ember converts whole
(:func:`decompose` says which and why).
"""
from __future__ import annotations

import inspect
import warnings
from typing import Any, Mapping, Optional, Sequence

from ...errors import ModelError


def _keep() -> list:
    import torch

    # scaled_dot_product_attention: torch's decomposition returns other strides than eager's, so a
    # model that views the result (GPT-2) fails to re-trace; Ember converts it whole anyway.
    # hardswish, hardsigmoid: one op each (as the ONNX path has them), not x * clamp(x + 3, 0, 6) / 6,
    # whose clamp keeps MobileNetV3's squeeze-excitation out of the blocked channel layout
    aten = torch.ops.aten
    return [aten.scaled_dot_product_attention.default, aten.hardswish.default, aten.hardsigmoid.default]


def decompose(ep):
    """``ep`` lowered to core ATen (but the ops Ember keeps whole)."""
    import torch

    table = torch.export.default_decompositions()
    for op in _keep():
        table.pop(op, None)
    return ep.run_decompositions(table)


def export_program(model, example_args: Sequence = (), example_kwargs: Optional[Mapping] = None,
                   dynamic_shapes: Any = None, *, strict: bool = False):
    """``(exported program in core ATen, {torch symbol name: dim name})`` for ``model`` called
    as ``model(*example_args, **example_kwargs)``; ``dynamic_shapes`` as torch.export takes it
    (``{"x": {0: torch.export.Dim("batch")}}``, or per position). A model that is already an
    ``ExportedProgram`` is only decomposed."""
    import torch

    if isinstance(model, torch.export.ExportedProgram):
        return decompose(model), {}
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"from_torch takes a torch.nn.Module or an ExportedProgram, got {type(model).__name__}")
    args = tuple(example_args) if isinstance(example_args, (list, tuple)) else (example_args,)
    kwargs = dict(example_kwargs or {})
    from .recurrent import rnn_as_one_op

    try:
        with torch.no_grad(), rnn_as_one_op():
            try:
                ep = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict)
            except Exception as e:
                if getattr(getattr(e, "error_type", None), "name", "") != "CONSTRAINT_VIOLATION":
                    raise
                # the model guards a dimension the user named (BART, MobileBERT: a sequence of
                # 2 takes another branch): export it as torch.onnx.export does, each named Dim
                # as Dim.DYNAMIC -- dynamic where the model allows it, static where it does not
                warnings.warn(f"torch.export: {_first_lines(str(e), 2)} -- exporting those dimensions "
                              f"as torch.export.Dim.DYNAMIC instead", stacklevel=3)
                ep = torch.export.export(model, args, kwargs, dynamic_shapes=_as_dynamic(dynamic_shapes),
                                         strict=strict)
            ep = decompose(ep)
    except Exception as e:  # torch's own errors (data-dependent control flow, constraint violations, ...)
        if isinstance(e, (TypeError, ValueError)) and "dynamic_shapes" in str(e):
            raise
        raise ModelError(f"torch.export could not export {type(model).__name__}: {type(e).__name__}: "
                         f"{_first_lines(str(e))}") from e
    return ep, dim_names(ep, model, args, kwargs, dynamic_shapes)


def _as_dynamic(spec):
    """``spec`` (a dynamic_shapes pytree) with each named ``torch.export.Dim`` as ``Dim.DYNAMIC``."""
    import torch

    if isinstance(spec, dict):
        return {k: _as_dynamic(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(_as_dynamic(v) for v in spec)
    return torch.export.Dim.DYNAMIC if getattr(spec, "__name__", None) is not None else spec


def _first_lines(text: str, n: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:n]) + (f"\n... ({len(lines) - n} more lines)" if len(lines) > n else "")


def _top_level(model, args: tuple, kwargs: dict, dynamic_shapes) -> list:
    """``[(value, spec)]`` for the top-level arguments, in the order torch flattens them (the
    positional arguments, then the keyword arguments as given). torch matches a tuple of specs
    with the forward's parameters in signature order (``*args`` as one entry), a dict by name."""
    values = list(args) + list(kwargs.values())
    if dynamic_shapes is None:
        return [(v, None) for v in values]
    kinds = inspect.Parameter
    try:
        sig = inspect.signature(model.forward)
        combined = list(sig.bind(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        return list(zip(values, list(dynamic_shapes) + [None] * len(values)))
    by_name = dict(dynamic_shapes) if isinstance(dynamic_shapes, dict) else dict(zip(combined, dynamic_shapes))
    params = sig.parameters
    positional = [n for n, p in params.items() if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    var = next((n for n, p in params.items() if p.kind == kinds.VAR_POSITIONAL), None)
    varkw = next((n for n, p in params.items() if p.kind == kinds.VAR_KEYWORD), None)
    out = []
    for i, a in enumerate(args):
        if i < len(positional):
            out.append((a, by_name.get(positional[i])))
        else:
            vs = by_name.get(var)
            out.append((a, vs[i - len(positional)] if isinstance(vs, (list, tuple)) else None))
    for k, v in kwargs.items():
        if k in params and params[k].kind != kinds.VAR_KEYWORD:
            out.append((v, by_name.get(k)))
        else:
            vk = by_name.get(varkw)
            out.append((v, vk.get(k) if isinstance(vk, dict) else None))
    return out


def _leaf_specs(value, spec, out: list) -> None:
    """Each tensor's (or other leaf's) spec of ``value``'s pytree, in flatten order."""
    import torch

    if isinstance(value, torch.Tensor) or not isinstance(value, (list, tuple, dict)):
        out.append(spec if isinstance(value, torch.Tensor) else None)
    elif isinstance(value, dict):
        for k, v in value.items():
            _leaf_specs(v, spec.get(k) if isinstance(spec, dict) else None, out)
    else:
        for i, v in enumerate(value):
            _leaf_specs(v, spec[i] if isinstance(spec, (list, tuple)) and i < len(spec) else None, out)


def dim_names(ep, model, args: tuple, kwargs: dict, dynamic_shapes) -> dict:
    """``{torch symbol: the name of the torch.export.Dim the user gave that axis}``."""
    import sympy
    from torch.export.graph_signature import InputKind

    specs: list = []
    for value, spec in _top_level(model, args, kwargs, dynamic_shapes):
        _leaf_specs(value, spec, specs)
    nodes = [n for n in ep.graph.nodes if n.op == "placeholder"]
    user = [n for n, s in zip(nodes, ep.graph_signature.input_specs) if s.kind == InputKind.USER_INPUT]
    names: dict = {}
    for n, spec in zip(user, specs):
        val = n.meta.get("val")
        if spec is None or not hasattr(val, "shape"):
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for axis, d in items:
            name = getattr(d, "__name__", None)
            if name is None or axis >= len(val.shape):
                continue
            expr = getattr(getattr(val.shape[axis], "node", None), "expr", None)
            if isinstance(expr, sympy.Symbol):
                names.setdefault(expr.name, name)
    return names


__all__ = ["decompose", "dim_names", "export_program"]
