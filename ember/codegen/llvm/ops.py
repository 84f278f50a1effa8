"""Binary and comparison operators with numpy's semantics, for scalars and vectors alike.

numpy defines things C leaves undefined, and we follow it so kernels agree with reference code:
integer division or remainder by zero gives 0, ``INT_MIN // -1`` wraps, shifts by the bit width
or more give 0 (or the sign for ``>>``), float ``//`` and ``%`` use numpy's fmod-based formulas,
and ``minimum``/``maximum`` propagate NaN (a tie of two zeros may give either: :mod:`.x86`).
"""
from __future__ import annotations

from llvmlite import ir

from ...errors import CompileError
from ...loop import dtype as dt
from .intrinsics import llvm_intrinsic
from . import types as T
from . import x86

_CMP = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def binary(e, op: str, a: ir.Value, b_: ir.Value, dtype: str) -> ir.Value:
    """Emit ``a <op> b`` where both operands have Ember dtype ``dtype``."""
    b = e.builder
    elem = dt.element(dtype)
    if op in _CMP:
        return compare(b, op, a, b_, elem)
    if op in ("And", "Or"):
        return b.and_(a, b_) if op == "And" else b.or_(a, b_)
    if dt.is_float(elem):
        x = float_binary(e, op, T.widen(b, a, elem), T.widen(b, b_, elem), T.compute_type(elem))
        return T.narrow(b, x, elem)
    if dt.is_bool(elem):
        return bool_binary(b, op, a, b_)
    return int_binary(b, op, a, b_, elem)


def compare(b: ir.IRBuilder, op: str, a, b_, elem: str) -> ir.Value:
    sym = _CMP[op]
    if dt.is_float(elem):
        a, b_ = T.widen(b, a, elem), T.widen(b, b_, elem)
        # Ordered compares are false on NaN; NE is the unordered one so that NaN != NaN.
        return b.fcmp_unordered(sym, a, b_) if op == "NE" else b.fcmp_ordered(sym, a, b_)
    if dt.is_uint(elem) or dt.is_bool(elem):
        return b.icmp_unsigned(sym, a, b_)
    return b.icmp_signed(sym, a, b_)


def bool_binary(b: ir.IRBuilder, op: str, a, b_) -> ir.Value:
    if op in ("BitAnd", "Mul", "Min"):
        return b.and_(a, b_)
    if op in ("BitOr", "Add", "Max"):
        return b.or_(a, b_)
    if op in ("BitXor", "Sub"):
        return b.xor(a, b_)
    raise CompileError(f"operator {op} is not defined on bool")


def float_binary(e, op: str, a, b_, elem: str) -> ir.Value:
    b, fm = e.builder, e.fastmath
    if op == "Add":
        return b.fadd(a, b_, flags=fm)
    if op == "Sub":
        return b.fsub(a, b_, flags=fm)
    if op == "Mul":
        return b.fmul(a, b_, flags=fm)
    if op == "Div":
        return b.fdiv(a, b_, flags=fm)
    if op == "Mod":
        return b.frem(a, b_)
    if op in ("Min", "Max"):
        return (x86.min_max(b, op, a, b_, e.features)
                or llvm_intrinsic(b, "minimum" if op == "Min" else "maximum", [a, b_]))
    if op in ("FloorDiv", "FloorMod"):
        return _float_divmod(b, op, a, b_, elem)
    raise CompileError(f"operator {op} is not defined on floats")


def uniform_reciprocal(b: ir.IRBuilder, c: ir.Value) -> tuple:
    """``(RN(1/c), bad)`` for a scalar divisor (one division, which LLVM folds for a constant and
    hoists out of the loops for a run-time value), ``bad`` true where :func:`divide_by_uniform` must divide instead:
    ``c`` or its reciprocal zero, subnormal, infinite or NaN."""
    r = b.fdiv(ir.Constant(c.type, 1.0), c)
    tiny = ir.Constant(c.type, 2.0 ** -126 if isinstance(c.type, ir.FloatType) else 2.0 ** -1022)
    inf = ir.Constant(c.type, float("inf"))

    def normal(v):
        m = llvm_intrinsic(b, "fabs", [v])
        return b.and_(b.fcmp_ordered(">=", m, tiny), b.fcmp_ordered("<", m, inf))
    return r, b.not_(b.and_(normal(c), normal(r)))


