"""Converters of ONNX control flow: ``If``, ``Loop``, ``Scan`` (their subgraphs become module
functions).

A branch reads the enclosing graph's values by name; each such value becomes a parameter of
its function (``_Importer.subgraph``). Where the branches' outputs disagree on a dimension,
the result has a data size there, bound from whichever branch ran.
"""
from __future__ import annotations

import contextlib
import contextvars

from ...errors import UnsupportedOpError
from ...graph import TensorType, TupleGetItem, Var
from ...graph.ops.dims import data_dim, is_data_symbol
from .boundary import SubgraphSequenceError
from .table import converter


def _unify(a: TensorType, b: TensorType, where: str, k: int) -> TensorType:
    if a == b:
        return a
    if a.dtype != b.dtype or a.ndim != b.ndim:
        raise UnsupportedOpError(f"{where}: the branches' output {k} differ in rank or dtype ({a} vs {b})")
    return TensorType(tuple(x if x == y else data_dim(f"{where}.o{k}.d{j}")
                            for j, (x, y) in enumerate(zip(a.shape, b.shape))), a.dtype)


_PER_VALUE: contextvars.ContextVar = contextvars.ContextVar("if_per_value", default=True)


@contextlib.contextmanager
def ifs_as_control_flow():
    """Within: an ``If`` whose condition is a model input stays control flow, the model one
    program for every value (what an export holds), not compiled per value of the condition."""
    token = _PER_VALUE.set(False)
    try:
        yield
    finally:
        _PER_VALUE.reset(token)


@converter("If", const_inputs=(0,))  # (the condition: branches that give sequences are decided at import)
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
    if imp.outer is None and isinstance(node.input(0), Var) and _PER_VALUE.get():
        # A model input decides the branch (optimum's merged decoders: `use_cache_branch`): the
        # model is compiled per value, each a straight program of fused kernels that runs
        # natively, not a branch run by a control step (T5's merged decoder step: ~1.5x ORT's
        # time as an If, ~0.8x compiled per value)
        node.const(0, "condition, a model input: the model is compiled per value of it")
    try:
        then_name, then_args, then_types = imp.subgraph(node.attr("then_branch"), f"{node.label} (then)")
        else_name, else_args, else_types = imp.subgraph(node.attr("else_branch"), f"{node.label} (else)")
    except SubgraphSequenceError as e:
        # (a sequence's length is the import's: the model is compiled per value of the condition)
        node.const(0, f"condition, since {e}")
        raise

    if len(then_types) != len(else_types):
        raise UnsupportedOpError(f"the branches have {len(then_types)} and {len(else_types)} outputs")
    types = tuple(_unify(a, b, base, k) for k, (a, b) in enumerate(zip(then_types, else_types)))
    call = node.call("if", node.input(0), *then_args, *else_args, then=then_name, **{"else": else_name},
                     n_then=len(then_args), types=types)
    if len(types) == 1:
        return [call]
    return [TupleGetItem(call, k) for k in range(len(types))]


def _changed(a: TensorType, b: TensorType) -> bool:
    return a.dtype != b.dtype or a.ndim != b.ndim or a.shape != b.shape


def _general(t: TensorType, name: str) -> TensorType:
    """``t`` with every dimension a symbol of its own: a value whose shape the iterations change."""
    return TensorType(tuple(data_dim(f"{name}.d{j}") for j in range(t.ndim)), t.dtype)


def _loose(t: TensorType, where: str) -> TensorType:
    """``t`` as the enclosing graph sees a result of the iterations: its dims over the enclosing
    graph's sizes, and a data size for each other one (a size the iterations made)."""
    def keep(d):
        return isinstance(d, int) or not any(is_data_symbol(s) for s in d.symbols)
    return TensorType(tuple(d if keep(d) else data_dim(f"{where}.d{j}") for j, d in enumerate(t.shape)), t.dtype)


def _body(imp, graph, label: str, formal: list, n_fixed: int, n_carried: int) -> tuple:
    """Convert a loop body whose inputs are ``formal`` (``n_fixed`` first, then the carried
    values): again with carried values of symbolic shape when an iteration changes them."""
    name, caps, outs = imp.subgraph(graph, label, formal)
    carried_out = outs[1 if n_fixed == 2 else 0:][:n_carried]  # (a Loop body returns its condition first)
    if any(_changed(a, b) for a, b in zip(formal[n_fixed:n_fixed + n_carried], carried_out)):
        formal = formal[:n_fixed] + [_general(t, f"{label}.v{k}") for k, t in enumerate(formal[n_fixed:])]
        name, caps, outs = imp.subgraph(graph, label, formal)
    return name, caps, outs, formal


