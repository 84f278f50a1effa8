"""Tensor computations for graph ops: importing this package fills the registry's ``compute``
hooks (:func:`~ember.graph.ops.registry.set_compute`) for the families it covers.

Each compute is ``fn(attrs, inputs, out_type) -> te.Tensor``: ``attrs`` is the call's attribute
dict (schema defaults filled in, as :meth:`OpDef.check_attrs` returns it), ``inputs`` the input
tensors (``ember.loop.compute`` Tensors) and ``out_type`` the call's inferred
:class:`~ember.graph.types.TensorType`. Semantics follow numpy (broadcasting, dtypes).
"""
from __future__ import annotations

from . import elementwise, reduce  # noqa: F401  (register the computes)
