"""Loop IR -> LLVM IR (an ``llvmlite.ir.Module``).

Each PrimFunc becomes ``int32_t name(void *buf0, ..., int64_t|double scalar0, ...)`` returning 0
(or -1 when a heap allocation fails). Buffer pointers are ``noalias`` and carry the buffer's
alignment: the runtime checks both promises before calling. The module also gets a constant
``__ember_metadata`` string (JSON, see ``metadata.py``) so a shared library can be loaded and
called with nothing but ctypes.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Optional

from llvmlite import ir

from ...errors import CompileError, EmberError
from ...loop import dtype as dt
from ...loop.expr import (BINARY_OPS, Broadcast, Call, Cast, Expr, FloatImm, FloorDiv, FloorMod, IntImm, Let, Load,
                          Not, Ramp, Select, Var, as_expr)
from ...loop.stmt import (Allocate, Barrier, Buffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, WarpMma,
                          Store)
from ...loop.visit import walk
from . import dot, lane_reduce, memory, ops, parallel, profile, signs, vmath, x86
from . import types as T
from ...loop.intrinsics import EFFECTS, PACKED_DOTS
from .intrinsics import declare, emit_call
from .metadata import add_metadata_global, kernel_metadata


class FunctionEmitter:
    """Emits the statements and expressions of one LLVM function.

    ``vars`` maps loop-IR variables to LLVM values and ``buffers`` maps buffers to data pointers;
    both are scoped with context managers. An outlined parallel body gets its own emitter.
    """

    def __init__(self, module: ir.Module, fn: ir.Function, func_name: str, fastmath: tuple,
                 in_parallel: bool = False, returns_status: bool = True, features: frozenset = frozenset()):
        self.module = module
        self.features = features  # the CPU's (``avx512bf16``, ...): which instructions may be named
        self.fn = fn
        self.func_name = func_name
        self.fastmath = fastmath
        self.in_parallel = in_parallel
        self.returns_status = returns_status
        self.entry = fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(fn.append_basic_block("start"))
        self._entry_builder = ir.IRBuilder(self.entry)
        self.vars: dict = {}
        self.known: dict = {}  # variable -> a lower bound (sizes, loop variables: ``signs``)
        self.buffers: dict = {}
        self.buffers_by_name: dict = {}
        self.n_outlined = 0
        self.piece_counters = None  # (the parallel loops' counters: one stack slot, the loops run one at a time)
        self.profile = None  # the kernel's profile-counter Layout when it is instrumented
        self.profile_slot = None  # (this thread's counter slot, whether it is shared), lazily
        self._index_block = None  # the basic block whose index values _index_values holds
        self._index_values: dict = {}

    # --- environment ------------------------------------------------------------------------
    @contextlib.contextmanager
    def bind(self, var: Var, value: ir.Value, lower: Optional[int] = None):
        old, old_lower = self.vars.get(var), self.known.pop(var, None)
        self.vars[var] = value
        if lower is not None:
            self.known[var] = lower
        self._index_block = None  # (cached index values may name the old binding)
        try:
            yield
        finally:
            self._index_block = None
            self.known.pop(var, None)
            if old_lower is not None:
                self.known[var] = old_lower
            if old is None:
                del self.vars[var]
            else:
                self.vars[var] = old

    @contextlib.contextmanager
    def bind_buffer(self, buf: Buffer, ptr: ir.Value):
        old, old_name = self.buffers.get(buf), self.buffers_by_name.get(buf.name)
        self.buffers[buf] = ptr
        self.buffers_by_name[buf.name] = ptr
        try:
            yield
        finally:
            for d, k, o in ((self.buffers, buf, old), (self.buffers_by_name, buf.name, old_name)):
                if o is None:
                    d.pop(k, None)
                else:
                    d[k] = o

    def buffer_ptr(self, buf: Buffer) -> ir.Value:
        ptr = self.buffers.get(buf)
        if ptr is None:
            # A pass may re-declare a buffer (say, flattened) under the same name: same memory.
            ptr = self.buffers_by_name.get(buf.name)
        if ptr is None:
            raise CompileError(f"kernel {self.func_name!r}: buffer {buf.name!r} is neither a "
                               f"parameter nor allocated here")
        return ptr

    def entry_alloca(self, ty: ir.Type, align: int, name: str = "") -> ir.Value:
        """A stack slot in the entry block, where LLVM's mem2reg/SROA look for them."""
        slot = self._entry_builder.alloca(ty, name=name)
        slot.align = align
        slot.type = T.PTR  # llvmlite types allocas as typed pointers; we address with opaque ones
        return slot

    def check_alloc(self, mem: ir.Value, buf: Buffer) -> None:
        b = self.builder
        with b.if_then(b.icmp_unsigned("==", mem, ir.Constant(T.PTR, None)), likely=False):
            if self.returns_status:
                b.ret(ir.Constant(T.I32, -1))
            else:  # no way to report from a worker thread
                b.call(declare(self.module, "abort", ir.VoidType(), []), [])
                b.unreachable()

    def finish(self) -> None:
        """Terminate the function (return 0) and link the entry block to the code."""
        if self.builder.block.terminator is None:
            if self.returns_status:
                self.builder.ret(ir.Constant(T.I32, 0))
            else:
                self.builder.ret_void()
        self._entry_builder.branch(self.fn.blocks[1])

    # --- expressions ------------------------------------------------------------------------
    def expr(self, node: Expr) -> ir.Value:
        fn = _EXPR.get(type(node))
        if fn is None:
            if isinstance(node, (bool, int, float)):  # hand-built IR: For(i, 0, 10, ...)
                return self.expr(as_expr(node))
            if type(node).__name__ in BINARY_OPS:
                fn = FunctionEmitter._binary
            else:
                raise CompileError(f"kernel {self.func_name!r}: cannot generate code for "
                                   f"{type(node).__name__} expression {node!r}")
        return fn(self, node)

    def index(self, node: Expr) -> ir.Value:
        """An index expression as int64 (scalar or vector). Within a basic block each distinct
        pure index is emitted once: an unrolled register block indexes the same rows and
        columns dozens of times, and emitting each copy through llvmlite (for LLVM to merge
        them again) was a third of the code generator's time."""
        node = as_expr(node)
        block = self.builder.block
        if self._index_block is not block:
            self._index_block, self._index_values = block, {}
        v = self._index_values.get(node)
        if v is not None:
            return v
        v = self.expr(node)
        if dt.element(node.dtype) != "int64":
            v = T.cast(self.builder, v, node.dtype, dt.with_lanes("int64", dt.lanes(node.dtype)))
        if _pure_index(node):
            self._index_values[node] = v
        return v

    def _imm(self, node) -> ir.Value:
        return T.const(node.dtype, node.value)

    def _var(self, node: Var) -> ir.Value:
        v = self.vars.get(node)
        if v is None:
            raise CompileError(f"kernel {self.func_name!r}: variable {node.name!r} ({node.dtype}) "
                               f"is not bound (not a parameter, loop variable or let)")
        return v

    def _binary(self, node) -> ir.Value:
        if dt.is_int(dt.element(node.dtype)) and _pure_index(node):  # (predicates, ramp bases)
            block = self.builder.block
            if self._index_block is not block:
                self._index_block, self._index_values = block, {}
            key = ("expr", node)
            v = self._index_values.get(key)
            if v is None:
                v = self._index_values[key] = self._binary_value(node)
            return v
        return self._binary_value(node)

    def _binary_value(self, node) -> ir.Value:
        y = _silu_operand(node)
        if y is not None:
            return vmath.silu(self.builder, self.expr(y))
        y = _gelu_operand(node)
        if y is not None:
            return vmath.gelu(self.builder, self.expr(y))
        d = _dot_operands(node)
        if d is not None:  # acc + dot(a, b): one instruction where the CPU has it
            acc, call = d
            a, b = (self.expr(x) for x in call.args)
            return dot.emit_dot(self, call.name, self.expr(acc), a, b)
        if _uniform_div(node):
            # a / scale, the scale (a constant or a run-time scalar) the same in every lane: no
            # divider (ops.divide_by_uniform)
            a, c = self.expr(node.a), self.expr(node.b.value)
            r, bad = ops.uniform_reciprocal(self.builder, c)
            lanes = node.b.lanes
            return ops.divide_by_uniform(self.builder, a, T.broadcast(self.builder, c, lanes),
                                         T.broadcast(self.builder, r, lanes), bad)
        a, b = self.expr(node.a), self.expr(node.b)
        la, lb = T.lanes_of(a), T.lanes_of(b)
        if la != lb:  # hand-built IR may mix scalars and vectors; splat the scalar
            a, b = (T.broadcast(self.builder, a, lb), b) if la == 1 else (a, T.broadcast(self.builder, b, la))
        dtype = dt.with_lanes(node.a.dtype, max(la, lb))
        if isinstance(node, (FloorDiv, FloorMod)) and dt.is_int(dt.element(dtype)) \
                and signs.unsigned_divides(node, self.known):
            return self.builder.udiv(a, b) if isinstance(node, FloorDiv) else self.builder.urem(a, b)
        return ops.binary(self, type(node).__name__, a, b, dtype)

    def _not(self, node: Not) -> ir.Value:
        v = self.expr(node.a)
        ones = ir.Constant(v.type.element if isinstance(v.type, ir.VectorType) else v.type, -1)
        if isinstance(v.type, ir.VectorType):
            ones = ir.Constant(v.type, [ones] * v.type.count)
        return self.builder.xor(v, ones)

    def _cast(self, node: Cast) -> ir.Value:
        n_out, n_in = dt.lanes(node.dtype), dt.lanes(node.value.dtype)
        r, de = node.value, dt.element(node.dtype)
        if x86.converts(dt.element(r.dtype), n_in, de, self.features):
            if isinstance(r, Call) and r.name == "round":  # (one instruction rounds and converts)
                out = x86.float_to_int(self.builder, self._round_operand(r), de, self.features, rounding=True)
            else:
                out = x86.float_to_int(self.builder, self.expr(r), de, self.features)
        else:
            out = T.cast(self.builder, self.expr(r), r.dtype, dt.with_lanes(node.dtype, n_in))
        if n_out != n_in and n_in == 1:
            out = T.broadcast(self.builder, out, n_out)
        return out

    def _select(self, node: Select) -> ir.Value:
        c, t, f = self.expr(node.condition), self.expr(node.true_value), self.expr(node.false_value)
        n = max(T.lanes_of(c), T.lanes_of(t), T.lanes_of(f))
        b = self.builder
        t, f = T.broadcast(b, t, n) if T.lanes_of(t) == 1 else t, T.broadcast(b, f, n) if T.lanes_of(f) == 1 else f
        return b.select(c, t, f)

    def _round_operand(self, node: Call) -> ir.Value:
        """What ``round`` call ``node`` rounds: for a quantizer's ``round(x / scale)``, a
        quotient exact where it matters to the rounding, without the checks that matter only
        to the quotient itself (ops.quotient_to_round)."""
        d = node.args[0]
        if not (_uniform_div(d) and dt.element(node.dtype) == "float32"):
            return self.expr(d)
        a, c = self.expr(d.a), self.expr(d.b.value)
        r, bad = ops.uniform_reciprocal(self.builder, c)
        return ops.quotient_to_round(self.builder, a, T.broadcast(self.builder, c, d.b.lanes),
                                     T.broadcast(self.builder, r, d.b.lanes), c, bad)

    def _call(self, node: Call) -> ir.Value:
        if node.name in EFFECTS:  # loop profiling: cycle counter reads and counter updates
            return profile.emit_effect(self, node)
        if node.name in PACKED_DOTS:
            return dot.emit_dot(self, node.name, None, *(self.expr(a) for a in node.args))
        if node.name == "round" and _uniform_div(node.args[0]) and dt.element(node.dtype) == "float32":
            return emit_call(self, node, [self._round_operand(node)])
        return emit_call(self, node, [self.expr(a) for a in node.args])

    def _ramp(self, node: Ramp) -> ir.Value:
        b, n = self.builder, node.lanes
        base = T.broadcast(b, self.expr(node.base), n)
        elem = dt.element(node.base.dtype)
        if isinstance(node.stride, (IntImm, FloatImm)):
            step = T.const(node.dtype, 0)
            step = ir.Constant(step.type, [T.scalar_const(elem, node.stride.value * k) for k in range(n)])
        else:
            iota = ir.Constant(T.reg_type(node.dtype), [T.scalar_const(elem, k) for k in range(n)])
            stride = T.broadcast(b, self.expr(node.stride), n)
            step = b.fmul(stride, iota) if dt.is_float(elem) else b.mul(stride, iota)
        return b.fadd(base, step) if dt.is_float(elem) else b.add(base, step)

    def _broadcast(self, node: Broadcast) -> ir.Value:
        return T.broadcast(self.builder, self.expr(node.value), node.lanes)

    def _let(self, node: Let) -> ir.Value:
        with self.bind(node.var, self.expr(node.value), signs.lower_bound(node.value, self.known)):
            return self.expr(node.body)

    def _load(self, node: Load) -> ir.Value:
        return memory.load(self, node)

    # --- statements -------------------------------------------------------------------------
    def stmt(self, node) -> None:
        fn = _STMT.get(type(node))
        if fn is None:
            raise CompileError(f"kernel {self.func_name!r}: cannot generate code for statement "
                               f"{type(node).__name__}")
        getattr(self, fn.__name__)(node)  # (by name: another target's emitter overrides some)

    def barrier(self, node) -> None:  # (and mma_sync: what only a GPU's block or warp does)
        what = "a warp's tensor-core product (mma_sync)" if isinstance(node, WarpMma) else "a barrier"
        raise CompileError(f"kernel {self.func_name!r}: {what} in a CPU kernel (a GPU kernel runs on the CPU "
                           f"through ember.loop.passes.threads_on_cpu)")

    def warp_mma(self, node: WarpMma) -> None:  # (dispatched by name: the GPU's emitter has its own)
        self.barrier(node)

    def _seq(self, node: SeqStmt) -> None:
        for s in node.stmts:
            self.stmt(s)

    def _evaluate(self, node: Evaluate) -> None:
        self.expr(node.value)

    def _let_stmt(self, node: LetStmt) -> None:
        with self.bind(node.var, self.expr(node.value), signs.lower_bound(node.value, self.known)):
            self.stmt(node.body)

    def _store(self, node: Store) -> None:
        memory.store(self, node)

    def _allocate(self, node: Allocate) -> None:
        memory.allocate(self, node)

    def _if(self, node: IfThenElse) -> None:
        c = self.expr(node.condition)
        if T.lanes_of(c) != 1:
            raise CompileError(f"kernel {self.func_name!r}: if condition must be a scalar bool, "
                               f"got {node.condition.dtype}")
        b = self.builder
        if node.else_case is None:
            with b.if_then(c):
                self.stmt(node.then_case)
            return
        with b.if_else(c) as (then, otherwise):
            with then:
                self.stmt(node.then_case)
            with otherwise:
                self.stmt(node.else_case)

    def _for(self, node: For) -> None:
        if node.kind == "parallel" and not self.in_parallel:
            parallel.emit_parallel_for(self, node)
            return
        if lane_reduce.emit_lane_reduce(self, node):
            return
        # Nested parallel loops, and unroll/vectorize hints that no pass consumed, run serially.
        lo = self._as_var_type(node.min, node.var)
        hi = self.builder.add(lo, self._as_var_type(node.extent, node.var))
        self.serial_loop(node.var, lo, hi, lambda: self.stmt(node.body), unroll=not _register_block(node.body),
                         lower=signs.lower_bound(node.min, self.known))

    def _as_var_type(self, e: Expr, var: Var) -> ir.Value:
        e = as_expr(e, var.dtype)
        v = self.expr(e)
        return T.cast(self.builder, v, e.dtype, var.dtype) if e.dtype != var.dtype else v

    def serial_loop(self, var: Var, lo: ir.Value, hi: ir.Value, body, unroll: bool = True,
                    lower: Optional[int] = None) -> None:
        """``for var in [lo, hi): body()`` as a canonical loop with an induction phi; with
        ``unroll=False`` LLVM is told not to unroll it. ``lower``: a lower bound of ``lo``."""
        b = self.builder
        pre = b.block
        header = b.append_basic_block(f"{var.name}.header")
        loop = b.append_basic_block(f"{var.name}.body")
        exit_ = b.append_basic_block(f"{var.name}.exit")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(lo.type, name=var.name)
        i.add_incoming(lo, pre)
        signed = not dt.is_uint(var.dtype)
        cond = b.icmp_signed("<", i, hi) if signed else b.icmp_unsigned("<", i, hi)
        b.cbranch(cond, loop, exit_)
        b.position_at_end(loop)
        with self.bind(var, i, lower):
            body()
        # i < hi, so i + 1 cannot overflow: nsw/nuw lets LLVM reason about the trip count.
        nxt = b.add(i, ir.Constant(i.type, 1), flags=("nsw",) if signed else ("nuw",))
        i.add_incoming(nxt, b.block)
        latch = b.branch(header)
        if not unroll:
            latch.set_metadata("llvm.loop", _LoopID(self.module, [self.module.add_metadata(
                [ir.MetaDataString(self.module, "llvm.loop.unroll.disable")])]))
        b.position_at_end(exit_)


