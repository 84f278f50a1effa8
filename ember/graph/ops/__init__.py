"""The operator library [topi + op registry]: every graph op, registered once.

- :mod:`.registry` — ``register_op``, ``get_op``, ``OpDef``, ``Pattern``, ``infer_type``, and the
  kernel hooks ``set_compute`` / ``set_schedule``.
- one module per family, each registering its ops on import: :mod:`.elementwise`
  (unary math, activations, broadcasting binary ops, ``where``, ``cast``, ``clip``),
  :mod:`.nn` (conv, dense/matmul, normalization, pooling, softmax), :mod:`.einsum`, :mod:`.reduce`,
  :mod:`.layout` (reshape, transpose, concat, split, slice, pad, resize, ...), :mod:`.index`
  (gather/scatter, topk, cumsum, ...), :mod:`.creation` (shape_of, constant_of_shape, range),
  :mod:`.dynamic` (ops whose output sizes a kernel computes: bind_size, nonzero).
- :mod:`.dims` — arithmetic on possibly symbolic dimensions.

``call(op, *args, **attrs)`` builds a Call with its type inferred:

>>> from ember.graph import Var, TensorType
>>> x = Var("x", TensorType(("n", 3, 8, 8), "float32"))
>>> call("nn.max_pool2d", x, pool_size=(2, 2), strides=(2, 2)).type
Tensor[(n, 3, 4, 4), float32]
"""
from __future__ import annotations

from ..ir import Call, Expr
from . import control, creation, detection, dynamic, einsum, elementwise, index, layout, nn, recurrent, reduce  # noqa: F401  (register the ops)
from .registry import (Attr, OpDef, Pattern, attr, get_op, infer_type, list_ops, register_op, set_compute,
                       set_kernel, set_schedule)


def call(op: str, *args: Expr, **attrs) -> Call:
    """``Call(op, args, attrs)`` with its type filled in by the op's inference rule."""
    return Call(op, args, attrs, infer_type(op, [a.type for a in args], attrs))


__all__ = ["Attr", "OpDef", "Pattern", "attr", "call", "get_op", "infer_type", "list_ops", "register_op",
           "set_compute", "set_kernel", "set_schedule"]
