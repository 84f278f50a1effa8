"""A loop that folds one vector's lanes into an accumulator, emitted as LLVM's vector reduction.

A row reduction keeps a partial result per vector lane and ends by combining the lanes:

    for l in serial(16):
        acc[0] = max(acc[0], part[0, l])

As a loop that is 15 dependent scalar steps, and a NaN-propagating ``max`` is some five
instructions a step: ~150 cycles a row. LLVM's SLP vectorizer rewrote it into a tree of vector
maxes where every shape was constant, not where a size was symbolic (a softmax over a dynamic
sequence ran 1.5x slower than over a constant one, most of it here). ``llvm.vector.reduce.*``
is that tree in every case. Only combiners whose result does not depend on the order: max and
min (NaN and signed zeros included), and integer sums and products (exact modulo 2^n). Float
sums keep their order: Ember does not reassociate float arithmetic unless asked.
"""
from __future__ import annotations

from llvmlite import ir

from ...loop import dtype as dt
from ...loop.expr import Add, IntImm, Load, Max, Min, Mul, Ramp, Var, as_expr
from ...loop.stmt import For, Store
from ...loop.visit import walk
from .intrinsics import llvm_intrinsic

_FLOAT = {Max: "vector.reduce.fmaximum", Min: "vector.reduce.fminimum"}
_SIGNED = {Max: "vector.reduce.smax", Min: "vector.reduce.smin", Add: "vector.reduce.add",
           Mul: "vector.reduce.mul"}
_UNSIGNED = {**_SIGNED, Max: "vector.reduce.umax", Min: "vector.reduce.umin"}
MAX_LANES = 64


def _free_of(var: Var, exprs) -> bool:
    return not any(n == var for e in exprs for n in walk(e))


def _match(node: For):
    """``(store, part_load, intrinsic)`` when ``node`` is ``for l in [0, n): acc[i] = op(acc[i],
    part[..., l])`` with an order-free ``op``, else None."""
    s, lv = node.body, node.var
    lo, n = as_expr(node.min), as_expr(node.extent)
    if not (type(lo) is IntImm and lo.value == 0 and type(n) is IntImm and 2 <= n.value <= MAX_LANES
            and isinstance(s, Store) and s.predicate is None):
        return None
    v, elem = s.value, s.buffer.dtype
    if type(v) not in _SIGNED or dt.lanes(v.dtype) != 1 or dt.is_bool(elem) \
            or (dt.is_float(elem) and elem not in ("float32", "float64")):  # (half: computed widened)
        return None
    table = _FLOAT if dt.is_float(elem) else _UNSIGNED if dt.is_uint(elem) else _SIGNED
    if type(v) not in table:
        return None
    acc = Load(s.buffer, tuple(s.indices))
    part = v.b if v.a == acc else v.a if v.b == acc else None
    if part is None or not isinstance(part, Load) or part.predicate is not None or part.buffer == s.buffer:
        return None
    *outer, last = part.indices
    if last != lv or not _free_of(lv, outer) or not _free_of(lv, s.indices) or part.dtype != elem:
        return None
    if part.buffer.strides is not None and not (type(part.buffer.strides[-1]) is IntImm
                                                and part.buffer.strides[-1].value == 1):
        return None
    return s, part, table[type(v)]


def emit_lane_reduce(e, node: For) -> bool:
    """Emit ``node`` as a vector reduction if it is a lane-combining loop; False if it is not."""
    found = _match(node)
    if found is None:
        return False
    s, part, name = found
    n = as_expr(node.extent).value
    *outer, _ = part.indices
    vec = e.expr(Load(part.buffer, (*outer, Ramp(IntImm(0, node.var.dtype), IntImm(1, node.var.dtype), n))))
    elem_t = vec.type.element if isinstance(vec.type, ir.VectorType) else vec.type
    r = llvm_intrinsic(e.builder, name, [vec], ret=elem_t)
    folded = Var(f"{node.var.name}_folded", s.buffer.dtype)
    with e.bind(folded, r):
        e.stmt(Store(s.buffer, type(s.value)(Load(s.buffer, tuple(s.indices)), folded), s.indices))
    return True


__all__ = ["emit_lane_reduce"]
