"""Packed dot products (``ember.loop.intrinsics.PACKED_DOTS``) to LLVM.

``acc + dot(a, b)`` over vectors of int32 words becomes one instruction per vector where the
CPU has it: ``vdpbf16ps`` (AVX512-BF16: 16 lanes x two bfloat16 products into float32) and
``vpdpbusd`` (AVX512-VNNI, or AVX-VNNI on 256 bits: 16 lanes x four uint8 x int8 products into
int32, exact). Elsewhere the words are taken apart and the products done in the accumulator's
type: the same result (bfloat16 products are exact in float32; the order of the two additions
may differ in the last bit), slower.
"""
from __future__ import annotations

from llvmlite import ir

from ...loop import dtype as dt
from ...loop.intrinsics import PACKED_DOTS
from . import types as T
from .intrinsics import declare


class _BFloat(ir.Type):
    """LLVM's ``bfloat`` (llvmlite has no class for it): only as the element of the vectors
    the BF16 intrinsics take."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


# (dot, lanes) -> (LLVM intrinsic, the features it needs (any one set), operand element type,
# operand lanes per accumulator lane)
_HARDWARE = {
    ("dot_bf16x2", 16): ("llvm.x86.avx512bf16.dpbf16ps.512", [{"avx512bf16"}], "bf16", 2),
    ("dot_bf16x2", 8): ("llvm.x86.avx512bf16.dpbf16ps.256", [{"avx512bf16", "avx512vl"}], "bf16", 2),
    ("dot_bf16x2", 4): ("llvm.x86.avx512bf16.dpbf16ps.128", [{"avx512bf16", "avx512vl"}], "bf16", 2),
    ("dot_u8i8x4", 16): ("llvm.x86.avx512.vpdpbusd.512", [{"avx512vnni"}], "i32", 1),
    ("dot_u8i8x4", 8): ("llvm.x86.avx512.vpdpbusd.256", [{"avx512vnni", "avx512vl"}, {"avxvnni"}], "i32", 1),
    ("dot_u8i8x4", 4): ("llvm.x86.avx512.vpdpbusd.128", [{"avx512vnni", "avx512vl"}, {"avxvnni"}], "i32", 1),
}


def hardware(name: str, lanes: int, features) -> bool:
    """Whether ``name`` on ``lanes`` lanes is one instruction on a CPU with ``features``."""
    hw = _HARDWARE.get((name, lanes))
    return hw is not None and any(need <= set(features) for need in hw[1])


def emit_dot(e, name: str, acc, a: ir.Value, b: ir.Value) -> ir.Value:
    """``acc + name(a, b)`` (``acc`` None: the dot alone) on already-emitted words."""
    bld = e.builder
    lanes = T.lanes_of(a)
    acc_type = PACKED_DOTS[name][3]
    if acc is None:
        acc = T.const(dt.with_lanes(acc_type, lanes), 0)
    if hardware(name, lanes, e.features):
        fname, _, elem, per = _HARDWARE[(name, lanes)]
        if elem == "bf16":
            vt = ir.VectorType(_BFloat(), lanes * per)
            a, b = bld.bitcast(a, vt), bld.bitcast(b, vt)
        fn = declare(bld.module, fname, acc.type, [acc.type, a.type, b.type])
        return bld.call(fn, [acc, a, b])
    return _portable(e, name, acc, a, b)


def _splat(t: ir.Type, v: int) -> ir.Constant:
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, v)] * t.count)
    return ir.Constant(t, v)


def _portable(e, name: str, acc, a, b):
    bld = e.builder
    t = a.type
    if name == "dot_bf16x2":
        # a bfloat16 is the top half of a float32: the low value shifted up, the high one masked
        ft = ir.VectorType(ir.FloatType(), t.count) if isinstance(t, ir.VectorType) else ir.FloatType()
        hi_mask = _splat(t, -65536)
        sixteen = _splat(t, 16)

        def halves(w):
            return bld.bitcast(bld.shl(w, sixteen), ft), bld.bitcast(bld.and_(w, hi_mask), ft)
        (a0, a1), (b0, b1) = halves(a), halves(b)
        fm = e.fastmath
        r = bld.fadd(acc, bld.fmul(a0, b0, flags=fm), flags=fm)
        return bld.fadd(r, bld.fmul(a1, b1, flags=fm), flags=fm)
    # uint8 x int8: each byte of a zero-extended, each of b sign-extended, in int32 (exact)
    r = acc
    for k in range(4):
        ua = bld.and_(bld.lshr(a, _splat(t, 8 * k)), _splat(t, 255))
        sb = bld.ashr(bld.shl(b, _splat(t, 24 - 8 * k)), _splat(t, 24))
        r = bld.add(r, bld.mul(ua, sb))
    return r
