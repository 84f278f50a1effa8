"""Inline float32 math: exp, exp2, expm1, log, log2, log1p, tanh, sigmoid and erf, and SiLU and GELU.

LLVM scalarizes ``llvm.exp`` and libm calls on vector types (an ``<8 x float>`` exp becomes
eight ``expf`` calls), which made softmax, GELU, sigmoid and tanh layers run at libm speed.
These functions instead emit straight-line IR (no branches, no calls) built from
``fmuladd``, compares, selects and integer bit manipulation, so the same code works on a scalar
``float`` and on any ``<N x float>``, and a scalar loop around it still auto-vectorizes.

Techniques (standard, Cephes/SLEEF style; the polynomial coefficients were fitted for this
module by a weighted minimax (Lawson) fit with float32 rounding of each coefficient):

* exp: ``n = round(x*log2(e))`` with the 1.5*2^23 trick (gives ``n`` as an integer in the
  low bits, no ``roundps``/``cvt`` needed), ``r = x - n*ln2`` in two parts (the high part has
  9 significant bits so ``n*C1`` is exact even without a fused multiply-add),
  ``exp(r) = 1 + r + r^2 P(r)`` on ``|r| <= ln2/2``, then ``2^n`` is applied as two exact
  power-of-two factors so overflow gives inf and results in the subnormal range are rounded
  once, like libm.
* exp2: ``n = round(x)``, ``f = x - n`` exactly, ``2^f = 1 + f Q(f)``, same scaling.
* expm1: the exp reduction, ``expm1(r) = r + r^2 P(r)`` (same P), and
  ``expm1(x) = 2*(2^(n-1)*expm1(r) + (2^(n-1) - 1/2))`` with one fused rounding; exact for
  ``n == 0`` (``|x| < ln2/2``), so tiny arguments keep full relative accuracy.
* log/log2: subnormals are scaled by 2^23, the bits split into ``k`` and ``m`` in
  ``[sqrt(1/2), sqrt(2))``, ``log(m) = f - f^2/2 + f^3 R(f)`` with ``f = m - 1`` exact.
* log1p: the log reduction applied to ``u = 1 + x``, with ``f = x`` itself when ``u`` needs no
  scaling (so small arguments are exact inputs to the polynomial) and the rounding error of
  ``1 + x`` added back as ``c/u`` otherwise.
* tanh: ``x + x^3 S(x^2)`` for ``|x| < 0.625``, else ``1 - 2/(exp(2|x|) + 1)`` with the sign of x.
* sigmoid: ``e = exp(-|x|)``; ``1/(1+e)`` for ``x >= 0`` and ``e/(1+e)`` for ``x < 0`` (no
  overflow, subnormal results for very negative x). As ``n <= 0`` here, ``E = 2^64 e`` is an
  exact ``y 2^(n+64)``, and the quotients are taken as ``2^64/(2^64+E)`` and ``E/(2^64+E)``:
  one multiply, no splitting of ``n``, and one rounding (the division's) into the subnormals.
* silu (``x * sigmoid(x)``, which the code generator finds in a kernel's expression):
  ``x / (1 + exp(-c))`` with ``c`` = ``x`` clamped to [-87.3, 87.3], so ``exp`` needs one
  power-of-two factor and no select between two quotients; its exp has a polynomial a term
  shorter (within 2 ulp). Below -87.3 the result is ``-87.3 / (1 + exp(87.3))``, about -1e-36
  where the true value is smaller still (an absolute error under 1.1e-36; ``-inf`` gives that
  too, where ``x * sigmoid(x)`` is NaN). A SiLU is the activation after every convolution of
  EfficientNet (~6M a run, a fifth of its time): 16 vector operations where the sigmoid and
  its product take 23, 1.27x faster alone (AVX-512, Zen 5).
* erf: ``x * (2/sqrt(pi) + x^2 E(x^2))`` for ``|x| < 1`` (the leading constant in two parts);
  ``1 - exp(-x^2) G(|x| - 2.5)`` with ``G ~ erfc(x) exp(x^2)`` for ``1 <= |x| < 4``; 1 beyond.
* gelu (``x * (1 + erf(x / sqrt 2)) / 2``, which the code generator finds in a kernel's
  expression): erf as one rational ``t P(t^2) / Q(t^2)`` up to 3.92, +-1 beyond, within 2.1e-7
  of Phi(x) absolute -- an activation's accuracy, not erf's 4 ulp -- in half the operations
  of the erf above (BERT's FFN: QDQ int8 1.10x faster, float32 1.04x).

Special values follow C99/numpy: NaN in gives NaN out, exp(-inf) = 0, exp(inf) = inf,
log(0) = -inf, log(negative) = NaN, log(inf) = inf, log1p(-1) = -inf, signed zeros are kept
by the odd functions. The arithmetic never carries fast-math flags: the special-value handling
relies on NaN and inf behaving as IEEE says.

``fmuladd`` rather than ``fma``: it is a single fused instruction on targets with FMA (x86 with
FMA3, AArch64) and a multiply plus an add elsewhere, never a call to libm's ``fmaf``. Nothing
here needs the fused rounding for correctness (exact products come from splitting constants);
the accuracy figures in tests/codegen/test_vmath.py are for fused targets.
"""
from __future__ import annotations

