"""Import-time evaluation of small shape computations (Shape -> Gather -> Concat -> Reshape).

Exported models compute shapes in the graph: ``Reshape(x, Concat(Gather(Shape(x), 0), [-1]))``.
Ember ops take shapes as attributes, so the importer needs those values while it converts.
This module evaluates the few ONNX ops such chains use, on small tensors only (at most
:data:`LIMIT` elements in and out), never on model data. Shapes may hold symbolic dims, so
values are numpy arrays that may be object arrays of ints and :class:`Dim` s; arithmetic on a
Dim goes through :mod:`ember.graph.ops.dims` (``n * 4`` is ``Dim("4*n")``).

Folding is an import detail: the graph passes' constant folding is the general mechanism.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ...graph import Dim
from ...graph.ops import dims as D
from ...loop import dtype as dt

LIMIT = 4096


def is_symbolic(v: np.ndarray) -> bool:
    return v.dtype == object


def _sym_binary(fn_int: Callable, fn_dim: Optional[Callable]):
    """Elementwise binary op over arrays that may hold Dims (object arrays)."""
    def apply(a: np.ndarray, b: np.ndarray) -> Optional[np.ndarray]:
        if not is_symbolic(a) and not is_symbolic(b):
            return fn_int(a, b)
        if fn_dim is None:
            return None
        out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=object)
        for idx, (x, y) in zip(np.ndindex(out.shape), np.broadcast(a, b)):
            out[idx] = fn_dim(x, y)
            if out[idx] is None:
                return None
        return _maybe_int(out)
    return apply


def _maybe_int(v: np.ndarray) -> np.ndarray:
    """An object array with no Dims left becomes int64."""
    if is_symbolic(v) and not any(isinstance(x, Dim) for x in v.reshape(-1)):
        return v.astype(np.int64)
    return v


def _sym_mul(x, y):
    return D.dim_mul(_i(x), _i(y))


def _sym_add(x, y):
    return D.dim_add(_i(x), _i(y))


def _sym_sub(x, y):
    return D.dim_sub(_i(x), _i(y))


def _sym_div(x, y):
    # ONNX integer Div truncates; dims are never negative, so that is floor division
    x, y = _i(x), _i(y)
    if isinstance(y, int) and y <= 0 or (isinstance(x, int) and x < 0):
        return None
    return D.dim_floordiv(x, y)


def _sym_mod(x, y):
    x, y = _i(x), _i(y)
    if isinstance(y, int) and y <= 0:
        return None
    if isinstance(x, int) and x < 0:
        if isinstance(y, int):
            return None
        # ONNX's Mod takes the divisor's sign: -a mod n = (n - a mod n) mod n, in [0, n) --
        # torch.roll by a shift on a symbolic axis exports it (Swin's shifted windows)
        return D.dim_mod(D.dim_sub(y, D.dim_mod(-x, y)), y)
    return D.dim_mod(x, y)


def _sym_minmax(fn):
    def apply(x, y):
        x, y = _i(x), _i(y)
        if isinstance(x, int) and x < 0 or isinstance(y, int) and y < 0:
            return None  # a dim (>= 1) against a negative number: not a dim expression
        return fn(x, y)
    return apply


def _sym_compare(op: str):
    """A comparison of a dim with a number or a dim: known where it is for every size (a
    size against -1, TorchScript's ``expand``), else None."""
    def apply(x, y):
        return D.dim_compare(op, _i(x), _i(y))
    return apply


def _i(x):
    return x if isinstance(x, Dim) else int(x)


def _int_div(a, b):
    if a.dtype.kind in "iu":
        return np.trunc(a / b).astype(a.dtype)  # ONNX integer Div truncates (like C)
    return a / b


_BINARY = {
    "Add": _sym_binary(np.add, _sym_add),
    "Sub": _sym_binary(np.subtract, _sym_sub),
    "Mul": _sym_binary(np.multiply, _sym_mul),
    "Div": _sym_binary(_int_div, _sym_div),
    "Equal": _sym_binary(np.equal, _sym_compare("==")),
    "Less": _sym_binary(np.less, _sym_compare("<")),
    "Greater": _sym_binary(np.greater, _sym_compare(">")),
    "Max": _sym_binary(np.maximum, _sym_minmax(D.dim_max)),
    "LessOrEqual": _sym_binary(np.less_equal, _sym_compare("<=")),
    "GreaterOrEqual": _sym_binary(np.greater_equal, _sym_compare(">=")),
    "And": _sym_binary(np.logical_and, None),
    "Or": _sym_binary(np.logical_or, None),
    "Xor": _sym_binary(np.logical_xor, None),
    "Min": _sym_binary(np.minimum, _sym_minmax(D.dim_min)),
}


def _shape_of(node, vals):
    t = node.type(0)
    start, end = node.attr("start", 0), node.attr("end", None)
    shape = list(t.shape)[slice(start, end)]
    return _maybe_int(np.array(shape, dtype=object).reshape(len(shape)))


def _size(node, vals):
    n = D.prod(node.type(0).shape)
    return np.array(n, dtype=np.int64) if isinstance(n, int) else np.array(n, dtype=object)


def _axes(node, vals, i: int):
    """Axes from the attribute (old opsets) or the input ``i`` (newer ones)."""
    if "axes" in node.attrs:
        return list(node.attrs["axes"])
    if i < len(vals) and vals[i] is not None:
        return [int(a) for a in vals[i].reshape(-1)]
    return None


def _unsqueeze(node, vals):
    x, axes = vals[0], _axes(node, vals, 1)
    nd = x.ndim + len(axes)
    axes = sorted(a % nd for a in axes)
    for a in axes:
        x = np.expand_dims(x, a)
    return x


def _squeeze(node, vals):
    axes = _axes(node, vals, 1)
    x = vals[0]
    return np.squeeze(x, axis=tuple(axes)) if axes is not None else np.squeeze(x)


def _gather(node, vals):
    return np.take(vals[0], vals[1].astype(np.int64), axis=node.attr("axis", 0))


def _concat(node, vals):
    parts = vals
    if any(is_symbolic(p) for p in parts):
        parts = [p.astype(object) for p in parts]
    return _maybe_int(np.concatenate(parts, axis=node.attr("axis", 0)))


def _slice(node, vals):
    x = vals[0]
    if node.opset < 10:
        starts, ends, axes = node.attr("starts"), node.attr("ends"), node.attr("axes")
        steps = None
    else:
        starts, ends = (list(vals[i].reshape(-1)) for i in (1, 2))
        axes = list(vals[3].reshape(-1)) if len(vals) > 3 and vals[3] is not None else None
        steps = list(vals[4].reshape(-1)) if len(vals) > 4 and vals[4] is not None else None
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    sl = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        sl[int(a)] = slice(int(s), int(e), int(st))
    return x[tuple(sl)]


def _transpose(node, vals):
    """Of shape values only (sizes, as YOLO's padding of its detections computes them): a
    transposed weight is model data, which the graph's constant folding computes."""
    if not (is_symbolic(vals[0]) or vals[0].dtype.kind in "iu"):
        return None
    perm = node.attr("perm")
    return np.transpose(vals[0], None if perm is None else tuple(perm))


def _cast(node, vals):
    return vals[0]  # evaluate() converts every result to the output type's dtype


def _reshape(node, vals):
    x = vals[0]
    shape = [int(s) for s in vals[1].reshape(-1)]
    shape = [x.shape[i] if s == 0 and not node.attr("allowzero", 0) else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _const_of_shape(node, vals):
    value = node.attr("value")
    shape = [int(s) for s in vals[0].reshape(-1)]
    if value is None:
        return np.zeros(shape, np.float32)
    return np.full(shape, value.reshape(-1)[0], dtype=value.dtype)


def _range(node, vals):
    start, limit, delta = (v.reshape(-1)[0] for v in vals[:3])
    return np.arange(start, limit, delta, dtype=vals[0].dtype)


def _where(node, vals):
    if any(is_symbolic(v) for v in vals[1:]):
        return _maybe_int(np.where(vals[0], vals[1].astype(object), vals[2].astype(object)))
    return np.where(*vals)


def _reduce_prod(node, vals):
    if is_symbolic(vals[0]):
        return None
    axes = _axes(node, vals, 1)
    keep = bool(node.attr("keepdims", 1))
    return np.prod(vals[0], axis=None if not axes else tuple(axes), keepdims=keep)


_UNARY = {"Identity": lambda x: x, "Neg": np.negative, "Abs": np.abs, "Floor": np.floor, "Ceil": np.ceil,
          "Not": np.logical_not, "Sqrt": np.sqrt}

_OTHER = {
    "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Gather": _gather, "Concat": _concat, "Slice": _slice,
    "Cast": _cast, "CastLike": _cast, "Reshape": _reshape, "ConstantOfShape": _const_of_shape, "Range": _range,
    "Where": _where, "ReduceProd": _reduce_prod, "Transpose": _transpose,
}
_TYPE_ONLY = {"Shape": _shape_of, "Size": _size}  # need the input's type, not its value


def foldable(op_type: str) -> bool:
    return (op_type in ("Mod", "Split") or op_type in _BINARY or op_type in _UNARY or op_type in _OTHER
            or op_type in _TYPE_ONLY)


def _split(node, out_types: list) -> Optional[list]:
    """Split's outputs (a shape split into its sizes), each as long as its type says."""
    v = node.value(0)
    if v is None or any(t is None or not all(isinstance(d, int) for d in t.shape) for t in out_types) \
            or v.size > LIMIT or v.ndim == 0:
        return None
    axis = node.attr("axis", 0) % v.ndim
    ends = np.cumsum([t.shape[axis] for t in out_types])
    if ends[-1] != v.shape[axis]:
        return None
    parts = np.split(v, ends[:-1], axis=axis)
    return [p if is_symbolic(p) else p.astype(dt.numpy_dtype(t.dtype)) for p, t in zip(parts, out_types)]


def evaluate(node, out_types: list) -> Optional[list]:
    """The values of the node's outputs if they can be computed now (small, inputs known), else None.

    ``node`` is a :class:`~.context.NodeContext`; ``out_types`` the converted outputs' types.
    """
    op = node.op_type
    if op == "Split":
        return _split(node, out_types)
    if not foldable(op) or len(out_types) != 1 or out_types[0] is None:
        return None
    if not all(isinstance(d, int) for d in out_types[0].shape) or _numel(out_types[0].shape) > LIMIT:
        return None
    if op in _TYPE_ONLY:
        try:
            return [_TYPE_ONLY[op](node, [])]
        except OverflowError:  # a dimension past int64: leave it to the graph, which reports it
            return None
    needed = range(1) if op == "CastLike" else range(len(node.inputs))  # CastLike reads only input 1's type
    vals = [node.value(i) if node.has(i) else None for i in range(len(node.inputs))]
    if any(vals[i] is None for i in needed if node.has(i)) or any(v.size > LIMIT for v in vals if v is not None):
        return None
    try:
        with np.errstate(all="ignore"):
            if op == "Mod":
                if any(is_symbolic(v) for v in vals):
                    out = _sym_binary(None, _sym_mod)(vals[0], vals[1])
                else:
                    out = np.fmod(vals[0], vals[1]) if node.attr("fmod", 0) else np.mod(vals[0], vals[1])
            elif op in _BINARY:
                out = _BINARY[op](vals[0], vals[1])
            elif op == "Identity":
                out = vals[0]  # (symbolic dims pass through)
            elif op == "Neg" and is_symbolic(vals[0]):  # -seq: a Slice's start from the end
                out = _sym_binary(None, _sym_sub)(np.zeros_like(vals[0]), vals[0])
            elif op in _UNARY:
                out = None if is_symbolic(vals[0]) else _UNARY[op](vals[0])
            else:
                out = _OTHER[op](node, vals)
    except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError):
        return None  # leave it to the graph: the converted call reports real errors at run time
    if out is None:
        return None
    out = np.asarray(out)
    want = out_types[0]
    if tuple(out.shape) != tuple(want.shape):
        return None  # disagreement with the type rule: trust the rule, do not fold
    if not is_symbolic(out):
        out = out.astype(dt.numpy_dtype(want.dtype))
    return [out]


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