class _LoopID(ir.values.MDValue):
    """A loop's ID: a distinct metadata node whose first operand is itself, then the loop's
    properties (LLVM's loop-metadata convention, which llvmlite has no constructor for)."""

    def __init__(self, module: ir.Module, properties: list):
        super().__init__(module, properties, name=str(len(module.metadata)))

    def descr(self, buf):
        ops = ", ".join([self.get_reference()] + [p.get_reference() for p in self.operands])
        buf += (f"distinct !{{ {ops} }}", "\n")

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)


def _register_block(body) -> bool:
    """A loop-free body of many vector stores: a register block the schedule unrolled as far
    as the registers allow (a conv's or GEMM's accumulators in one reduction step). LLVM must
    not unroll the loop around it: unrolled, the taps of a conv share their input broadcasts,
    which then live across the taps, and the block spills to the stack (measured: a 12-column
    AVX-512 block at 80% of peak, and speed varying with the stack's address)."""
    stores = 0
    for n in walk(body):
        if isinstance(n, For):
            return False
        stores += isinstance(n, Store) and dt.lanes(n.value.dtype) > 1
    return stores >= 8


@functools.lru_cache(maxsize=4096)
def _pure_index(node: Expr) -> bool:
    """Integer arithmetic over variables and constants only (no load, call or let): its value
    depends on nothing but the variables' bindings."""
    t = type(node)
    if t in (IntImm, Var):
        return True
    if t in (Ramp, Broadcast, Cast):
        return all(_pure_index(c) for c in ((node.base, node.stride) if t is Ramp else
                                            (node.value,)))
    if t.__name__ in BINARY_OPS:
        return _pure_index(node.a) and _pure_index(node.b)
    return False


