"""Versioning: a node whose axes come from a model input, compiled once per possible choice.

ONNX lets some structure-deciding operands be tensors computed while the model runs: the axes
of the reductions, Squeeze and Unsqueeze, the axis of CumSum. Their values decide which loops
a kernel has, so Ember cannot compile one kernel over them. But they range over a small finite
set (the distinct axes of a tensor of known rank), so the node is compiled once per choice --
each a module function holding the node with that choice as a constant -- and the program
picks the one matching the value at run time: a chain of ``if`` steps over conditions
computed from the value (normalized by the rank, compared as a set). A value that matches no
choice (an axis out of range, one named twice) ends the chain in an error branch, an
``ArgumentError`` naming the node and the input.

Sizes from values (a Tile's repeats, a TopK's k) are not versioned: they are data sizes
(:meth:`NodeContext._runtime_value`).
"""
from __future__ import annotations

import itertools
from typing import Callable, Optional

import numpy as np
from onnx import helper, numpy_helper

from ...errors import EmberError
from ...graph import Constant, Function, TensorType, TupleGetItem, Var
from .context import StructureValueError

MAX_CASES = 32  # more choices than this: the original error (compiling each would take too long)


def _rank(node, i: int = 0) -> Optional[int]:
    t = node.inputs[i].type if node.has(i) else None
    return t.ndim if isinstance(t, TensorType) else None


def _count(node, i: int) -> Optional[int]:
    """How many values the runtime input ``i`` holds (its shape is static)."""
    t = node.inputs[i].type
    if not isinstance(t, TensorType) or not t.is_static or t.ndim > 1:
        return None
    return int(np.prod(t.shape, dtype=np.int64))


def _axes_sets(rank_of: Callable, ordered: bool = False) -> Callable:
    """Choices of distinct axes: every m-subset of range(rank) (``rank_of(node, m)``), or every
    ordering of one where the order matters (Pad's axes: the pads follow it)."""
    def domain(node, i):
        m = _count(node, i)
        r = rank_of(node, m) if m else None
        if not m or r is None or m > r:
            return None
        pick = itertools.permutations if ordered else itertools.combinations
        return r, list(pick(range(r), m))
    return domain


def _squeezable(node, i):
    m = _count(node, i)
    t = node.inputs[0].type
    if not m or not isinstance(t, TensorType):
        return None
    ones = [a for a, d in enumerate(t.shape) if not isinstance(d, int) or d == 1]
    return t.ndim, list(itertools.combinations(ones, m)) if m <= len(ones) else None