from llvmlite import ir

F32 = ir.FloatType()
I32 = ir.IntType(32)


def _h(*xs):
    return [float.fromhex(x) for x in xs]


# exp(r) - 1 - r = r^2 P(r), |r| <= ln2/2 (max rel. error of exp(r) ~ 0.06 ulp before rounding;
# a sixth term took it to 0.01 ulp for one more multiply-add in every exp, sigmoid, tanh and erf).
EXP_P = _h("0x1.fffffcp-2", "0x1.555492p-3", "0x1.5558f2p-5", "0x1.1239d4p-7", "0x1.6a244cp-10")
# the same a term shorter, for SiLU: max. rel. error of exp(r) ~ 1.1e-7 before rounding (Lawson fit)
EXP_P5 = _h("0x1.fffdfcp-2", "0x1.5557aep-3", "0x1.5729fp-5", "0x1.106284p-7")
SILU_CLAMP = 87.3  # |c| <= 87.3: exp(-c) = y 2^n with |n| <= 126, one normal power of two
# 2^f = 1 + f Q(f), |f| <= 1/2.
EXP2_Q = _h("0x1.62e43p-1", "0x1.ebfbdcp-3", "0x1.c6af7cp-5", "0x1.3b2dep-7", "0x1.5f082ep-10",
            "0x1.416b52p-13")
# log1p(f) = f - f^2/2 + f^3 R(f), f in [sqrt(1/2) - 1, sqrt(2) - 1].
LOG_R = _h("0x1.555548p-2", "-0x1.000006p-2", "0x1.99a478p-3", "-0x1.555c48p-3", "0x1.233b62p-3",
           "-0x1.fc278ap-4", "0x1.e6c372p-4", "-0x1.de0d26p-4", "0x1.147962p-4")
# tanh(x) = x + x^3 S(x^2), |x| < 0.625.
TANH_S = _h("-0x1.555532p-2", "0x1.1106f6p-3", "-0x1.b835a4p-5", "0x1.51f8cep-6", "-0x1.750ce4p-8")
TANH_SMALL = 0.625
# erf(x) = x (2/sqrt(pi) + z E(z)), z = x^2, |x| < 1; 2/sqrt(pi) = ERF_C0_HI + ERF_C0_LO.
ERF_C0_HI, ERF_C0_LO = _h("0x1.20dd76p+0", "-0x1.f7ac92p-25")
ERF_E = _h("-0x1.812742p-2", "0x1.ce2d94p-4", "-0x1.b8025ap-6", "0x1.544804p-8", "-0x1.a5b47p-11",
           "0x1.4ddb72p-14")
