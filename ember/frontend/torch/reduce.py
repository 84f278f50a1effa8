"""Converters of ATen reductions: sum, mean, prod, amax/amin, max/min with indices, argmax/argmin,
any/all, var/std, cumulative sums and products."""
from __future__ import annotations

from ...graph import Dim
from ...graph.ops import dims as D
from .table import converter


def _axes(node, key="dim"):
    """The reduced axes (None: all of them; torch reads an empty list as all too)."""
    v = node.arg(key, None)
    if v is None:
        return None
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return tuple(int(a) for a in v) or None


def _reduce(op):
    def convert(node):
        x = node.as_tensor(node.arg(0), node.out_dtype())  # (bools sum as int64; dtype= casts first)
        return node.call(op, x, axis=_axes(node), keepdims=bool(node.arg("keepdim", False)))
    return convert


converter("aten.sum.dim_IntList", "aten.sum.default")(_reduce("sum"))
converter("aten.mean.dim", "aten.mean.default")(_reduce("mean"))
converter("aten.amax.default", "aten.max.default")(_reduce("max"))
converter("aten.amin.default", "aten.min.default")(_reduce("min"))
converter("aten.prod.default", "aten.prod.dim_int")(_reduce("prod"))


def _with_indices(op):
    def convert(node):
        x = node.tensor(0)
        axis, keep = int(node.arg("dim")), bool(node.arg("keepdim", False))
        values = node.call(op, x, axis=(axis,), keepdims=keep)
        # torch returns the first extreme element's index
        return values, node.call(f"arg{op}", x, axis=axis, keepdims=keep)
    return convert


converter("aten.max.dim")(_with_indices("max"))
converter("aten.min.dim")(_with_indices("min"))


def _arg(op):
    def convert(node):
        x, axis = node.tensor(0), node.arg("dim", None)
        keep = bool(node.arg("keepdim", False))
        if axis is None:  # over the flattened input
            x = node.call("reshape", x, newshape=(-1,))
            return node.call(op, x, axis=0, keepdims=False) if not keep else \
                node.call("reshape", node.call(op, x, axis=0, keepdims=False), newshape=(1,) * node.out_ndim())
        return node.call(op, x, axis=int(axis), keepdims=keep)
    return convert


converter("aten.argmax.default")(_arg("argmax"))
converter("aten.argmin.default")(_arg("argmin"))


def _any_all(op):
    def convert(node):
        x = node.tensor(0)
        if x.type.dtype != "bool":
            x = node.call("not_equal", x, node.scalar(0, x.type.dtype))
        return node.call(op, x, axis=_axes(node), keepdims=bool(node.arg("keepdim", False)))
    return convert


converter("aten.any.dim", "aten.any.dims", "aten.any.default")(_any_all("max"))
converter("aten.all.dim", "aten.all.dims", "aten.all.default")(_any_all("min"))


def _count(node, x, axes):
    """The number of elements a reduction over ``axes`` combines (a tensor of x's dtype)."""
    axes = range(x.type.ndim) if axes is None else axes
    n = D.prod(x.type.shape[a] for a in axes)
    return node.as_tensor(n, x.type.dtype) if isinstance(n, Dim) else node.scalar(n, x.type.dtype)


def _variance(node, sqrt: bool = False):
    x = node.as_tensor(node.arg(0), node.out_dtype(0))  # (var_mean: the first result's dtype)
    axes = _axes(node)
    keep = bool(node.arg("keepdim", False))
    if "correction" in node.args:
        corr = node.arg("correction", None)
        corr = 1 if corr is None else corr
    else:
        corr = 1 if node.arg("unbiased", True) else 0
    mean = node.call("mean", x, axis=axes, keepdims=True)
    c = node.call("subtract", x, mean)
    total = node.call("sum", node.call("multiply", c, c), axis=axes, keepdims=keep)
    n = _count(node, x, tuple(a % x.type.ndim for a in axes) if axes is not None else None)
    if corr:
        n = node.call("subtract", n, node.scalar(corr, x.type.dtype))
    var = node.call("divide", total, n)
    out = node.call("sqrt", var) if sqrt else var
    return out, (mean if keep else node.call("mean", x, axis=axes, keepdims=False))


converter("aten.var.correction", "aten.var.dim")(lambda node: _variance(node)[0])
converter("aten.std.correction", "aten.std.dim")(lambda node: _variance(node, sqrt=True)[0])
converter("aten.var_mean.correction")(lambda node: _variance(node))
converter("aten.std_mean.correction")(lambda node: _variance(node, sqrt=True))


def _cumulative(op):
    def convert(node):
        x = node.as_tensor(node.arg(0), node.out_dtype())  # (bools accumulate as int64)
        return node.call(op, x, axis=int(node.arg("dim")))
    return convert


converter("aten.cumsum.default")(_cumulative("cumsum"))
converter("aten.cumprod.default")(_cumulative("cumprod"))