def _dot_operands(node) -> Optional[tuple]:
    """``(acc, dot call)`` where ``node`` is ``acc + dot(a, b)`` (either order) of a packed dot
    (``ember.loop.intrinsics.PACKED_DOTS``) whose lanes match the accumulator's."""
    if type(node).__name__ != "Add":
        return None
    for acc, c in ((node.a, node.b), (node.b, node.a)):
        if type(c) is Call and c.name in PACKED_DOTS and c.dtype == acc.dtype:
            return acc, c
    return None


def _uniform_div(node) -> bool:
    """A float division by a value the same in every lane (:func:`ops.divide_by_uniform`)."""
    return type(node).__name__ == "Div" and isinstance(node.b, Broadcast) \
        and dt.element(node.dtype) in ("float32", "float64")


def _constant(e) -> Optional[float]:
    """The value of a float immediate, or of a broadcast of one."""
    if type(e) is Broadcast:
        e = e.value
    return e.value if type(e) is FloatImm else None


def _erf_of(f) -> Optional[Call]:
    """The erf call of ``1 + erf(...)`` (either order), else None."""
    if type(f).__name__ != "Add":
        return None
    one, call = (f.a, f.b) if _constant(f.a) == 1.0 else (f.b, f.a)
    return call if _constant(one) == 1.0 and type(call) is Call and call.name == "erf" else None