# erfc(x) exp(x^2) = G(x - 2.5) for 1 <= x <= 4 (absolute error of erf ~ 0.04 ulp of 1).
ERFC_G = _h("0x1.afbbe6p-3", "-0x1.30816cp-4", "0x1.9833a2p-6", "-0x1.0a7a28p-7", "0x1.2dc914p-9",
            "-0x1.5aaf9cp-11", "0x1.1ccc5cp-11", "0x1.d7e58ap-13", "0x1.c01a3ep-14")
ERF_SMALL, ERF_ONE = 1.0, 4.0  # erf(x) rounds to 1 in float32 from x = 3.92
# GELU's erf(t) = t P(t^2) / Q(t^2) (Q's constant term 1) for |t| < 3.92, one rational
# (Lawson-weighted least squares on the absolute error of erf, coefficients float32): within
# 4.2e-7 of erf evaluated in float32, 7 ulp of 1, where the two-branch erf takes three times
# the instructions
GELU_P = _h("0x1.20dd6ep+0", "0x1.a61e0ap-3", "0x1.a50b5cp-5", "0x1.045c28p-8", "0x1.38705ap-13",
            "-0x1.0baa24p-19", "0x1.563dc8p-26")
GELU_Q = _h("0x1p+0", "0x1.082ff0p-1", "0x1.e18a6ep-4", "0x1.e7e236p-7", "0x1.0c7588p-10")
GELU_ONE = 3.92

LOG2E = float.fromhex("0x1.715476p+0")
LOG2E_M1 = float.fromhex("0x1.c551dap-2")  # log2(e) - 1
LN2_C1 = 0.693359375                          # ln2 = C1 + C2, C1 with 9 significant bits
LN2_C2 = float.fromhex("-0x1.bd0106p-13")
MAGIC = 12582912.0                            # 1.5 * 2^23: x + MAGIC rounds x to an integer
MAGIC_BITS = 0x4B400000
SQRT_HALF_BITS = 0x3F3504F3
FLT_MIN = float.fromhex("0x1p-126")
INF, NAN = float("inf"), float("nan")


def is_f32(t: ir.Type) -> bool:
    """Whether ``t`` is ``float`` or a vector of ``float`` (what these functions accept)."""
    return isinstance(t.element if isinstance(t, ir.VectorType) else t, ir.FloatType)


