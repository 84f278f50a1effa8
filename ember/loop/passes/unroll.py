"""Unroll: replace every ``For(kind="unrolled")`` of constant extent by copies of its body.

    for i in unrolled(0, 2):          C[0] = A[0]
        C[i] = A[i]           ->      C[1] = A[1]
"""
from __future__ import annotations

from ...errors import LoweringError
from ..expr import IntImm
from ..stmt import For, PrimFunc, seq
from ..visit import rewrite, substitute


def unroll_loops(func: PrimFunc) -> PrimFunc:
    """Expand unrolled loops, innermost first."""
    def fn(n):
        if isinstance(n, For) and n.kind == "unrolled":
            if not isinstance(n.extent, IntImm) or not isinstance(n.min, IntImm):
                raise LoweringError(f"{func.name}: unrolled loop {n.var.name} has a non-constant "
                                    f"range ({n.min}, {n.extent})")
            return seq(*[substitute(n.body, {n.var: IntImm(n.min.value + k)})
                         for k in range(n.extent.value)])
        return None
    return func.replace(body=rewrite(func.body, fn))