def _gelu_operand(node) -> Optional[Expr]:
    """``y`` where ``node`` is ``y * (1 + erf(y / sqrt 2)) / 2`` in float32 -- the three factors
    grouped and ordered any way, ``/ sqrt 2`` a product by ``1 / sqrt 2`` or a quotient: how
    ``nn.gelu`` and the exporters' erf GELU write it -- for :func:`.vmath.gelu`."""
    if type(node).__name__ != "Mul" or dt.element(node.dtype) != "float32":
        return None
    y = plus = None
    for outer, inner in ((node.a, node.b), (node.b, node.a)):
        if type(inner).__name__ != "Mul":
            continue
        for u, v in ((inner.a, inner.b), (inner.b, inner.a)):
            # (0.5 * y) * (1 + erf) or (y * (1 + erf)) * 0.5, either way round
            if _constant(u) == 0.5 and _erf_of(outer) is not None:
                y, plus = v, outer
            elif _constant(outer) == 0.5 and _erf_of(u) is not None:
                y, plus = v, u
        if y is not None:
            break
    if y is None:
        return None
    arg = _erf_of(plus).args[0]
    kind = type(arg).__name__
    if kind == "Mul":
        c = _constant(arg.b) if arg.a == y else _constant(arg.a) if arg.b == y else None
        ok = c is not None and abs(c - 0.7071067811865476) < 1e-7
    elif kind == "Div":
        c = _constant(arg.b) if arg.a == y else None
        ok = c is not None and abs(c - 1.4142135623730951) < 2e-7
    else:
        ok = False
    return y if ok else None


