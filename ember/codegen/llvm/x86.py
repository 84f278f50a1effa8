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
  range, so the portable form selects INT_MIN there itself (``types.cast``; it went through
  int64 before: seven instructions for 16 lanes); ``vcvttps2dq`` is one, and its answer out of
  range and for NaN (INT_MIN) is numpy's on x86.
- ``int32(round(x))``: ``vcvtps2dq`` rounds half to even as it converts, where ``round`` then
  the conversion is two instructions (a quantizer's last steps).
"""
from __future__ import annotations

from llvmlite import ir

from .intrinsics import declare, llvm_intrinsic

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
_NARROW_BITS = {"int16": 16, "uint16": 16, "int8": 8, "uint8": 8}
_NARROW_INTS = ("int32", *_NARROW_BITS)


def _width(lanes: int, features) -> int | None:
    """The lanes of the widest form that ``lanes`` is a whole number of (a 64-lane vector of a
    byte kernel is four of AVX-512's), or None."""
    for w in (16, 8, 4):
        pieces = lanes // w
        if lanes % w == 0 and pieces & (pieces - 1) == 0 and _F32[w][0] <= set(features):
            return w  # (a power of two of pieces: they join in pairs)
    return None


def _pieces(b: ir.IRBuilder, v: ir.Value, w: int) -> list:
    n = v.type.count
    if n == w:
        return [v]
    return [b.shuffle_vector(v, ir.Constant(v.type, None), ir.Constant(ir.VectorType(ir.IntType(32), w),
                                                                          list(range(k, k + w))))
            for k in range(0, n, w)]


def _joined(b: ir.IRBuilder, parts: list) -> ir.Value:
    while len(parts) > 1:  # (pairs concatenated: LLVM keeps each piece in its register)
        joined = []
        for x, y in zip(parts[::2], parts[1::2]):
            n = x.type.count
            joined.append(b.shuffle_vector(x, y, ir.Constant(ir.VectorType(ir.IntType(32), 2 * n),
                                                              list(range(2 * n)))))
        parts = joined
    return parts[0]


def _float_vector(v: ir.Value) -> bool:
    return isinstance(v.type, ir.VectorType) and isinstance(v.type.element, ir.FloatType)


def converts(src: str, lanes: int, dst: str, features) -> bool:
    """Whether :func:`float_to_int` takes ``lanes`` of ``src`` to ``dst``."""
    return src == "float32" and lanes > 1 and dst in _NARROW_INTS and _width(lanes, features) is not None


def _call(b: ir.IRBuilder, name: str, ret: ir.Type, args: list) -> ir.Value:
    return b.call(declare(b.module, name, ret, [a.type for a in args]), args)


def min_max(b: ir.IRBuilder, op: str, x: ir.Value, y: ir.Value, features) -> ir.Value | None:
    """``minimum``/``maximum`` (``op`` "Min"/"Max") of float32 vectors, NaN from either side."""
    w = _width(x.type.count, features) if _float_vector(x) and x.type == y.type else None
    if w is None:
        return None
    if isinstance(x, ir.Constant) and not isinstance(y, ir.Constant):
        x, y = y, x  # (the constant's NaN test folds away)
    form = _F32[w]
    name = form[1] if op == "Max" else form[2]
    mode = [ir.Constant(ir.IntType(32), _CURRENT_DIRECTION)] if form[5] else []
    # (y <op> x ? y : x, which is x where either is NaN)
    m = _joined(b, [_call(b, name, xp.type, [yp, xp] + mode) for xp, yp in zip(_pieces(b, x, w), _pieces(b, y, w))])
    return b.select(b.fcmp_unordered("uno", y, y), y, m)


def float_to_int(b: ir.IRBuilder, v: ir.Value, dst: str, features, rounding: bool = False) -> ir.Value | None:
    """float32 vector ``v`` as integers of ``dst`` (through int32, truncating toward zero; with
    ``rounding``, half to even)."""
    if not (_float_vector(v) and converts("float32", v.type.count, dst, features)):
        return None
    w = _width(v.type.count, features)
    form = _F32[w]
    i32 = ir.VectorType(ir.IntType(32), w)
    name = form[4] if rounding else form[3]
    if form[5]:
        mode = _NEAREST_EVEN if rounding else _CURRENT_DIRECTION
        extra = [ir.Constant(i32, None), ir.Constant(ir.IntType(16), -1), ir.Constant(ir.IntType(32), mode)]
    else:  # (the rounding form reads MXCSR: round half to even unless a program changed it)
        extra = []
    out = _joined(b, [_call(b, name, i32, [p] + extra) for p in _pieces(b, v, w)])
    if dst == "int32":
        return out
    return b.trunc(out, ir.VectorType(ir.IntType(_NARROW_BITS[dst]), v.type.count))


def dword_gather(b: ir.IRBuilder, base: ir.Value, offsets: ir.Value, features) -> ir.Value | None:
    """32-bit elements at ``base`` + 4 x the lanes' int32 ``offsets``, by AVX2's ``vpgatherdd``
    per 8 lanes, where LLVM would scalarize ``llvm.masked.gather`` (it takes the instruction
    only on CPUs it marks as fast gatherers, and AVX-512): a code's table on an AVX2 host
    (:mod:`ember.graph.passes.code_tables`)."""
    lanes = offsets.type.count
    i32 = ir.IntType(32)
    if "avx2" not in set(features) or "avx512f" in set(features) or lanes % 8:
        return None
    if offsets.type.element != i32:  # (a small table's offsets fit)
        offsets = b.trunc(offsets, ir.VectorType(i32, lanes))
    v8 = ir.VectorType(i32, 8)
    ones = ir.Constant(v8, [-1] * 8)
    parts = [_call(b, "llvm.x86.avx2.gather.d.d.256", v8,
                   [ir.Constant(v8, None), base, piece, ones, ir.Constant(ir.IntType(8), 4)])
             for piece in _pieces(b, offsets, 8)]
    return _joined(b, parts)


TABLE_WORDS = 256  # the tables :func:`dword_gather` is used for (a code's values)
TABLE_BYTES = 256  # what :func:`byte_table` looks up in: two pairs of 64-byte registers


def byte_table(b: ir.IRBuilder, table: ir.Value, size: int, offsets: ir.Value, features) -> ir.Value | None:
    """Bytes of a table of ``size`` <= 256 at ``table``, at the lanes' ``offsets`` (each in
    ``[0, size)``): AVX512-VBMI's ``vpermi2b`` selects from 128 bytes by 7 bits of an index,
    so two of them and a blend on the eighth bit look up 64 lanes (a code's table:
    :mod:`ember.graph.passes.code_tables`), where a gather loads one byte a lane."""
    lanes = offsets.type.count
    if not ({"avx512vbmi", "avx512bw"} <= set(features)) or size > TABLE_BYTES or lanes > 64:
        return None
    i8, v64 = ir.IntType(8), ir.VectorType(ir.IntType(8), 64)
    chunks = []
    for k in range(0, TABLE_BYTES, 64):
        if k >= size:
            chunks.append(ir.Constant(v64, None))
            continue
        addr = b.gep(table, [ir.Constant(ir.IntType(64), k)], source_etype=i8)
        if k + 64 <= size:
            chunks.append(b.load(addr, typ=v64, align=1))
        else:  # the table's end: no byte past it is read
            mask = ir.Constant(ir.VectorType(ir.IntType(1), 64), [j < size - k for j in range(64)])
            chunks.append(llvm_intrinsic(b, "masked.load", [addr, ir.Constant(ir.IntType(32), 1), mask,
                                                             ir.Constant(v64, None)], ret=v64, overload=[v64, addr.type]))
    idx = b.trunc(offsets, ir.VectorType(i8, lanes))
    if lanes < 64:
        idx = b.shuffle_vector(idx, ir.Constant(idx.type, None),
                               ir.Constant(ir.VectorType(ir.IntType(32), 64), [j % lanes for j in range(64)]))
    name = "llvm.x86.avx512.vpermi2var.qi.512"
    low = _call(b, name, v64, [chunks[0], idx, chunks[1]])
    high = _call(b, name, v64, [chunks[2], idx, chunks[3]])
    out = b.select(b.icmp_signed("<", idx, ir.Constant(v64, None)), high, low)
    if lanes < 64:
        out = b.shuffle_vector(out, ir.Constant(v64, None), ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                                                          list(range(lanes))))
    return out