class _Emitter:
    """IR helpers for one value shape (scalar ``float`` or ``<N x float>``); no fast-math."""

    def __init__(self, b: ir.IRBuilder, like: ir.Value):
        self.b = b
        self.ft = like.type
        self.n = like.type.count if isinstance(like.type, ir.VectorType) else 0
        self.it = ir.VectorType(I32, self.n) if self.n else I32

    # --- constants and casts ---
    def f(self, v: float) -> ir.Constant:
        c = ir.Constant(F32, v)
        return ir.Constant(self.ft, [c] * self.n) if self.n else c

    def i(self, v: int) -> ir.Constant:
        c = ir.Constant(I32, v)
        return ir.Constant(self.it, [c] * self.n) if self.n else c

    def bits(self, x):
        return self.b.bitcast(x, self.it)

    def float_of_bits(self, k):
        return self.b.bitcast(k, self.ft)

    def to_float(self, k):
        return self.b.sitofp(k, self.ft)

    def pow2(self, k):
        """2^k for integer k in [-126, 127] (exact)."""
        return self.float_of_bits(self.b.shl(self.b.add(k, self.i(127)), self.i(23)))

    # --- arithmetic ---
    def _intrinsic(self, name: str, args: list):
        suffix = f"v{self.n}f32" if self.n else "f32"
        full = f"llvm.{name}.{suffix}"
        module = self.b.module
        fn = module.globals.get(full)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(self.ft, [self.ft] * len(args)), full)
        return self.b.call(fn, args)

    def fma(self, a, b, c):
        """``a*b + c``, fused where the target has FMA."""
        return self._intrinsic("fmuladd", [a, b, c])

    def poly(self, x, coeffs):
        """``coeffs[0] + coeffs[1] x + ...`` in Estrin's form: pairs ``c[k] + c[k+1] x`` joined
        with ``x^2``, those with ``x^4``, and so on: a chain of ``log2(len)`` dependent steps
        where Horner's form is one of ``len - 1`` (measured with exp's polynomial a term
        shorter, in one process: sigmoid and tanh 1.02-1.05x faster, exp and erf 1.00-1.03x;
        EfficientNet-B0, whose SiLUs take ~6M sigmoids a run, 1.01x)."""
        terms = [self.fma(self.f(coeffs[k + 1]), x, self.f(coeffs[k])) if k + 1 < len(coeffs)
                 else self.f(coeffs[k]) for k in range(0, len(coeffs), 2)]
        power = x
        while len(terms) > 1:
            power = self.mul(power, power)
            terms = [self.fma(terms[k + 1], power, terms[k]) if k + 1 < len(terms) else terms[k]
                     for k in range(0, len(terms), 2)]
        return terms[0]

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def abs(self, x):
        return self._intrinsic("fabs", [x])

    def copysign(self, mag, sign):
        return self._intrinsic("copysign", [mag, sign])

    # --- comparisons (ordered: false when a NaN is involved) and selects ---
    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def isnan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def sel(self, cond, a, b):
        return self.b.select(cond, a, b)

    def min_to(self, x, hi: float):
        """``x`` if ``x < hi`` else ``hi`` (NaN becomes ``hi``: one ``minps``)."""
        return self.sel(self.lt(x, self.f(hi)), x, self.f(hi))

    def max_to(self, x, lo: float):
        """``x`` if ``x > lo`` else ``lo`` (NaN becomes ``lo``)."""
        return self.sel(self.gt(x, self.f(lo)), x, self.f(lo))

    def keep_nan(self, x, r):
        """``r``, or ``x`` itself where ``x`` is NaN."""
        return self.sel(self.isnan(x), x, r)


# --- exp family ----------------------------------------------------------------------------------

def _exp_reduce(e: _Emitter, x):
    """``x = n ln2 + r`` with ``|r| <= ln2/2``; returns ``(n as i32, r)``. ``|x| < 2^22``."""
    t = e.fma(x, e.f(LOG2E), e.f(MAGIC))
    n_i = e.b.sub(e.bits(t), e.i(MAGIC_BITS))
    n_f = e.sub(t, e.f(MAGIC))
    r = e.fma(n_f, e.f(-LN2_C1), x)
    r = e.fma(n_f, e.f(-LN2_C2), r)
    return n_i, r


def _expm1_r(e: _Emitter, r):
    """``expm1(r)`` for ``|r| <= ln2/2``: ``r + r^2 P(r)``."""
    return e.fma(e.mul(r, r), e.poly(r, EXP_P), r)


def _exp_r(e: _Emitter, r, coeffs=EXP_P):
    """``exp(r)`` for ``|r| <= ln2/2`` in Horner form, ``1 + r (1 + r P(r))`` (two operations
    fewer than ``_expm1_r(r) + 1``; within 1 ulp with ``EXP_P``, 2 with ``EXP_P5``)."""
    return e.fma(r, e.fma(r, e.poly(r, coeffs), e.f(1.0)), e.f(1.0))


def _scale(e: _Emitter, y, n_i):
    """``y * 2^n`` for ``y`` in [1/2, 2] and ``n`` in [-200, 254], rounded once (to a subnormal,
    zero or inf where that is the answer): ``y * 2^(n>>1)`` is exact, the second factor rounds."""
    n1 = e.b.ashr(n_i, e.i(1))
    n2 = e.b.sub(n_i, n1)
    return e.mul(e.mul(y, e.pow2(n1)), e.pow2(n2))


