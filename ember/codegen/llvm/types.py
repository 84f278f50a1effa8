"""Ember dtypes as LLVM types and values: constants, broadcasts and casts between any two dtypes.

Register representation: ``bool`` is ``i1``; ``float16`` is ``half``; ``bfloat16`` is its raw
``i16`` bits (llvmlite has no ``bfloat`` type, and keeping the bits lets us round exactly like
ml_dtypes); vectors are LLVM vectors of those. In memory ``bool`` takes one byte (``i8``).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ...loop import dtype as dt

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F32, F64, F16 = ir.FloatType(), ir.DoubleType(), ir.HalfType()
PTR = ir.PointerType()
NARROW = ("float16", "bfloat16")  # floats whose arithmetic happens in float32


def scalar_type(elem: str) -> ir.Type:
    """Register type of one element of ``elem``."""
    if elem == "bool":
        return I1
    if elem == "float16":
        return F16
    if elem == "bfloat16":
        return I16
    if elem == "float32":
        return F32
    if elem == "float64":
        return F64
    return ir.IntType(dt.bits(elem))


def reg_type(dtype: str) -> ir.Type:
    """Register type of ``dtype`` (vectors included)."""
    elem, n = dt.split(dtype)
    t = scalar_type(elem)
    return t if n == 1 else ir.VectorType(t, n)


def mem_type(dtype: str) -> ir.Type:
    """In-memory type of ``dtype``: like the register type but ``bool`` is a byte."""
    elem, n = dt.split(dtype)
    t = I8 if elem == "bool" else scalar_type(elem)
    return t if n == 1 else ir.VectorType(t, n)


def elem_align(dtype: str) -> int:
    """Natural alignment in bytes of one element as stored in memory."""
    return dt.nbytes(dt.element(dtype))


def wrap_int(value: int, bits: int) -> int:
    """``value`` reduced to a ``bits``-wide two's-complement integer (LLVM wants it in range)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if bits > 1 and value >> (bits - 1) else value


def scalar_const(elem: str, value) -> ir.Constant:
    if elem == "bool":
        return ir.Constant(I1, 1 if value else 0)
    if elem == "bfloat16":
        import ml_dtypes

        bits_ = int(np.array(value, dtype=ml_dtypes.bfloat16).view(np.uint16))
        return ir.Constant(I16, wrap_int(bits_, 16))
    if elem == "float16":
        return ir.Constant(F16, float(np.float16(value)))
    if dt.is_float(elem):
        return ir.Constant(scalar_type(elem), float(value))
    return ir.Constant(scalar_type(elem), wrap_int(int(value), dt.bits(elem)))


def const(dtype: str, value) -> ir.Constant:
    """A constant of ``dtype``; for a vector dtype every lane holds ``value``."""
    elem, n = dt.split(dtype)
    c = scalar_const(elem, value)
    return c if n == 1 else ir.Constant(ir.VectorType(c.type, n), [c] * n)


def broadcast(b: ir.IRBuilder, v: ir.Value, lanes: int) -> ir.Value:
    """Splat the scalar ``v`` across ``lanes`` lanes (insertelement + shufflevector)."""
    if lanes == 1:
        return v
    if isinstance(v, ir.Constant):
        return ir.Constant(ir.VectorType(v.type, lanes), [v] * lanes)
    vt = ir.VectorType(v.type, lanes)
    one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))


def lanes_of(v: ir.Value) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 1


def like(t: ir.Type, lanes: int) -> ir.Type:
    return t if lanes == 1 else ir.VectorType(t, lanes)


# --- float16 / bfloat16 ------------------------------------------------------------------------

def to_f32(b: ir.IRBuilder, v: ir.Value, elem: str) -> ir.Value:
    """Widen a float16/bfloat16 value (scalar or vector) to float32 exactly."""
    n = lanes_of(v)
    if elem == "float16":
        return b.fpext(v, like(F32, n))
    # bfloat16 is the top half of a float32.
    wide = b.shl(b.zext(v, like(I32, n)), _splat(I32, 16, n))
    return b.bitcast(wide, like(F32, n))


