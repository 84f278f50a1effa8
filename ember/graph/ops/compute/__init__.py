"""Tensor computations for graph ops: importing this package fills the registry's ``compute``
hooks (:func:`~ember.graph.ops.registry.set_compute`) for the families it covers.

Each compute is ``fn(attrs, inputs, out_type) -> te.Tensor``: ``attrs`` is the call's attribute
dict (checked against the op's schema and its defaults filled in on entry, so a call's raw
attributes will do), ``inputs`` the input tensors (``ember.loop.compute`` Tensors) and
``out_type`` the call's inferred :class:`~ember.graph.types.TensorType` (its symbolic Dims become
named sizes). Semantics follow numpy (broadcasting, dtypes; integer division and ``fmod``
truncate, as in ONNX). The result is one stage for an elementwise op and one or more for a
reduction (mean, norms, log_sum_exp, argmax/argmin post-process or pre-reduce in extra stages).

Note: this signature differs from the ``(call, input_tensors)`` sketched in the registry's
docstring: the executable will hold the call's attributes and type, not the Call itself.
"""
from __future__ import annotations

from . import (blocked, conv, creation, detection, dynamic, elementwise, index, layout, nn, pool, recurrent, reduce,  # noqa: F401
               resize, scatter)  # (register the computes and kernels)
from .. import schedule  # noqa: F401,E402  (and the default schedules of the ops that have one)