# op type -> (the index of the versioned input, its domain: (rank for negatives, [choice]))
VERSIONED = {
    **{op: (1, _axes_sets(lambda node, m: _rank(node))) for op in (
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")},
    "Squeeze": (1, _squeezable),
    "Unsqueeze": (1, _axes_sets(lambda node, m: None if _rank(node) is None else _rank(node) + m)),
    "CumSum": (1, _axes_sets(lambda node, m: _rank(node) if m == 1 else None)),
    "CumProd": (1, _axes_sets(lambda node, m: _rank(node) if m == 1 else None)),
    "Pad": (3, _axes_sets(lambda node, m: _rank(node), ordered=True)),
    "DFT": (2, lambda node, i: (_rank(node), [(a,) for a in range(_rank(node) - 1)]) if _count(node, i) == 1
            else None),  # (not the last axis: it holds the real and imaginary parts)
}
ORDERED = ("Pad",)


def _condition(node, value, rank: int, choice: tuple, ordered: bool):
    """Whether the runtime ``value`` names exactly the axes ``choice`` (in any order unless
    ``ordered``, negative axes counted from ``rank``): a one-element bool."""
    m = len(choice)
    v = node.call("cast", node.call("reshape", value, newshape=(m,)), dtype="int64")
    neg = node.call("less", v, Constant(np.array(0, np.int64)))
    v = node.call("where", neg, node.call("add", v, Constant(np.array(rank, np.int64))), v)
    if ordered:  # the same axes in the same order
        same = node.call("cast", node.call("equal", v, Constant(np.array(choice, np.int64))), dtype="int64")
        return node.call("equal", node.call("sum", same, axis=None), Constant(np.array(m, np.int64)))
    hit = node.call("equal", node.call("reshape", v, newshape=(m, 1)), Constant(np.array(choice, np.int64)))
    if m == 1:
        return node.call("reshape", hit, newshape=(1,))
    hit = node.call("cast", hit, dtype="int64")
    # a permutation of the choice: every value matches an axis and every axis a value
    rows = node.call("sum", node.call("max", hit, axis=(1,)), axis=None)
    cols = node.call("sum", node.call("max", hit, axis=(0,)), axis=None)
    return node.call("equal", node.call("add", rows, cols), Constant(np.array(2 * m, np.int64)))


def _case_graph(node, index: int, value: np.ndarray):
    """The node alone with input ``index`` the constant ``value`` (an ONNX graph that reads the
    node's other inputs from the enclosing graph)."""
    const = helper.make_node("Constant", [], ["__ember_case"], value=numpy_helper.from_array(value))
    proto = type(node.proto)()
    proto.CopyFrom(node.proto)
    proto.input[index] = "__ember_case"
    outs = [helper.make_empty_tensor_value_info(o) for o in proto.output if o]
    return helper.make_graph([const, proto], f"{node.label} case", [], outs)


def versioned(node, err: StructureValueError) -> list:
    """The node's outputs, chosen at run time among its versions (see the module docstring);
    raises ``err`` when the node's op or that input has no finite set of choices."""
    spec = VERSIONED.get(node.op_type)
    if spec is None or spec[0] != err.index or node.importer is None:
        raise err
    domain = spec[1](node, err.index)
    if domain is None or not domain[1] or len(domain[1]) > MAX_CASES:
        raise err
    rank, choices = domain
    imp = node.importer
    value = node.inputs[err.index]
    shape, dtype = value.type.shape, np.dtype(value.type.dtype)
    from .control import _unify

    cases, types, valid = [], None, []
    for choice in choices:
        try:
            name, args, outs = imp.subgraph(_case_graph(node, err.index, np.array(choice, dtype).reshape(shape)),
                                            f"{node.label} (axes {list(choice)})")
        except EmberError:  # a choice the node cannot take with these shapes: the run refuses it
            continue
        valid.append(list(choice))
        cases.append((name, list(args), _condition(node, value, rank, choice, node.op_type in ORDERED)))
        types = list(outs) if types is None else [_unify(a, b, f"{node.label}.v", k)
                                                  for k, (a, b) in enumerate(zip(types, outs))]
    if not cases:
        raise err
    what = (f"input {node.input_names[err.index]!r} must name {len(choices[0])} distinct axis(es) of a rank-{rank} "
            f"tensor (in [-{rank}, {rank}))" + (" of size 1" if node.op_type == "Squeeze" else "")
            + ("; the model was compiled for each such choice" if len(valid) == len(choices) else
               f"; the choices the model can take (compiled for each): {valid}"))
    result = _chain(node, imp, cases, tuple(types), what)
    return [result] if len(types) == 1 else [TupleGetItem(result, k) for k in range(len(types))]


def _chain(node, imp, cases: list, types: tuple, error: str):
    """``if c0: case0 elif c1: case1 ... else: error``, each ``else`` a function of its own."""
    name, args, cond = cases[0]
    if len(cases) == 1:
        return node.call("if", cond, *args, then=name, **{"else": ""}, n_then=len(args), types=types,
                         else_error=error)
    rest = [(n, a, c) for n, a, c in cases[1:]]
    outer = [c for _, _, c in rest] + [x for _, a, _ in rest for x in a]
    params = [Var(f"v{j}", x.type) for j, x in enumerate(outer)]
    it = iter(params[len(rest):])
    inner = [(n, [next(it) for _ in a], p) for (n, a, _), p in zip(rest, params)]
    body = _chain(node, imp, inner, types, error)
    fname = f"subgraph{len(imp.functions)}"
    imp.functions[fname] = Function(params, body, body.type)
    return node.call("if", cond, *args, *outer, then=name, **{"else": fname}, n_then=len(args), types=types)


__all__ = ["VERSIONED", "versioned"]
