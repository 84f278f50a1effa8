"""Lowering of math intrinsic calls (``exp``, ``tanh``, ``fma``, ...) to LLVM.

float32 (and so float16/bfloat16, which are computed in float32 and rounded back, like numpy and
ml_dtypes) ``exp``, ``exp2``, ``expm1``, ``log``, ``log2``, ``log1p``, ``tanh``, ``sigmoid`` and
``erf`` are emitted inline as branch-free polynomial code (:mod:`.vmath`), which vectorizes;
LLVM would otherwise turn a vector ``llvm.exp`` into one ``expf`` call per lane.

Other functions LLVM knows (``llvm.sqrt``, ``llvm.sin``, ...) and all of them for float64 become
LLVM intrinsics, which the backend turns into instructions or libm calls; the rest call libm
directly (``tanhf`` for float32, ``tanh`` for float64), one lane at a time for vectors.
"""
from __future__ import annotations

from llvmlite import ir

from ...errors import CompileError
from ...loop import dtype as dt
from . import types as T
from . import vmath

# Ember name -> LLVM intrinsic base name. ``round`` rounds half to even, like numpy.
LLVM_UNARY = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
              "floor": "floor", "ceil": "ceil", "round": "roundeven", "trunc": "trunc",
              "sin": "sin", "cos": "cos"}
LIBM_UNARY = ("log1p", "expm1", "tanh", "erf", "tan", "asin", "acos", "atan", "sinh", "cosh",
              "asinh", "acosh", "atanh")


def type_suffix(t: ir.Type) -> str:
    """The overload suffix LLVM mangles intrinsic names with: ``f32``, ``v8f32``, ``p0``."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):
        return "p0"
    raise CompileError(f"no intrinsic suffix for LLVM type {t}")


def declare(module: ir.Module, name: str, ret: ir.Type, args: list) -> ir.Function:
    """The function ``name`` in ``module``, declared on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


def llvm_intrinsic(b: ir.IRBuilder, base: str, args: list, ret: ir.Type | None = None,
                   overload: list | None = None) -> ir.Value:
    """Call ``llvm.<base>.<suffixes>`` overloaded on the types in ``overload`` (default: arg 0)."""
    types = overload if overload is not None else [args[0].type]
    name = "llvm." + base + "".join("." + type_suffix(t) for t in types)
    fn = declare(b.module, name, ret or args[0].type, [a.type for a in args])
    return b.call(fn, args)


def libm_call(b: ir.IRBuilder, name: str, args: list) -> ir.Value:
    """Call libm ``name`` (``f``-suffixed for float32), lane by lane for vectors."""
    t = args[0].type
    elem = t.element if isinstance(t, ir.VectorType) else t
    cname = name + ("f" if isinstance(elem, ir.FloatType) else "")
    fn = declare(b.module, cname, elem, [elem] * len(args))
    if not isinstance(t, ir.VectorType):
        return b.call(fn, args)
    out = ir.Constant(t, ir.Undefined)
    for lane in range(t.count):
        idx = ir.Constant(T.I32, lane)
        r = b.call(fn, [b.extract_element(a, idx) for a in args])
        out = b.insert_element(out, r, idx)
    return out


def emit_call(e, node, args: list) -> ir.Value:
    """Emit intrinsic ``node.name`` applied to the already-emitted ``args``."""
    b = e.builder
    name = node.name
    src = node.args[0].dtype
    elem, lanes = dt.split(src)
    if name == "abs" and not dt.is_float(src):
        x = args[0]
        if dt.is_uint(src) or dt.is_bool(src):
            return x
        neg = b.icmp_signed("<", x, ir.Constant(x.type, None))
        return b.select(neg, b.sub(ir.Constant(x.type, None), x), x)
    xs = [T.widen(b, a, elem) for a in args]
    x = xs[0]
    fm = e.fastmath
    if name in ("isnan", "isinf"):
        if name == "isnan":
            return b.fcmp_unordered("uno", x, x)
        inf = T.const(dt.with_lanes(T.compute_type(elem), lanes), float("inf"))
        return b.fcmp_ordered("==", llvm_intrinsic(b, "fabs", [x]), inf)
    one = T.const(dt.with_lanes(T.compute_type(elem), lanes), 1.0)
    if name in vmath.FUNCTIONS and vmath.is_f32(x.type):
        r = vmath.emit(b, name, x)
    elif name in LLVM_UNARY:
        r = llvm_intrinsic(b, LLVM_UNARY[name], [x])
    elif name in LIBM_UNARY:
        r = libm_call(b, name, [x])
    elif name == "abs":
        r = llvm_intrinsic(b, "fabs", [x])
    elif name == "rsqrt":
        r = b.fdiv(one, llvm_intrinsic(b, "sqrt", [x]), flags=fm)
    elif name == "reciprocal":
        r = b.fdiv(one, x, flags=fm)
    elif name == "sigmoid":
        # 1 / (1 + exp(-x)): exp overflows to inf for very negative x, giving exactly 0.
        ex = llvm_intrinsic(b, "exp", [b.fneg(x, flags=fm)])
        r = b.fdiv(one, b.fadd(one, ex, flags=fm), flags=fm)
    elif name == "pow":
        r = llvm_intrinsic(b, "pow", xs)
    elif name == "atan2":
        r = libm_call(b, "atan2", xs)
    elif name == "fma":
        r = llvm_intrinsic(b, "fma", xs)
    else:
        raise CompileError(f"kernel {e.func_name!r}: intrinsic {name!r} has no LLVM lowering")
    return T.narrow(b, r, elem)