@converter("Loop", const_inputs=(0, 1))  # (the trip count and condition: a loop over sequences unrolls)
def _loop(node):
    from .unroll import carries_structure, needs_values, unrolled_loop

    if carries_structure(node.inputs[2:]):
        return unrolled_loop(node)
    imp = node.importer
    base = node.output_names[0] or node.label
    has_trip, has_cond = node.has(0), node.has(1)
    carried = [node.input(i) for i in range(2, len(node.inputs))]
    formal = [TensorType((), "int64"), TensorType((), "bool")] + [c.type for c in carried]
    try:
        name, caps, outs, formal = _body(imp, node.attr("body"), node.label, formal, 2, len(carried))
    except UnsupportedOpError as e:
        # a body that needs a value known at import (a Slice's bounds from the iteration
        # number): unrolled, where the trip count is known (compiled per value if an input's)
        if not needs_values(e):
            raise
        if not has_trip or node.value(0) is None or (has_cond and node.value(1) is None):
            raise UnsupportedOpError(f"{e} (the loop unrolls where its trip count and condition are known: they "
                                     "must be known when the model is imported)") from None
        return unrolled_loop(node)
    n = len(carried)
    if len(outs) < 1 + n:
        raise UnsupportedOpError(f"the loop body returns {len(outs)} value(s); it must return the condition "
                                 f"and {n} carried value(s)")
    finals = [c.type if not _changed(c.type, o) else _loose(o, f"{base}.v{k}")
              for k, (c, o) in enumerate(zip(carried, outs[1:1 + n]))]
    scans = [TensorType((data_dim(f"{base}.iterations"),) + _loose(o, f"{base}.s{k}").shape, o.dtype)
             for k, o in enumerate(outs[1 + n:])]
    args = ([node.input(0)] if has_trip else []) + ([node.input(1)] if has_cond else []) + carried + caps
    types = tuple(finals + scans)
    call = node.call("loop", *args, body=name, has_trip=has_trip, has_cond=has_cond, n_carried=n,
                     n_scan=len(scans), types=types)
    return [call] if len(types) == 1 else [TupleGetItem(call, k) for k in range(len(types))]


@converter("Scan", since=9)
def _scan(node):
    imp = node.importer
    base = node.output_names[0] or node.label
    m = node.attr("num_scan_inputs")
    ins = [node.input(i) for i in range(len(node.inputs))]
    n = len(ins) - m
    states, scan_in = ins[:n], ins[n:]
    in_axes = [a % s.type.ndim for a, s in zip(node.attr("scan_input_axes", [0] * m), scan_in)]
    in_dirs = list(node.attr("scan_input_directions", [0] * m))
    slices = [TensorType(s.type.shape[:a] + s.type.shape[a + 1:], s.type.dtype) for s, a in zip(scan_in, in_axes)]
    length = scan_in[0].type.shape[in_axes[0]] if scan_in else 0
    name, caps, outs, formal = _body(imp, node.attr("body"), node.label, [s.type for s in states] + slices, 0, n)
    k = len(outs) - n
    out_axes = list(node.attr("scan_output_axes", [0] * k))
    out_dirs = list(node.attr("scan_output_directions", [0] * k))
    finals = [s.type if not _changed(s.type, o) else _loose(o, f"{base}.v{j}") for j, (s, o) in enumerate(zip(states, outs))]
    scans = []
    for j, o in enumerate(outs[n:]):
        e = _loose(o, f"{base}.s{j}")
        a = out_axes[j] % (e.ndim + 1)
        scans.append(TensorType(e.shape[:a] + (length,) + e.shape[a:], e.dtype))
    types = tuple(finals + scans)
    call = node.call("scan", *states, *scan_in, *caps, body=name, n_states=n, n_scan_in=m, in_axes=tuple(in_axes),
                     in_dirs=tuple(in_dirs), out_axes=tuple(a % (len(o.shape) + 1) for a, o in zip(out_axes, outs[n:])),
                     out_dirs=tuple(out_dirs), types=types)
    return [call] if len(types) == 1 else [TupleGetItem(call, j) for j in range(len(types))]