def divide_by_uniform(b: ir.IRBuilder, a, divisor, rc, bad) -> ir.Value:
    """``a / c`` for a divisor the same in every lane (a quantizer divides every element by its
    scale) without the divider: ``vdivps`` issues once per several cycles, an FMA twice per
    cycle. ``q = a * r`` with ``r = RN(1/c)`` (``rc``) is within an ulp, and one Markstein step,
    ``q + r * (a - q * c)`` with the residual exact by FMA, rounds to exactly ``RN(a / c)`` --
    unless the residual underflows (``|a|`` below 2^-100 but not zero, where the step could
    miss by an ulp), ``q`` is infinite (an infinite ``a``, or a quotient past the largest
    float: the step would make NaN) or ``bad`` (an i1: the reciprocal is not usable): then
    (any lane of a vector) the division, on a branch. A zero's quotient is ``q`` (its sign
    kept); a NaN's residual is NaN and ``q`` answers."""
    q = b.fmul(a, rc)
    residual = llvm_intrinsic(b, "fma", [b.fneg(q), divisor, a])
    corrected = llvm_intrinsic(b, "fma", [residual, rc, q])
    magnitude = llvm_intrinsic(b, "fabs", [a])
    zero = b.fcmp_ordered("==", magnitude, T.splat(a.type, 0.0))
    # (a zero's quotient is q itself, its sign included: the step would make -0 +0; and zeros,
    # a ReLU's half of a quantizer's input, must not take the branch)
    fast = b.select(b.or_(b.fcmp_unordered("uno", residual, residual), zero), q, corrected)
    tiny = b.and_(b.fcmp_ordered("<", magnitude, T.splat(a.type, 2.0 ** -100)), b.not_(zero))
    tiny = b.or_(tiny, b.fcmp_ordered("==", llvm_intrinsic(b, "fabs", [q]), T.splat(a.type, float("inf"))))
    if isinstance(tiny.type, ir.VectorType):
        tiny = llvm_intrinsic(b, "vector.reduce.or", [tiny], ret=ir.IntType(1))
    return _or_divide(b, fast, b.or_(tiny, bad), a, divisor)


def _or_divide(b: ir.IRBuilder, fast, slow_if, a, divisor) -> ir.Value:
    """``fast``, or where the i1 ``slow_if`` holds ``a / divisor`` by the divider, on a branch."""
    here = b.block
    slow_block = b.append_basic_block("div_exact")
    done = b.append_basic_block("div_done")
    b.cbranch(slow_if, slow_block, done)
    b.position_at_end(slow_block)
    slow = b.fdiv(a, divisor)
    b.branch(done)
    b.position_at_end(done)
    out = b.phi(a.type)
    out.add_incoming(fast, here)
    out.add_incoming(slow, slow_block)
    return out


def quotient_to_round(b: ir.IRBuilder, a, divisor, rc, c, bad) -> ir.Value:
    """``a / c`` as :func:`divide_by_uniform` makes it, for a quotient that is then rounded to
    an integer (a quantizer's ``round(x / scale)``): the Markstein step alone, without the
    per-vector checks and branch. Where the residual underflows (``|a| < 2^-100``) the step may
    miss by an ulp, but with ``|c| >= 2^-60`` (else: the division, on a branch decided once per
    run as ``c`` is uniform) that quotient is below 2^-40 and rounds to zero either way; an
    infinite quotient (the step would make NaN) and a NaN are ``q``'s."""
    f32 = a.type.element if isinstance(a.type, ir.VectorType) else a.type
    q = b.fmul(a, rc)
    residual = llvm_intrinsic(b, "fma", [b.fneg(q), divisor, a])
    corrected = llvm_intrinsic(b, "fma", [residual, rc, q])
    # (a zero's sign from q, which has the quotient's: the step makes -0 +0)
    corrected = llvm_intrinsic(b, "copysign", [corrected, q])
    fast = b.select(b.fcmp_unordered("uno", corrected, corrected), q, corrected)
    small = b.fcmp_ordered("<", llvm_intrinsic(b, "fabs", [c]), ir.Constant(f32, 2.0 ** -60))
    return _or_divide(b, fast, b.or_(bad, small), a, divisor)


def _float_divmod(b: ir.IRBuilder, op: str, a, b_, elem: str) -> ir.Value:
    """numpy's ``npy_divmod``: exact where ``a - floor(a / b) * b`` would round badly."""
    n = T.lanes_of(a)
    ty = dt.with_lanes(elem, n)
    zero, one = T.const(ty, 0.0), T.const(ty, 1.0)
    mod = b.frem(a, b_)
    mod_nz = b.fcmp_unordered("!=", mod, zero)  # NaN counts as nonzero, as in C
    signs_differ = b.xor(b.fcmp_ordered("<", b_, zero), b.fcmp_ordered("<", mod, zero))
    adjust = b.and_(mod_nz, signs_differ)
    if op == "FloorMod":
        fixed = b.select(adjust, b.fadd(mod, b_), mod)
        return b.select(mod_nz, fixed, llvm_intrinsic(b, "copysign", [zero, b_]))
    div = b.fdiv(b.fsub(a, mod), b_)
    div = b.select(adjust, b.fsub(div, one), div)
    floordiv = llvm_intrinsic(b, "floor", [div])
    up = b.fcmp_ordered(">", b.fsub(div, floordiv), T.const(ty, 0.5))
    floordiv = b.select(up, b.fadd(floordiv, one), floordiv)
    quotient = b.fdiv(a, b_)
    div_nz = b.fcmp_unordered("!=", div, zero)
    res = b.select(div_nz, floordiv, llvm_intrinsic(b, "copysign", [zero, quotient]))
    return b.select(b.fcmp_ordered("==", b_, zero), quotient, res)