def _silu_operand(node) -> Optional[Expr]:
    """``y`` where ``node`` is ``y * sigmoid(y)`` (either order) in float32: a SiLU, one
    quotient in :func:`.vmath.silu` where the sigmoid and the product are two steps."""
    if type(node).__name__ != "Mul" or dt.element(node.dtype) != "float32":
        return None
    for y, s in ((node.a, node.b), (node.b, node.a)):
        if type(s) is Call and s.name == "sigmoid" and s.args[0] == y:
            return y
    return None


_EXPR = {IntImm: FunctionEmitter._imm, FloatImm: FunctionEmitter._imm, Var: FunctionEmitter._var,
         Not: FunctionEmitter._not, Cast: FunctionEmitter._cast, Select: FunctionEmitter._select,
         Call: FunctionEmitter._call, Ramp: FunctionEmitter._ramp, Broadcast: FunctionEmitter._broadcast,
         Let: FunctionEmitter._let, Load: FunctionEmitter._load}
_STMT = {SeqStmt: FunctionEmitter._seq, Evaluate: FunctionEmitter._evaluate,
         LetStmt: FunctionEmitter._let_stmt, Store: FunctionEmitter._store,
         Allocate: FunctionEmitter._allocate, IfThenElse: FunctionEmitter._if, For: FunctionEmitter._for,
         Barrier: FunctionEmitter.barrier, WarpMma: FunctionEmitter.warp_mma}


