"""Converters of the nodes around the tensors: a tuple element (``getitem``), sizes
(``sym_size``, ``sym_numel``) and Python arithmetic on them (Ember dims), and the assertions an
export inserts (checked by torch at export time; Ember checks its own shape assumptions per run)."""
from __future__ import annotations

import operator

from ...errors import UnsupportedOpError
from ...graph import Dim
from ...graph.ops import dims as D
from .context import Missing
from .table import converter


@converter("operator.getitem")
def _getitem(node):
    seq, i = node.arg(0), node.arg(1)
    if not isinstance(seq, (tuple, list)):
        raise UnsupportedOpError(f"indexing {type(seq).__name__} values is not supported")
    v = seq[i]
    if isinstance(v, Missing):
        producer = node.fx.args[0]
        raise UnsupportedOpError(f"output {i} of {producer.target} ({v.what}) is not computed by Ember: "
                                 "inference graphs do not use it")
    return v


@converter("aten.sym_size.int")
def _sym_size(node):
    x = node.tensor(0)
    return x.type.shape[int(node.arg(1))]


@converter("aten.sym_numel.default")
def _sym_numel(node):
    return D.prod(node.tensor(0).type.shape)


def _arith(fn, dim_fn):
    def convert(node):
        a, b = node.arg(0), node.arg(1)
        if isinstance(a, Dim) or isinstance(b, Dim):
            if not all(isinstance(v, (int, Dim)) for v in (a, b)):
                raise UnsupportedOpError(f"{node.target} of {a!r} and {b!r}")
            return dim_fn(a, b)
        return fn(a, b)
    return convert


for _name, _fn, _dim in (("mul", operator.mul, D.dim_mul), ("add", operator.add, D.dim_add),
                         ("sub", operator.sub, D.dim_sub), ("floordiv", operator.floordiv, D.dim_floordiv),
                         ("mod", operator.mod, D.dim_mod)):
    converter(f"operator.{_name}")(_arith(_fn, _dim))
converter("torch.sym_max")(_arith(max, D.dim_max))
converter("torch.sym_min")(_arith(min, D.dim_min))


@converter("operator.neg")
def _neg(node):
    a = node.arg(0)
    return D.dim_mul(a, -1) if isinstance(a, Dim) else -a


@converter("aten._assert_tensor_metadata.default", "aten._assert_scalar.default",
           "aten.sym_constrain_range_for_size.default", "aten.sym_constrain_range.default",
           "aten._assert_async.msg", "aten._assert_async.default", "torch._check", "torch._check_is_size")
def _assertion(node):
    return None


_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge}


def _compare(fn):
    def convert(node):
        a, b = node.arg(0), node.arg(1)
        if isinstance(a, Dim) or isinstance(b, Dim):
            return None  # (a guard torch checked: only assertions read it)
        return fn(a, b)
    return convert


for _name, _fn in _COMPARE.items():
    converter(f"operator.{_name}")(_compare(_fn))
