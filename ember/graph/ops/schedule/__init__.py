"""Default per-op schedules for the LLVM (CPU) target: importing this package fills the
registry's ``schedule["llvm"]`` hooks (:func:`~ember.graph.ops.registry.set_schedule`) of the
ops whose computes are multi-stage or need register blocking to be fast.

The contract, for a fused kernel with one *anchor* op::

    fn(s: Schedule, anchor: te.Tensor, out: te.Tensor, target) -> None

``anchor`` is the tensor the op's compute returned; ``out`` is ``anchor`` itself or the
result of an elementwise/broadcast epilogue of the same shape (bias, activation, residual
add, ...) whose intermediate stages the caller has already inlined (``compute_inline``).
The function schedules the anchor's own stages (found in ``anchor.op.attrs``, which the
computes fill) and ``out``; with an epilogue the anchor is computed inside ``out``'s tile
(``compute_at``), so the epilogue runs on the register block as it is written back rather
than in a second pass over memory. ``target`` is a Target, a target string or None (the
host).

Ops without a schedule here get the compiler's generic one (injective stages inlined,
reductions at the root), so correctness never depends on these.
"""
from __future__ import annotations

from . import conv, nn, pool, reduce  # noqa: F401  (register the schedules)
