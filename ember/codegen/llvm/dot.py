"""Packed dot products (``ember.loop.intrinsics.PACKED_DOTS``) to LLVM.

``acc + dot(a, b)`` over vectors of int32 words becomes one instruction per vector where the
CPU has it: ``vdpbf16ps`` (AVX512-BF16: 16 lanes x two bfloat16 products into float32) and
``vpdpbusd`` (AVX512-VNNI, or AVX-VNNI on 256 bits: 16 lanes x four uint8 x int8 products into
int32, exact); ``dot_u8i7x4`` (weights whose pairs fit int16) is ``vpdpbusd`` too, and on CPUs
without VNNI AVX2's (or AVX-512BW's) ``pmaddubsw`` + ``pmaddwd``. Elsewhere the words are taken apart and the products done in the accumulator's
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
    ("dot_i16x2", 16): ("llvm.x86.avx512.pmaddw.d.512", [{"avx512bw"}], "i16", 2),
    ("dot_i16x2", 8): ("llvm.x86.avx2.pmadd.wd", [{"avx2"}], "i16", 2),
    ("dot_i16x2", 4): ("llvm.x86.sse2.pmadd.wd", [{"sse2"}], "i16", 2),
}
for (_name, _lanes), _hw in list(_HARDWARE.items()):
    if _name == "dot_u8i8x4":
        _HARDWARE[("dot_u8i7x4", _lanes)] = _hw

# dot_u8i7x4 without VNNI: pmaddubsw (uint8 x int8 pairs summed to int16, saturating: never,
# for the weights this dot is given) then pmaddwd by ones (the pairs to int32); per lanes:
# (pair intrinsic, widening intrinsic, features)
_PAIRWISE = {
    16: ("llvm.x86.avx512.pmaddubs.w.512", "llvm.x86.avx512.pmaddw.d.512", {"avx512bw"}),
    8: ("llvm.x86.avx2.pmadd.ub.sw", "llvm.x86.avx2.pmadd.wd", {"avx2"}),
    4: ("llvm.x86.ssse3.pmadd.ub.sw.128", "llvm.x86.sse2.pmadd.wd", {"ssse3"}),
}


# dot_u8i8x4 without VNNI, exact for any weights: each word's even and odd bytes widened to
# int16 in place (data zero-extended, weights sign-extended) and pmaddwd on each half
_WIDE = {
    16: ("llvm.x86.avx512.pmaddw.d.512", {"avx512bw"}),
    8: ("llvm.x86.avx2.pmadd.wd", {"avx2"}),
}


def widened(name: str, lanes: int, features) -> bool:
    """Whether ``name`` on ``lanes`` lanes is the widened pmaddwd sequence on ``features``."""
    w = _WIDE.get(lanes)
    return name == "dot_u8i8x4" and w is not None and w[1] <= set(features) and not hardware(name, lanes, features)


def pairwise(name: str, lanes: int, features) -> bool:
    """Whether ``name`` on ``lanes`` lanes is the pmaddubsw/pmaddwd pair on ``features``."""
    p = _PAIRWISE.get(lanes)
    return name == "dot_u8i7x4" and p is not None and p[2] <= set(features)


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
        elif elem == "i16":  # (pmaddwd: no accumulator operand)
            vt = ir.VectorType(ir.IntType(16), lanes * per)
            fn = declare(bld.module, fname, acc.type, [vt, vt])
            return bld.add(acc, bld.call(fn, [bld.bitcast(a, vt), bld.bitcast(b, vt)]))
        fn = declare(bld.module, fname, acc.type, [acc.type, a.type, b.type])
        return bld.call(fn, [acc, a, b])
    if pairwise(name, lanes, e.features):
        pair, widen, _ = _PAIRWISE[lanes]
        bytes_t, halves_t = ir.VectorType(ir.IntType(8), 4 * lanes), ir.VectorType(ir.IntType(16), 2 * lanes)
        a8, b8 = bld.bitcast(a, bytes_t), bld.bitcast(b, bytes_t)
        sums = bld.call(declare(bld.module, pair, halves_t, [bytes_t, bytes_t]), [a8, b8])
        return bld.add(acc, bld.call(declare(bld.module, widen, acc.type, [halves_t, halves_t]),
                                     [sums, T.splat(halves_t, 1)]))
    if widened(name, lanes, e.features):
        halves_t = ir.VectorType(ir.IntType(16), 2 * lanes)
        a16, b16 = bld.bitcast(a, halves_t), bld.bitcast(b, halves_t)
        eight = T.splat(halves_t, 8)
        madd = declare(bld.module, _WIDE[lanes][0], acc.type, [halves_t, halves_t])
        even = bld.call(madd, [bld.and_(a16, T.splat(halves_t, 255)), bld.ashr(bld.shl(b16, eight), eight)])
        odd = bld.call(madd, [bld.lshr(a16, eight), bld.ashr(b16, eight)])
        return bld.add(acc, bld.add(even, odd))
    return _portable(e, name, acc, a, b)


def _portable(e, name: str, acc, a, b):
    bld = e.builder
    t = a.type
    if name == "dot_bf16x2":
        # a bfloat16 is the top half of a float32: the low value shifted up, the high one masked
        ft = ir.VectorType(ir.FloatType(), t.count) if isinstance(t, ir.VectorType) else ir.FloatType()
        hi_mask = T.splat(t, -65536)
        sixteen = T.splat(t, 16)

        def halves(w):
            return bld.bitcast(bld.shl(w, sixteen), ft), bld.bitcast(bld.and_(w, hi_mask), ft)
        (a0, a1), (b0, b1) = halves(a), halves(b)
        fm = e.fastmath
        r = bld.fadd(acc, bld.fmul(a0, b0, flags=fm), flags=fm)
        return bld.fadd(r, bld.fmul(a1, b1, flags=fm), flags=fm)
    if name == "dot_i16x2":  # each half sign-extended, in int32
        r = acc
        for k in range(2):
            ha = bld.ashr(bld.shl(a, T.splat(t, 16 - 16 * k)), T.splat(t, 16))
            hb = bld.ashr(bld.shl(b, T.splat(t, 16 - 16 * k)), T.splat(t, 16))
            r = bld.add(r, bld.mul(ha, hb))
        return r
    # uint8 x int8: each byte of a zero-extended, each of b sign-extended, in int32 (exact)
    r = acc
    for k in range(4):
        ua = bld.and_(bld.lshr(a, T.splat(t, 8 * k)), T.splat(t, 255))
        sb = bld.ashr(bld.shl(b, T.splat(t, 24 - 8 * k)), T.splat(t, 24))
        r = bld.add(r, bld.mul(ua, sb))
    return r
