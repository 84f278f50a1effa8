"""x86 instructions for operations whose portable LLVM form costs several times more.

Each function returns None where its instruction does not apply (another element type or lane
count, or a CPU without the feature), and the caller emits the portable form.

- ``minimum``/``maximum`` of float32 vectors: LLVM's ``llvm.maximum`` orders -0 below +0, which
  x86 has no instruction for: six instructions a vector (a clamp in every quantized epilogue,
  a ReLU in every float one). ``vmaxps(b, a)`` returns ``a`` where either is NaN, so
  ``uno(b) ? b : vmaxps(b, a)`` propagates a NaN from either side as numpy does; two
  instructions, one where ``b`` is a constant (the select folds) and the unordered test is
  hoisted where ``b`` is a loop's invariant. A tie of two zeros gives either zero (as C's
  ``fmax`` may), where numpy returns its second operand.
- float32 to int32 (and through int32 to narrower integers): LLVM's ``fptosi`` is poison out of
  range, so Ember converted through int64 (two conversions, two truncations, an insert: seven
  instructions for 16 lanes); ``vcvttps2dq`` is one, and its answer out of range and for NaN
  (INT_MIN) is numpy's on x86.
- ``int32(round(x))``: ``vcvtps2dq`` rounds half to even as it converts, where ``round`` then
  the conversion is two instructions (a quantizer's last steps).
"""
from __future__ import annotations

from llvmlite import ir

from .intrinsics import declare

# lanes -> (features needed, max, min, truncating conversion, rounding conversion, AVX-512
# form: its intrinsics take a rounding operand (and the conversions a pass-through and mask))
_F32 = {
    16: ({"avx512f"}, "llvm.x86.avx512.max.ps.512", "llvm.x86.avx512.min.ps.512",
         "llvm.x86.avx512.mask.cvttps2dq.512", "llvm.x86.avx512.mask.cvtps2dq.512", True),
    8: ({"avx"}, "llvm.x86.avx.max.ps.256", "llvm.x86.avx.min.ps.256",
        "llvm.x86.avx.cvtt.ps2dq.256", "llvm.x86.avx.cvt.ps2dq.256", False),
    4: ({"sse2"}, "llvm.x86.sse.max.ps", "llvm.x86.sse.min.ps",
        "llvm.x86.sse2.cvttps2dq", "llvm.x86.sse2.cvtps2dq", False),
}
_CURRENT_DIRECTION, _NEAREST_EVEN = 4, 8  # (AVX-512 rounding operands: MXCSR's; {rn-sae})
_NARROW_INTS = ("int32", "int16", "int8", "uint16", "uint8")


def _form(v: ir.Value, features):
    t = v.type
    if not (isinstance(t, ir.VectorType) and isinstance(t.element, ir.FloatType)):
        return None
    form = _F32.get(t.count)
    return form if form is not None and form[0] <= set(features) else None


def converts(src: str, lanes: int, dst: str, features) -> bool:
    """Whether :func:`float_to_int` takes ``lanes`` of ``src`` to ``dst``."""
    form = _F32.get(lanes) if src == "float32" else None
    return form is not None and form[0] <= set(features) and dst in _NARROW_INTS


def _call(b: ir.IRBuilder, name: str, ret: ir.Type, args: list) -> ir.Value:
    return b.call(declare(b.module, name, ret, [a.type for a in args]), args)


def min_max(b: ir.IRBuilder, op: str, x: ir.Value, y: ir.Value, features) -> ir.Value | None:
    """``minimum``/``maximum`` (``op`` "Min"/"Max") of float32 vectors, NaN from either side."""
    form = _form(x, features)
    if form is None or x.type != y.type:
        return None
    if isinstance(x, ir.Constant) and not isinstance(y, ir.Constant):
        x, y = y, x  # (the constant's NaN test folds away)
    name = form[1] if op == "Max" else form[2]
    args = [y, x] + ([ir.Constant(ir.IntType(32), _CURRENT_DIRECTION)] if form[5] else [])
    m = _call(b, name, x.type, args)  # (y <op> x ? y : x: x where either is NaN)
    return b.select(b.fcmp_unordered("uno", y, y), y, m)


def float_to_int(b: ir.IRBuilder, v: ir.Value, dst: str, features, rounding: bool = False) -> ir.Value | None:
    """float32 vector ``v`` as integers of ``dst`` (through int32, truncating toward zero; with
    ``rounding``, half to even)."""
    form = _form(v, features)
    if form is None or dst not in _NARROW_INTS:
        return None
    i32 = ir.VectorType(ir.IntType(32), v.type.count)
    name = form[4] if rounding else form[3]
    if form[5]:
        mode = _NEAREST_EVEN if rounding else _CURRENT_DIRECTION
        args = [v, ir.Constant(i32, None), ir.Constant(ir.IntType(16), -1), ir.Constant(ir.IntType(32), mode)]
    else:  # (the rounding form reads MXCSR: round half to even unless a program changed it)
        args = [v]
    out = _call(b, name, i32, args)
    if dst == "int32":
        return out
    width = int(dst.lstrip("uint"))
    return b.trunc(out, ir.VectorType(ir.IntType(width), v.type.count))