def _const_value(v: ir.Value):
    """The integer a constant (or uniform constant vector) holds, else None."""
    if not isinstance(v, ir.Constant):
        return None
    c = v.constant
    if isinstance(c, list):
        vals = {getattr(x, "constant", None) for x in c}
        return vals.pop() if len(vals) == 1 and isinstance(next(iter(vals), None), int) else None
    return c if isinstance(c, int) else None


# integer ops that are one LLVM instruction whatever the signedness (the builder's method name)
_INT_SIMPLE = {"Add": "add", "Sub": "sub", "Mul": "mul", "BitAnd": "and_", "BitOr": "or_", "BitXor": "xor"}


def int_binary(b: ir.IRBuilder, op: str, a, b_, elem: str) -> ir.Value:
    signed = not dt.is_uint(elem)
    bits = dt.bits(elem)
    simple = _INT_SIMPLE.get(op)
    if simple is not None:
        return getattr(b, simple)(a, b_)
    if op in ("Min", "Max"):
        sym = "<" if op == "Min" else ">"
        c = b.icmp_signed(sym, a, b_) if signed else b.icmp_unsigned(sym, a, b_)
        return b.select(c, a, b_)
    if op in ("Shl", "Shr"):
        return _shift(b, op, a, b_, signed, bits)
    if op in ("Div", "Mod", "FloorDiv", "FloorMod"):
        return _int_divmod(b, op, a, b_, signed)
    raise CompileError(f"operator {op} is not defined on integers")


def _shift(b: ir.IRBuilder, op: str, a, s, signed: bool, bits: int) -> ir.Value:
    width = ir.Constant(a.type, bits) if not isinstance(a.type, ir.VectorType) else \
        T.const(dt.with_lanes(f"int{bits}", a.type.count), bits)
    known = _const_value(s)
    in_range = known is not None and 0 <= known < bits
    if op == "Shr" and signed:
        # Shifting by >= bits fills with the sign, which is what a shift by bits-1 does.
        if in_range:
            return b.ashr(a, s)
        top = T.const(dt.with_lanes(f"uint{bits}", T.lanes_of(a)), bits - 1)
        clamped = b.select(b.icmp_unsigned("<", s, width), s, top)
        return b.ashr(a, clamped)
    r = b.shl(a, s) if op == "Shl" else b.lshr(a, s)
    if in_range:
        return r
    return b.select(b.icmp_unsigned("<", s, width), r, ir.Constant(a.type, None))


def _int_divmod(b: ir.IRBuilder, op: str, a, d, signed: bool) -> ir.Value:
    zero_c = ir.Constant(a.type, None)
    one_c = _like_const(a.type, 1)
    known = _const_value(d)
    safe_const = known is not None and known != 0 and not (signed and known == -1)
    if safe_const:
        sd = d
    else:
        # numpy: x // 0 == x % 0 == 0, and INT_MIN // -1 wraps; x86 idiv would trap on both.
        is_zero = b.icmp_signed("==", d, zero_c)
        bad = b.or_(is_zero, b.icmp_signed("==", d, _like_const(a.type, -1))) if signed else is_zero
        sd = b.select(bad, one_c, d)
    if not signed:
        r = b.udiv(a, sd) if op in ("Div", "FloorDiv") else b.urem(a, sd)
    elif op in ("Div", "FloorDiv"):
        q = b.sdiv(a, sd)
        if op == "FloorDiv":
            rem = b.srem(a, sd)
            q = b.sub(q, b.zext(_rounds_down(b, rem, sd, zero_c), a.type))
        if not safe_const:
            q = b.select(b.icmp_signed("==", d, _like_const(a.type, -1)), b.sub(zero_c, a), q)
        r = q
    else:
        rem = b.srem(a, sd)
        if op == "FloorMod":
            rem = b.add(rem, b.select(_rounds_down(b, rem, sd, zero_c), sd, zero_c))
        r = rem
    if safe_const:
        return r
    return b.select(b.icmp_signed("==", d, zero_c), zero_c, r)


def _rounds_down(b, rem, d, zero_c):
    """Whether truncating division differs from floor division: remainder and divisor differ in sign."""
    return b.and_(b.icmp_signed("!=", rem, zero_c),
                  b.icmp_signed("<", b.xor(rem, d), zero_c))


def _like_const(t: ir.Type, value: int) -> ir.Constant:
    if isinstance(t, ir.VectorType):
        c = ir.Constant(t.element, T.wrap_int(value, t.element.width))
        return ir.Constant(t, [c] * t.count)
    return ir.Constant(t, T.wrap_int(value, t.width))