def from_f32(b: ir.IRBuilder, v: ir.Value, elem: str) -> ir.Value:
    """Round a float32 value to float16/bfloat16 (nearest-even, NaN stays NaN)."""
    n = lanes_of(v)
    if elem == "float16":
        return b.fptrunc(v, like(F16, n))
    # The ml_dtypes algorithm: add 0x7fff plus the lowest kept bit, then drop the low half.
    bits_ = b.bitcast(v, like(I32, n))
    lsb = b.and_(b.lshr(bits_, _splat(I32, 16, n)), _splat(I32, 1, n))
    rounded = b.lshr(b.add(bits_, b.add(lsb, _splat(I32, 0x7FFF, n))), _splat(I32, 16, n))
    quiet_nan = b.or_(b.lshr(bits_, _splat(I32, 16, n)), _splat(I32, 0x40, n))
    is_nan = b.fcmp_unordered("uno", v, v)
    return b.trunc(b.select(is_nan, quiet_nan, rounded), like(I16, n))


def splat(t: ir.Type, value) -> ir.Constant:
    """A constant of the LLVM type ``t`` (a scalar, or a vector with ``value`` in every lane)."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)


def _splat(t: ir.Type, value: int, n: int) -> ir.Constant:
    return splat(like(t, n), value)


def compute_type(elem: str) -> str:
    """The element dtype arithmetic on ``elem`` is carried out in."""
    return "float32" if elem in NARROW else elem


def widen(b: ir.IRBuilder, v: ir.Value, elem: str) -> ir.Value:
    return to_f32(b, v, elem) if elem in NARROW else v


def narrow(b: ir.IRBuilder, v: ir.Value, elem: str) -> ir.Value:
    return from_f32(b, v, elem) if elem in NARROW else v


# --- casts -------------------------------------------------------------------------------------

def cast(b: ir.IRBuilder, v: ir.Value, src: str, dst: str) -> ir.Value:
    """Convert ``v`` from dtype ``src`` to ``dst`` (lane counts must agree) like numpy ``astype``."""
    se, de = dt.element(src), dt.element(dst)
    n = lanes_of(v)
    if se == de:
        return v
    if se in NARROW:
        v, se = to_f32(b, v, se), "float32"
        if de == "float32":
            return v
    if de == "bool":
        if dt.is_float(se):  # numpy: NaN is truthy, so compare unordered
            return b.fcmp_unordered("!=", v, const(dt.with_lanes(se, n), 0.0))
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, None))
    if de in NARROW:
        # float16 from a double rounds once, like numpy; bfloat16 goes through float32 like
        # ml_dtypes does.
        mid = "float64" if de == "float16" and se != "float32" else "float32"
        w = cast(b, v, dt.with_lanes(se, n), dt.with_lanes(mid, n))
        if de == "bfloat16":
            return from_f32(b, w, de)
        return b.fptrunc(w, like(F16, n))
    dtt = reg_type(dt.with_lanes(de, n))
    if se == "bool":
        return b.uitofp(v, dtt) if dt.is_float(de) else b.zext(v, dtt)
    if dt.is_float(se) and dt.is_float(de):
        return b.fpext(v, dtt) if dt.bits(de) > dt.bits(se) else b.fptrunc(v, dtt)
    if dt.is_int(se) and dt.is_int(de):
        sb, db = dt.bits(se), dt.bits(de)
        if db < sb:
            return b.trunc(v, dtt)
        if db > sb:
            return b.zext(v, dtt) if dt.is_uint(se) else b.sext(v, dtt)
        return v  # same width, other signedness: same bits
    if dt.is_int(se):  # int -> float
        return b.uitofp(v, dtt) if dt.is_uint(se) else b.sitofp(v, dtt)
    # float -> int. int32 and narrower go through int32 as numpy does on x86: INT_MIN for NaN and
    # out of range (the conversion's own answer there: ``vcvttps2dq``, which codegen.x86 emits
    # for whole vectors), then wrap (200.0 -> int8 is -56); LLVM's fptosi alone is poison out of
    # range, so the select keeps it out of the answer.
    if de == "uint64":
        return b.fptoui(v, dtt)
    if de in ("int32", "int16", "int8", "uint16", "uint8"):
        inside = b.and_(b.fcmp_ordered(">=", v, const(dt.with_lanes(se, n), -2.0 ** 31)),
                        b.fcmp_ordered("<", v, const(dt.with_lanes(se, n), 2.0 ** 31)))
        word = b.select(inside, b.fptosi(v, like(I32, n)), const(dt.with_lanes("int32", n), -2 ** 31))
        return word if de == "int32" else b.trunc(word, dtt)
    wide = b.fptosi(v, like(I64, n))
    return wide if de == "int64" else b.trunc(wide, dtt)
