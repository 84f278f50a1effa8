"""Converters of ATen ops that make tensors: full/zeros/ones (and their _like forms), empty
(zeros: Ember never exposes uninitialized memory), scalar_tensor and arange."""
from __future__ import annotations

from ...graph import Dim
from .table import converter


def _fill(node, shape, value):
    dtype = node.out_dtype()
    if isinstance(value, Dim) or hasattr(value, "type"):  # a size, or a 0-d tensor
        v = node.as_tensor(value, dtype)
        return node.call("expand", v, shape=tuple(shape))
    value = bool(value) if dtype == "bool" else float(value)
    return node.call("constant_of_shape", shape=tuple(shape), value=value, dtype=dtype)


def _shape(node, key=0):
    v = node.arg(key)
    return tuple(d if isinstance(d, Dim) else int(d) for d in (v if isinstance(v, (list, tuple)) else (v,)))


@converter("aten.full.default", "aten.new_full.default")
def _full(node):
    if node.target == "aten.new_full.default":
        return _fill(node, _shape(node, 1), node.arg(2))
    return _fill(node, _shape(node, 0), node.arg(1))


@converter("aten.full_like.default")
def _full_like(node):
    return _fill(node, node.tensor(0).type.shape, node.arg(1))


def _const_like(value):
    return lambda node: _fill(node, node.tensor(0).type.shape, value)


converter("aten.zeros_like.default", "aten.empty_like.default")(_const_like(0))
converter("aten.ones_like.default")(_const_like(1))


def _const_shape(value, key=0):
    return lambda node: _fill(node, _shape(node, key), value)


converter("aten.zeros.default", "aten.empty.memory_format", "aten.empty_strided.default")(_const_shape(0))
converter("aten.ones.default")(_const_shape(1))
converter("aten.new_zeros.default", "aten.new_empty.default", "aten.new_empty_strided.default")(_const_shape(0, 1))
converter("aten.new_ones.default")(_const_shape(1, 1))


@converter("aten.scalar_tensor.default")
def _scalar_tensor(node):
    return node.as_tensor(node.arg(0), node.out_dtype())


def _arange(node, start, end, step):
    return node.call("range", start=start, stop=end, step=step, dtype=node.out_dtype())


@converter("aten.arange.start_step")
def _arange_start_step(node):
    return _arange(node, node.arg(0), node.arg(1), node.arg("step", 1))


@converter("aten.arange.start")
def _arange_start(node):
    return _arange(node, node.arg(0), node.arg(1), 1)


@converter("aten.arange.default")
def _arange_default(node):
    return _arange(node, 0, node.arg(0), 1)