# --- functions and modules -----------------------------------------------------------------

_MATH = ("exp exp2 expm1 log log2 log10 log1p sqrt cbrt pow floor ceil round roundeven trunc rint "
         "nearbyint fabs fmod remainder copysign fma fmin fmax sin cos tan asin acos atan atan2 "
         "sinh cosh tanh asinh acosh atanh erf erfc sincos ldexp frexp").split()
# Symbols that generated code calls (libm, libc, libgomp, compiler runtime): kernels exported
# under these names would shadow them.
RESERVED_NAMES = frozenset(
    [m + s for m in _MATH for s in ("", "f", "l")]
    + "malloc free aligned_alloc posix_memalign calloc realloc abort memcpy memmove memset "
      "omp_get_thread_num omp_get_num_threads omp_get_max_threads GOMP_parallel main".split())

def scalar_abi_type(dtype: str) -> ir.Type:
    """Scalar parameters travel as int64 or double whatever their dtype (a simple C ABI)."""
    return T.F64 if dt.is_float(dtype) else T.I64


def signature_scalars(func: PrimFunc) -> list:
    """The scalar parameters of the C function: ``func.scalars`` then any shape variable of a
    buffer parameter that is not listed (the runtime infers those from array shapes)."""
    scalars = list(func.scalars)
    for buf in func.buffers:
        for e in list(buf.shape) + list(buf.strides or ()):
            for v in walk(e):
                if isinstance(v, Var) and v not in scalars:
                    scalars.append(v)
    return scalars


