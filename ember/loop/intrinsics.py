"""Math intrinsics callable from tensor computations and loop programs.

Each intrinsic is a pure function of its arguments. ``FLOAT_UNARY`` take and return one float;
the code generator maps each onto an LLVM intrinsic or a short inline sequence.

``PACKED_DOTS`` are the short dot products that CPUs do in one instruction per lane: each
argument is an int32 *word* holding ``group`` narrow values (two bfloat16, four uint8 or
int8), and the result is the sum of their ``group`` products in the accumulator type. A
product kernel over words (``sum(dot(A_word, B_word))``) is exactly the product over the
narrow values; the code generator turns ``acc + dot(a, b)`` on vectors into ``vdpbf16ps`` or
``vpdpbusd`` where the CPU has them, and into plain widened arithmetic elsewhere.
"""
from __future__ import annotations

from ..errors import DTypeError
from . import dtype as dt
from .expr import Call, Expr, as_expr, _coerce

FLOAT_UNARY = ("exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "erf",
               "sigmoid", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
               "acosh", "atanh", "floor", "ceil", "round", "trunc", "reciprocal")
ANY_UNARY = ("abs",)
FLOAT_BINARY = ("pow", "atan2")
TERNARY = ("fma",)
PREDICATES = ("isnan", "isinf")
# name -> (A's element type, B's element type, values per int32 word, result type)
# dot_u8i7x4 is dot_u8i8x4 for weights whose pairs (values 0-1 and 2-3 of a word) never sum
# past int16 with any uint8 data (|positive part| and |negative part| of each pair <= 128: 7-bit
# weights always): exact on AVX2's pmaddubsw, which saturates the pair sums to int16
# dot_i16x2 is pmaddwd: int8 products on CPUs without VNNI, the data widened to int16 by its
# producer and the weights at compile time (exact for any int8 weights)
PACKED_DOTS = {"dot_bf16x2": ("bfloat16", "bfloat16", 2, "float32"),
               "dot_u8i8x4": ("uint8", "int8", 4, "int32"),
               "dot_u8i7x4": ("uint8", "int8", 4, "int32"),
               "dot_i16x2": ("int16", "int16", 2, "int32")}
WORD = "int32"
ALL = FLOAT_UNARY + ANY_UNARY + FLOAT_BINARY + TERNARY + PREDICATES + tuple(PACKED_DOTS)


def call(name: str, *args) -> Expr:
    """Build a call of intrinsic ``name`` after checking its arity and dtypes."""
    if name not in ALL:
        raise DTypeError(f"unknown intrinsic {name!r}; known: {', '.join(ALL)}")
    if name in PACKED_DOTS:
        return packed_dot(name, *args)
    xs = [as_expr(a) for a in args]
    if len(xs) > 1:
        first = next((x for x in args if isinstance(x, Expr)), xs[0])
        xs = [as_expr(a, dt.element(first.dtype)) for a in args]
        for i in range(1, len(xs)):
            xs[0], xs[i] = _coerce(xs[0], xs[i])
    want = 1 if name in FLOAT_UNARY + ANY_UNARY + PREDICATES else 2 if name in FLOAT_BINARY else 3
    if len(xs) != want:
        raise DTypeError(f"{name} takes {want} argument(s), got {len(xs)}")
    if name not in ANY_UNARY and not dt.is_float(xs[0].dtype):
        raise DTypeError(f"{name} needs a float argument, got {xs[0].dtype}: cast it first")
    out = dt.with_lanes("bool", dt.lanes(xs[0].dtype)) if name in PREDICATES else xs[0].dtype
    return Call(out, name, tuple(xs))


def packed_dot(name: str, a, b) -> Expr:
    """``name`` (a key of ``PACKED_DOTS``) of two int32 words: the sum of the products of the
    narrow values they hold, lowest bits first."""
    if name not in PACKED_DOTS:
        raise DTypeError(f"unknown packed dot {name!r}; known: {', '.join(PACKED_DOTS)}")
    xs = [as_expr(x, WORD) for x in (a, b)]
    for x in xs:
        if dt.element(x.dtype) != WORD:
            raise DTypeError(f"{name} takes {WORD} words (each holding {PACKED_DOTS[name][2]} "
                             f"{PACKED_DOTS[name][0]} values), got {x.dtype}")
    xs[0], xs[1] = _coerce(xs[0], xs[1])
    return Call(dt.with_lanes(PACKED_DOTS[name][3], dt.lanes(xs[0].dtype)), name, tuple(xs))


def _unary(name):
    def f(x):
        return call(name, x)
    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}``."
    return f


exp = _unary("exp"); exp2 = _unary("exp2"); log = _unary("log"); log2 = _unary("log2")
log1p = _unary("log1p"); expm1 = _unary("expm1"); sqrt = _unary("sqrt"); rsqrt = _unary("rsqrt")
tanh = _unary("tanh"); erf = _unary("erf"); sigmoid = _unary("sigmoid"); sin = _unary("sin")
cos = _unary("cos"); tan = _unary("tan"); asin = _unary("asin"); acos = _unary("acos")
atan = _unary("atan"); sinh = _unary("sinh"); cosh = _unary("cosh"); asinh = _unary("asinh")
acosh = _unary("acosh"); atanh = _unary("atanh"); floor = _unary("floor"); ceil = _unary("ceil")
round = _unary("round"); trunc = _unary("trunc"); abs = _unary("abs"); isnan = _unary("isnan")
isinf = _unary("isinf"); reciprocal = _unary("reciprocal")


def pow(x, y):
    return call("pow", x, y)


def atan2(y, x):
    return call("atan2", y, x)


def fma(a, b, c):
    return call("fma", a, b, c)


# --- profiling: calls with effects --------------------------------------------------------
# Not pure, so kept out of ALL (passes that move or merge pure calls must not see them as such);
# only the loop instrumentation (``passes/instrument.py``) inserts them, after the loop passes.
CYCLE_TYPE = "int64"  # differences of the raw counter wrap correctly whatever its signedness
RECORD_TYPE = "int32"  # profile_record is evaluated for its effect; its value is always 0
EFFECTS = ("cycle_counter", "profile_record")


def cycle_counter() -> Expr:
    """The CPU's cycle counter now (``llvm.readcyclecounter``: rdtsc on x86; the virtual counter
    on AArch64). Only differences of two reads mean anything."""
    return Call(CYCLE_TYPE, "cycle_counter", ())


def profile_record(site, start, end) -> Expr:
    """Count one execution of instrumentation site ``site`` that took ``end - start`` cycles in
    the kernel's per-thread profile counters (see ``ember.codegen.llvm.profile``)."""
    xs = tuple(as_expr(x, CYCLE_TYPE) for x in (site, start, end))
    for x in xs:
        if x.dtype != CYCLE_TYPE:
            raise DTypeError(f"profile_record takes {CYCLE_TYPE} arguments, got {x.dtype}")
    return Call(RECORD_TYPE, "profile_record", xs)


def effect_call(name: str, *args) -> Expr:
    """Build the effect call ``name`` (one of ``EFFECTS``) from its arguments."""
    if name == "cycle_counter":
        if args:
            raise DTypeError("cycle_counter takes no arguments")
        return cycle_counter()
    if name == "profile_record":
        if len(args) != 3:
            raise DTypeError(f"profile_record takes 3 arguments (site, start, end), got {len(args)}")
        return profile_record(*args)
    raise DTypeError(f"unknown effect call {name!r}; known: {', '.join(EFFECTS)}")
