"""Converters of ATen indexing ops: embedding, index_select, gather, advanced indexing
(``x[idx]``, ``x[:, i, j]``), the scatters and index_put, topk, sort and masked fills."""
from __future__ import annotations

from ...errors import UnsupportedOpError
from ...graph import TupleGetItem
from ...graph.ops import dims as D
from ...graph.ops.dims import data_dim
from ...graph.ops.registry import norm_axis
from .table import converter


@converter("aten.embedding.default")
def _embedding(node):
    return node.call("gather", node.tensor("weight"), node.tensor("indices"), axis=0)


@converter("aten.index_select.default")
def _index_select(node):
    x = node.tensor(0)
    return node.call("gather", x, node.tensor("index"), axis=norm_axis(node.arg("dim"), x.type.ndim))


@converter("aten.gather.default")
def _gather(node):
    x = node.tensor(0)
    return node.call("gather_elements", x, node.tensor("index"), axis=norm_axis(node.arg("dim"), x.type.ndim))


def _broadcast_indices(node, idx):
    shape = D.broadcast_shapes(*(i.type.shape for i in idx))
    idx = [node.as_tensor(i, "int64") for i in idx]
    return [i if tuple(i.type.shape) == tuple(shape) else node.call("expand", i, shape=shape) for i in idx], shape


def _stacked(node, idx):
    """Index tensors of one shape stacked on a new last axis (gather_nd's index)."""
    return node.call("concat", *[node.call("unsqueeze", i, axes=(i.type.ndim,)) for i in idx], axis=-1)


@converter("aten.index.Tensor", "aten._unsafe_index.Tensor")
def _index(node):
    x = node.tensor(0)
    indices = list(node.arg(1))
    where = [k for k, i in enumerate(indices) if i is not None]
    if not where:
        return x
    if len(where) == 1 and indices[where[0]].type.dtype == "bool":
        # x[mask]: the positions of the mask's true elements (a count known when the model runs)
        k, mask = where[0], indices[where[0]]
        if k != 0:
            raise UnsupportedOpError("a boolean mask is supported on the leading axes only (x[mask])")
        positions = node.call("transpose", nonzero(node, mask), axes=(1, 0))  # (count, mask rank)
        return node.call("gather_nd", x, positions)
    for k in where:
        if indices[k].type.dtype == "bool":
            raise UnsupportedOpError("a boolean mask among other index tensors is not supported")
    if len(where) == 1:  # one index tensor: take along that axis
        k = where[0]
        return node.call("gather", x, node.as_tensor(indices[k], "int64") if indices[k].type.dtype not in
                         ("int32", "int64") else indices[k], axis=k)
    idx, shape = _broadcast_indices(node, [indices[k] for k in where])
    nd = x.type.ndim
    rest = [a for a in range(nd) if a not in where]
    moved = x if where == list(range(len(where))) else node.call("transpose", x, axes=tuple(where + rest))
    y = node.call("gather_nd", moved, _stacked(node, idx))  # index dims, then the other axes in order
    adjacent = where == list(range(where[0], where[0] + len(where)))
    if adjacent and where[0] > 0:  # torch keeps adjacent index dims where the first indexed axis was
        b, first = len(shape), where[0]
        perm = tuple(range(b, b + first)) + tuple(range(b)) + tuple(range(b + first, y.type.ndim))
        y = node.call("transpose", y, axes=perm)
    return y


def nonzero(node, x):
    """The positions of ``x``'s nonzero elements as Ember's op gives them, ``(rank, count)``:
    a kernel counts them, ``bind_size`` makes the count a data size the program binds when the
    model runs, and ``nonzero`` fills the positions (:mod:`ember.graph.ops.dynamic`)."""
    axes = tuple(range(x.type.ndim))
    flags = node.call("cast", node.call("not_equal", x, node.scalar(0, x.type.dtype)), dtype="int64")
    count = node.call("sum", flags, axis=axes, keepdims=False) if axes else flags
    size = data_dim(f"{node.name}.n")
    count = node.call("bind_size", count, symbols=(size,))
    return node.call("nonzero", x, count, size=size)


@converter("aten.nonzero.default")
def _nonzero(node):
    return node.call("transpose", nonzero(node, node.tensor(0)), axes=(1, 0))  # torch: (count, rank)