def fastmath_flags(func: PrimFunc) -> tuple:
    # Only contraction by default: FMAs form, but results stay reproducible against numpy.
    return ("fast",) if func.attr("fastmath", False) else ("contract",)


def bind_parameters(e: FunctionEmitter, buffers: list, scalars: list, align: bool = True) -> None:
    """Name ``e``'s function arguments after the kernel's buffers (``noalias``; aligned as the
    buffers promise, with ``align``) and size parameters, and bind them in ``e``."""
    args = e.fn.args
    for arg, buf in zip(args[:len(buffers)], buffers):
        arg.name = buf.name
        arg.add_attribute("noalias")
        if align:
            arg.attributes.align = max(buf.align, T.elem_align(buf.dtype))
        e.buffers[buf] = arg
        e.buffers_by_name.setdefault(buf.name, arg)
    for arg, var in zip(args[len(buffers):], scalars):
        arg.name = var.name
        e.vars[var] = T.cast(e.builder, arg, "float64" if dt.is_float(var.dtype) else "int64", var.dtype)


def emit_function(module: ir.Module, func: PrimFunc, features: frozenset = frozenset()) -> dict:
    """Add ``func`` to ``module`` for a CPU with ``features`` (``{"avx512bf16", ...}``: the
    instructions it may name); returns its metadata entry."""
    buffers, scalars = list(func.buffers), signature_scalars(func)
    ftype = ir.FunctionType(T.I32, [T.PTR] * len(buffers) + [scalar_abi_type(v.dtype) for v in scalars])
    fn = ir.Function(module, ftype, func.name)
    fn.attributes.add("nounwind")
    e = FunctionEmitter(module, fn, func.name, fastmath_flags(func), features=features)
    e.profile = profile.layout_of(func)
    if e.profile is not None:
        profile.declare_counters(module, e.profile)
    bind_parameters(e, buffers, scalars)
    e.known = signs.size_bounds(func)
    e.stmt(func.body)
    e.finish()
    return kernel_metadata(func, scalars)


def check_kernel_names(funcs: list) -> None:
    """Kernel names must be unique, not reserved and not a C library function."""
    names = [f.name for f in funcs]
    for f in funcs:
        if not isinstance(f, PrimFunc):
            raise CompileError(f"build() takes PrimFuncs, got {type(f).__name__}")
        if names.count(f.name) > 1:
            raise CompileError(f"two kernels are named {f.name!r}; kernel names must be unique")
        if f.name.startswith("__ember") or not f.name:
            raise CompileError(f"kernel name {f.name!r} is reserved or empty")
        if f.name in RESERVED_NAMES:
            # A kernel named ``exp`` would capture the generated code's own calls to libm's exp.
            raise CompileError(f"kernel name {f.name!r} is a C library function the generated "
                               f"code may call; rename the kernel")


def emit_module(funcs: list, triple: str, data_layout: str, name: str = "module",
                features: frozenset = frozenset()) -> tuple:
    """All ``funcs`` in one LLVM module; returns ``(module, metadata_json)``."""
    check_kernel_names(funcs)
    module = ir.Module(name=name)
    module.triple = triple
    module.data_layout = data_layout
    entries = []
    for f in funcs:
        try:
            entries.append(emit_function(module, f, features))
        except EmberError:
            raise
        except Exception as exc:  # a bug or an unsupported construct: say which kernel
            raise CompileError(f"kernel {f.name!r}: code generation failed: "
                               f"{type(exc).__name__}: {exc}") from exc
    if any(profile.layout_of(f) for f in funcs):
        profile.add_cycle_function(module)
    return module, add_metadata_global(module, entries)