def _exp_finite(e: _Emitter, x):
    """``exp(x)`` for ``x`` in [-104, 89] (no NaN)."""
    n_i, r = _exp_reduce(e, x)
    return _scale(e, e.add(_expm1_r(e, r), e.f(1.0)), n_i)


def exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _Emitter(b, x)
    # exp(x) is inf above 88.73 and rounds to 0 below -103.98; clamping there keeps n small.
    xc = e.max_to(e.min_to(x, 89.0), -104.0)
    return e.keep_nan(x, _exp_finite(e, xc))


def exp2(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _Emitter(b, x)
    xc = e.max_to(e.min_to(x, 129.0), -151.0)
    t = e.add(xc, e.f(MAGIC))
    n_i = e.b.sub(e.bits(t), e.i(MAGIC_BITS))
    f = e.sub(xc, e.sub(t, e.f(MAGIC)))  # exact, in [-1/2, 1/2]
    y = e.fma(f, e.poly(f, EXP2_Q), e.f(1.0))
    return e.keep_nan(x, _scale(e, y, n_i))


def expm1(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _Emitter(b, x)
    # expm1 rounds to -1 below -17.33; above 88.73 it is inf (n = 128 is still handled).
    xc = e.max_to(e.min_to(x, 89.0), -30.0)
    n_i, r = _exp_reduce(e, xc)
    em = _expm1_r(e, r)
    # 2^n (em + 1) - 1 = 2 (h em + (h - 1/2)), h = 2^(n-1): exact for n = 0, and h stays
    # finite for n = 128 (the doubling then overflows exactly when the result does).
    h = e.pow2(e.b.sub(n_i, e.i(1)))
    y = e.mul(e.fma(h, em, e.sub(h, e.f(0.5))), e.f(2.0))
    return e.keep_nan(x, e.copysign(y, x))  # expm1 has the sign of x (keeps -0)


# --- log family ----------------------------------------------------------------------------------

def _log_split(e: _Emitter, x, subnormals: bool):
    """``x = 2^k m``, ``m`` in [sqrt(1/2), sqrt(2)); returns ``(k as float, m, k as i32)`` for
    positive finite ``x`` (garbage, but no poison, for other inputs). With ``subnormals`` the
    integer ``k`` is before the 2^23 scaling of subnormal inputs, the float one after."""
    adjust = None
    if subnormals:
        tiny = e.lt(x, e.f(FLT_MIN))
        x = e.sel(tiny, e.mul(x, e.f(float.fromhex("0x1p23"))), x)
        adjust = e.sel(tiny, e.f(-23.0), e.f(0.0))
    ix = e.bits(x)
    k = e.b.ashr(e.b.sub(ix, e.i(SQRT_HALF_BITS)), e.i(23))
    m = e.float_of_bits(e.b.sub(ix, e.b.shl(k, e.i(23))))
    kf = e.to_float(k)
    if adjust is not None:
        kf = e.add(kf, adjust)
    return kf, m, k


def _log1p_tail(e: _Emitter, f):
    """``log1p(f) - f = f^3 R(f) - f^2/2`` for ``f`` in [sqrt(1/2) - 1, sqrt(2) - 1]."""
    z = e.mul(f, f)
    return e.fma(e.mul(z, f), e.poly(f, LOG_R), e.mul(z, e.f(-0.5)))


def _log_specials(e: _Emitter, x, r, zero_at: float):
    """Special values of log-like functions whose domain starts at ``zero_at`` (0 or -1)."""
    r = e.sel(e.lt(x, e.f(INF)), r, x)  # inf -> inf, NaN -> NaN
    bad = e.sel(e.eq(x, e.f(zero_at)), e.f(-INF), e.f(NAN))
    return e.sel(e.gt(x, e.f(zero_at)), r, bad)


def log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _Emitter(b, x)
    kf, m, _ = _log_split(e, x, subnormals=True)
    f = e.sub(m, e.f(1.0))
    y = e.fma(kf, e.f(LN2_C2), _log1p_tail(e, f))
    r = e.fma(kf, e.f(LN2_C1), e.add(f, y))
    return _log_specials(e, x, r, 0.0)


def log2(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _Emitter(b, x)
    kf, m, _ = _log_split(e, x, subnormals=True)
    f = e.sub(m, e.f(1.0))
    tail = _log1p_tail(e, f)
    # (f + tail) log2(e) = f + f A + tail + tail A, A = log2(e) - 1: the rounded products are
    # small next to f.
    w = e.fma(tail, e.f(LOG2E_M1), tail)
    w = e.fma(f, e.f(LOG2E_M1), w)
    r = e.add(e.add(w, f), kf)
    return _log_specials(e, x, r, 0.0)


def log1p(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _Emitter(b, x)
    one = e.f(1.0)
    u = e.add(x, one)  # never subnormal: 0 or >= 2^-24 for x >= -1
    kf, m, k = _log_split(e, u, subnormals=False)
    unscaled = e.b.icmp_signed("==", k, e.i(0))
    # Without scaling m = u = 1 + x exactly up to rounding, so use f = x itself. Otherwise add
    # back the rounding error c = (1 + x) - u as log(u + c) - log(u) ~ c/u (|x| > 0.29 there).
    f = e.sel(unscaled, x, e.sub(m, one))
    # c exactly: u - 1 is exact for u <= 2, u - x and then 1 - (u - x) for u >= 2 (Sterbenz).
    c = e.sel(e.lt(u, e.f(2.0)), e.sub(x, e.sub(u, one)), e.sub(one, e.sub(u, x)))
    corr = e.sel(unscaled, e.f(0.0), e.div(c, u))
    y = e.fma(kf, e.f(LN2_C2), e.add(_log1p_tail(e, f), corr))
    r = e.fma(kf, e.f(LN2_C1), e.add(f, y))
    r = e.copysign(r, x)  # log1p has the sign of x on its domain (keeps -0)
    return _log_specials(e, x, r, -1.0)


# --- tanh, sigmoid, erf --------------------------------------------------------------------------

def tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _Emitter(b, x)
    a = e.abs(x)
    z = e.mul(a, a)
    small = e.fma(e.mul(a, z), e.poly(z, TANH_S), a)
    # tanh rounds to 1 from 9.01 on; 10 keeps exp(2a) far from overflow (and NaN -> 10).
    ex = _exp_finite(e, e.mul(e.min_to(a, 10.0), e.f(2.0)))
    big = e.sub(e.f(1.0), e.div(e.f(2.0), e.add(ex, e.f(1.0))))
    r = e.sel(e.lt(a, e.f(TANH_SMALL)), small, big)
    return e.keep_nan(x, e.copysign(r, x))


def sigmoid(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _Emitter(b, x)
    # exp(-|x|): -|x| clamped to [-104, 0] by one maxps that keeps a NaN (every step below then
    # gives NaN, so no NaN fix-up at the end); below -104 the answer is 0 to float32.
    a = e.b.fneg(e.abs(x))
    a = e.sel(e.lt(a, e.f(-104.0)), e.f(-104.0), a)
    n_i, r = _exp_reduce(e, a)
    # n in [-151, 0]: E = exp(-|x|) 2^64 = y 2^(n+64) is exact (a normal number), and the
    # answer is E / (2^64 + E) or 2^64 / (2^64 + E), the quotients of e/(1+e) and 1/(1+e) scaled
    # by 2^64 top and bottom: the division alone rounds, to a subnormal where that is the
    # answer. (A multiply by 2^-64 fewer on the FMA ports, which bound a SiLU: 1.06x.)
    big = e.f(2.0 ** 64)
    scaled = e.mul(_exp_r(e, r), e.pow2(e.b.add(n_i, e.i(64))))
    num = e.sel(e.lt(x, e.f(0.0)), scaled, big)
    return e.div(num, e.add(big, scaled))


def silu(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``x * sigmoid(x)`` as ``x / (1 + exp(-c))``, ``c`` clamped (see the module's notes)."""
    e = _Emitter(b, x)
    # the numerator: x, or -87.3 below it (-inf included); a NaN passes both selects
    num = e.sel(e.lt(x, e.f(-SILU_CLAMP)), e.f(-SILU_CLAMP), x)
    a = e.b.fneg(num)
    a = e.sel(e.lt(a, e.f(-SILU_CLAMP)), e.f(-SILU_CLAMP), a)
    # exp(a) = exp(r) 2^n, one power of two as |n| <= 126
    n_i, r = _exp_reduce(e, a)
    ex = e.mul(_exp_r(e, r, EXP_P5), e.pow2(n_i))
    return e.div(num, e.add(ex, e.f(1.0)))


def erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    e = _Emitter(b, x)
    a = e.abs(x)
    z = e.mul(a, a)
    # |x| < 1: a (c0 + z E(z)) with c0 = 2/sqrt(pi) in two parts, one rounding at the end.
    t = e.fma(z, e.poly(z, ERF_E), e.f(ERF_C0_LO))
    small = e.fma(a, e.f(ERF_C0_HI), e.mul(a, t))
    # 1 <= |x|: 1 - exp(-x^2) G(|x| - 2.5). The rounding of x^2 costs at most 0.005 ulp of the
    # result because erfc(x) x^2 is small next to 1. (NaN -> 4, fixed below.)
    ac = e.min_to(a, ERF_ONE)
    ex = _exp_finite(e, e.b.fneg(e.mul(ac, ac)))
    g = e.poly(e.sub(ac, e.f(2.5)), ERFC_G)
    big = e.fma(e.b.fneg(ex), g, e.f(1.0))
    r = e.sel(e.lt(a, e.f(ERF_SMALL)), small, big)
    return e.keep_nan(x, e.copysign(r, x))


def gelu(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``x * (1 + erf(x / sqrt 2)) / 2`` (which the code generator finds in a kernel's
    expression) with erf as one rational (``GELU_P / GELU_Q``), ``+-1`` from 3.92 on: 20
    operations and a division where the erf alone takes some 40. Within 2.1e-7 of Phi(x)
    (absolute; the formula's own cancellation for x < 0 is the same as written out)."""
    e = _Emitter(b, x)
    t = e.mul(x, e.f(0.7071067811865476))
    a = e.abs(t)
    c = e.min_to(a, GELU_ONE)  # (NaN -> 3.92; fixed below)
    z = e.mul(c, c)
    p = e.f(GELU_P[-1])
    for k in GELU_P[-2::-1]:  # (Horner: fewer operations than Estrin, and this runs in epilogues)
        p = e.fma(p, z, e.f(k))
    q = e.f(GELU_Q[-1])
    for k in GELU_Q[-2::-1]:
        q = e.fma(q, z, e.f(k))
    erf = e.sel(e.lt(a, e.f(GELU_ONE)), e.div(e.mul(c, p), q), e.f(1.0))
    half = e.mul(x, e.f(0.5))
    r = e.fma(half, e.copysign(erf, t), half)
    return e.keep_nan(x, r)


FUNCTIONS = {"exp": exp, "exp2": exp2, "expm1": expm1, "log": log, "log2": log2, "log1p": log1p,
             "tanh": tanh, "sigmoid": sigmoid, "erf": erf, "silu": silu, "gelu": gelu}


def emit(b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    """Inline float32 ``name(x)`` (scalar or vector ``x``)."""
    return FUNCTIONS[name](b, x)