@converter("aten.index_put.default", "aten._unsafe_index_put.default")
def _index_put(node):
    x = node.tensor(0)
    indices = list(node.arg(1))
    values = node.as_tensor(node.arg(2), x.type.dtype)
    accumulate = bool(node.arg("accumulate", False))
    where = [k for k, i in enumerate(indices) if i is not None]
    if len(where) == 1 and indices[where[0]].type.dtype == "bool" and where[0] == 0 and not accumulate:
        mask = indices[0]
        if mask.type.ndim < x.type.ndim:  # a mask over the leading axes covers the rest
            mask = node.call("reshape", mask, newshape=tuple(mask.type.shape) + (1,) * (x.type.ndim - mask.type.ndim))
        if values.type.ndim > 1 or (values.type.ndim == 1 and values.type.shape[0] != 1):
            raise UnsupportedOpError("index_put by a boolean mask with more than one value is data-dependent")
        return node.call("where", mask, values, x)
    if any(indices[k].type.dtype == "bool" for k in where):
        raise UnsupportedOpError("index_put supports index tensors (x[..., i, j] = v) or one boolean mask on the "
                                 "leading axes (x[mask] = v)")
    idx, shape = _broadcast_indices(node, [indices[k] for k in where])
    nd, b = x.type.ndim, len(shape)
    rest = [a for a in range(nd) if a not in where]
    # the indexed axes lead, as scatter_nd takes them (torch's fold writes x[:, :, i, j] += v)
    order = where + rest
    moved = x if order == list(range(nd)) else node.call("transpose", x, axes=tuple(order))
    adjacent = where == list(range(where[0], where[0] + len(where)))
    first = where[0] if adjacent else 0  # (torch keeps adjacent index dims where the first indexed axis was)
    result = (tuple(x.type.shape[:first]) + tuple(shape) + tuple(x.type.shape[a] for a in rest[first:]))
    if tuple(values.type.shape) != result:
        values = node.call("expand", values, shape=result)
    if first:
        values = node.call("transpose", values, axes=tuple(range(first, first + b)) + tuple(range(first))
                           + tuple(range(first + b, values.type.ndim)))
    out = node.call("scatter_nd", moved, _stacked(node, idx), values, reduction="add" if accumulate else "none")
    if order == list(range(nd)):
        return out
    return node.call("transpose", out, axes=tuple(order.index(a) for a in range(nd)))


def _scatter(reduction):
    def convert(node):
        x = node.tensor(0)
        axis = norm_axis(node.arg("dim"), x.type.ndim)
        index = node.tensor("index")
        src = node.arg("src", None) if "src" in node.args else node.arg("value", None)
        red = reduction
        if node.target == "aten.scatter_reduce.two":
            how = node.arg("reduce")
            red = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}.get(how)
            if red is None or not node.arg("include_self", True):
                raise UnsupportedOpError(f"scatter_reduce with reduce={how!r}, include_self="
                                         f"{node.arg('include_self', True)} is not supported")
        elif "reduce" in node.args and node.arg("reduce", None):
            red = {"add": "add", "multiply": "mul"}[node.arg("reduce")]
        src = node.as_tensor(src, x.type.dtype)
        if tuple(src.type.shape) != tuple(index.type.shape):
            if src.type.ndim == 0:
                src = node.call("expand", src, shape=index.type.shape)
            else:  # torch reads only the index-shaped corner of a larger src
                src = node.call("strided_slice", src, begin=(0,) * src.type.ndim, end=tuple(index.type.shape))
        return node.call("scatter_elements", x, index, src, axis=axis, reduction=red)
    return convert


converter("aten.scatter.src", "aten.scatter.value", "aten.scatter.reduce", "aten.scatter.value_reduce")(_scatter("none"))
converter("aten.scatter_add.default")(_scatter("add"))
converter("aten.scatter_reduce.two")(_scatter("none"))


@converter("aten.topk.default")
def _topk(node):
    x = node.tensor(0)
    call = node.call("topk", x, k=node.arg("k"), axis=int(node.arg("dim", -1)), largest=bool(node.arg("largest", True)),
                     sorted=True)
    return TupleGetItem(call, 0), TupleGetItem(call, 1)


@converter("aten.sort.default", "aten.sort.stable")
def _sort(node):
    x = node.tensor(0)
    axis = norm_axis(node.arg("dim", -1), max(x.type.ndim, 1))
    call = node.call("topk", x, k=x.type.shape[axis], axis=axis, largest=bool(node.arg("descending", False)),
                     sorted=True)
    return TupleGetItem(call, 0), TupleGetItem(call, 1)


@converter("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(node):
    x, mask = node.tensor(0), node.tensor(1)
    return node.call("where", mask, node.as_tensor(node.arg(2), x.type.dtype), x)
