"""Parallel loops: outline the body and run it on libgomp's thread team.

``for i in parallel(min, extent): body`` becomes::

    int64 pieces_taken[MAX_THREADS * 8];         // a counter per thread's share, a cache line each
    memset(pieces_taken, 0, min(omp_get_max_threads(), MAX_THREADS) * 64);
    struct {captured pointers and values; pieces_taken; min; extent} data = {...};
    GOMP_parallel(trampoline, &data, 0, 0);      // 0 threads: OMP_NUM_THREADS or all cores

The trampoline gives each thread (``omp_get_thread_num``/``omp_get_num_threads``) one
contiguous share of ``[0, extent)``, in pieces a thread that finishes early may take over (see
:func:`_share_out`), and calls a separate *body* function per piece, whose
buffer parameters are ``noalias`` (when LLVM inlines it into the trampoline it keeps that
knowledge as scoped alias metadata, so the body still vectorizes without runtime checks).
Parallel loops nested inside run serially, and a loop with less static work than waking the
team costs (:data:`SERIAL_WORK`) calls its body on the calling thread.
"""
from __future__ import annotations

from llvmlite import ir

from ...loop.expr import Load, Var
from ...loop.stmt import Allocate, For, Store
from ...loop.visit import walk
from . import signs
from . import types as T
from .intrinsics import declare, llvm_intrinsic


def _uses(loop: For) -> tuple[list, list]:
    """Variables (also those inside buffer shapes) and buffers that ``loop`` refers to."""
    vars_, bufs = {}, {}
    for n in walk(loop):
        if isinstance(n, Var):
            vars_[n] = None
        elif isinstance(n, (Load, Store, Allocate)):
            buf = n.buffer
            if buf not in bufs:
                bufs[buf] = None
                for e in list(buf.shape) + list(buf.strides or ()):
                    for v in walk(e):
                        if isinstance(v, Var):
                            vars_[v] = None
    return list(vars_), list(bufs)


def emit_parallel_for(e, loop: For) -> None:
    """Emit ``loop`` (kind 'parallel') from the emitter ``e`` of the enclosing kernel."""
    from .codegen import FunctionEmitter  # codegen imports this module

    b, module = e.builder, e.module
    used_vars, used_bufs = _uses(loop)
    allocated = {n.buffer for n in walk(loop) if isinstance(n, Allocate)}
    allocated_names = {buf.name for buf in allocated}

    # Captured state: distinct data pointers, and every bound variable the body reads.
    ptrs, ptr_index, buf_param = [], {}, {}
    for buf in used_bufs:
        if buf in allocated:
            continue
        if buf not in e.buffers and buf.name not in e.buffers_by_name and buf.name in allocated_names:
            continue  # a re-declaration of a buffer allocated inside the loop
        ptr = e.buffer_ptr(buf)
        if id(ptr) not in ptr_index:
            ptr_index[id(ptr)] = len(ptrs)
            ptrs.append((ptr, buf))
        buf_param[buf] = ptr_index[id(ptr)]
    values = [(v, e.vars[v]) for v in used_vars if v in e.vars and v != loop.var]

    var_t = T.reg_type(loop.var.dtype)
    lo = e._as_var_type(loop.min, loop.var)
    extent = e._as_var_type(loop.extent, loop.var)
    lo64 = T.cast(b, lo, loop.var.dtype, "int64")
    ext64 = T.cast(b, extent, loop.var.dtype, "int64")

    k = e.n_outlined
    e.n_outlined += 1
    base = f"{e.func_name}.par{k}"

    # The body function: noalias pointers, captured values, then [lo, hi) of this thread.
    body_args = [T.PTR] * len(ptrs) + [v.type for _, v in values] + [var_t, var_t]
    body_fn = ir.Function(module, ir.FunctionType(ir.VoidType(), body_args), base + ".body")
    body_fn.linkage = "internal"
    body_fn.attributes.add("nounwind")
    sub = FunctionEmitter(module, body_fn, e.func_name, e.fastmath, in_parallel=True,
                          returns_status=False, features=e.features)
    sub.profile = e.profile  # profile_record in the body updates the same kernel's counters
    for (ptr, buf), arg in zip(ptrs, body_fn.args):
        arg.add_attribute("noalias")
        arg.attributes.align = max(buf.align, T.elem_align(buf.dtype))
    for buf, i in buf_param.items():
        sub.buffers[buf] = body_fn.args[i]
        sub.buffers_by_name.setdefault(buf.name, body_fn.args[i])
    for (var, _), arg in zip(values, body_fn.args[len(ptrs):]):
        sub.vars[var] = arg
    t_lo, t_hi = body_fn.args[-2], body_fn.args[-1]
    sub.known = dict(e.known)
    sub.serial_loop(loop.var, t_lo, t_hi, lambda: sub.stmt(loop.body), lower=signs.lower_bound(loop.min, e.known))
    sub.finish()

    # The trampoline libgomp calls on every thread.
    fields = [T.PTR] * len(ptrs) + [v.type for _, v in values] + [T.PTR, T.I64, T.I64]
    struct_t = ir.LiteralStructType(fields)
    tramp = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR]), base)
    tramp.linkage = "internal"
    tramp.attributes.add("nounwind")
    tb = ir.IRBuilder(tramp.append_basic_block("entry"))
    data = tramp.args[0]
    loaded = []
    for i, ft in enumerate(fields):
        p = tb.gep(data, [ir.Constant(T.I32, 0), ir.Constant(T.I32, i)], inbounds=True,
                   source_etype=struct_t)
        loaded.append(tb.load(p, typ=ft))
    counters, t_min, t_ext = loaded[-3:]
    tid = tb.sext(tb.call(declare(module, "omp_get_thread_num", T.I32, []), []), T.I64)
    nt = tb.sext(tb.call(declare(module, "omp_get_num_threads", T.I32, []), []), T.I64)
    _share_out(tb, body_fn, loaded[:-3], loop.var.dtype, t_min, t_ext, tid, nt, counters)
    tb.ret_void()

    # The call site: fill the struct (a stack slot in the entry block) and start the team; or,
    # for less work than waking the team costs, call the body on this thread
    work = static_work(loop.body)
    with b.if_then(b.icmp_signed(">", ext64, ir.Constant(T.I64, 0))):
        if work is not None and work < SERIAL_WORK:
            small = b.icmp_signed("<", ext64, ir.Constant(T.I64, -(-SERIAL_WORK // max(work, 1))))
            with b.if_else(small) as (alone, team):
                with alone:
                    b.call(body_fn, [p for p, _ in ptrs] + [v for _, v in values] + [lo, b.add(lo, extent)])
                with team:
                    _launch(e, b, module, struct_t, base, tramp, ptrs, values, lo64, ext64)
        else:
            _launch(e, b, module, struct_t, base, tramp, ptrs, values, lo64, ext64)


def _launch(e, b, module, struct_t, base: str, tramp, ptrs: list, values: list, lo64, ext64) -> None:
    """Fill the loop's struct (a stack slot in the entry block) and run ``tramp`` on the team."""
    slot = e.entry_alloca(struct_t, 8, base + ".data")
    ctr_t = ir.ArrayType(T.I64, MAX_THREADS * COUNTER_STRIDE)
    if e.piece_counters is None:  # (one slot for all of a kernel's parallel loops: they run in turn)
        e.piece_counters = e.entry_alloca(ctr_t, 64, "pieces")
    ctrs = e.piece_counters
    # zero the counters the team will use (a team has at most omp_get_max_threads() threads):
    # on 2 cores 128 bytes a launch, not the whole slot's 4 KB
    team = b.sext(b.call(declare(module, "omp_get_max_threads", T.I32, []), []), T.I64)
    cap = ir.Constant(T.I64, MAX_THREADS)
    team = b.select(b.icmp_signed("<", team, cap), team, cap)
    llvm_intrinsic(b, "memset", [ctrs, ir.Constant(T.I8, 0), b.mul(team, ir.Constant(T.I64, COUNTER_STRIDE * 8)),
                                 ir.Constant(T.I1, 0)], ir.VoidType(), [T.PTR, T.I64])
    for i, v in enumerate([p for p, _ in ptrs] + [v for _, v in values] + [ctrs, lo64, ext64]):
        p = b.gep(slot, [ir.Constant(T.I32, 0), ir.Constant(T.I32, i)], inbounds=True,
                  source_etype=struct_t)
        b.store(v, p)
    gomp = declare(module, "GOMP_parallel", ir.VoidType(), [T.PTR, T.PTR, T.I32, T.I32])
    b.call(gomp, [tramp, slot, ir.Constant(T.I32, 0), ir.Constant(T.I32, 0)])


# A parallel loop whose whole work is below this many element updates (stores, times their
# lanes and the static trips of the loops around them) runs on the calling thread: waking the
# team and joining it costs a few microseconds, about what 16K floats of elementwise work take
# on one core. A Llama decode step (256 wide) 0.68 -> 0.61 ms, a 4-layer BERT of 128 wide
# 0.90x; MobileNetV4, ConvNeXt-atto 1.005x (noise). 64K: decode 0.58 ms but ConvNeXt 1.03x;
# 256K makes GEMVs serial, 1.35x worse.
SERIAL_WORK = 16384


def static_work(stmt) -> "int | None":
    """Element updates one execution of ``stmt`` makes (None when a loop's trip count is not
    static: then the work is taken to be large)."""
    from ...loop import dtype as dt
    from ...loop.expr import IntImm
    from ...loop.stmt import IfThenElse, LetStmt, SeqStmt

    if isinstance(stmt, Store):
        return dt.lanes(stmt.value.dtype)
    if isinstance(stmt, For):
        if not isinstance(stmt.extent, IntImm):
            return None
        w = static_work(stmt.body)
        return None if w is None else stmt.extent.value * w
    if isinstance(stmt, SeqStmt):
        total = 0
        for c in stmt.stmts:
            w = static_work(c)
            if w is None:
                return None
            total += w
        return total
    if isinstance(stmt, IfThenElse):
        a = static_work(stmt.then_case)
        c = static_work(stmt.else_case) if stmt.else_case is not None else 0
        return None if a is None or c is None else a + c
    if isinstance(stmt, (Allocate, LetStmt)):
        return static_work(stmt.body)
    return 1


MAX_THREADS = 64  # teams up to this size share out their work in pieces; larger ones split it statically
COUNTER_STRIDE = 8  # i64s from one thread's counter to the next: a cache line each
PIECES = 8  # pieces of a thread's share: the grain at which a finished thread takes over work


def _share_out(tb: ir.IRBuilder, body_fn, captured: list, dtype: str, t_min, t_ext, tid, nt, counters) -> None:
    """Thread ``tid``'s part of ``[0, t_ext)``: first its own contiguous share (``ceil(ext /
    nt)`` iterations, what a static split gives it, so that consecutive kernels' threads still
    touch the parts they wrote), in :data:`PIECES` pieces taken in order through an atomic
    counter per share; then the pieces still left in the other threads' shares. On a shared
    machine a core slowed down for a while (another guest, an interrupt) would otherwise hold
    up the whole kernel at its end with the other cores idle; they take over its remaining
    pieces instead (a 2-vCPU VM, one process, alternating: ResNet-50 1.01-1.06x, ResNet-18
    1.03x, EfficientNet-B0 and MobileNetV3-small within noise; one 3x3 conv layer's median run
    ~1.45x)."""
    one, zero = ir.Constant(T.I64, 1), ir.Constant(T.I64, 0)
    chunk = tb.sdiv(tb.add(t_ext, tb.sub(nt, one)), nt)
    piece = tb.sdiv(tb.add(chunk, ir.Constant(T.I64, PIECES - 1)), ir.Constant(T.I64, PIECES))
    pieces = tb.sdiv(tb.add(chunk, tb.sub(piece, one)), piece)

    # one call site of the body (LLVM inlines it once): a team too large for the counters takes
    # the plain split, each thread its own share through a counter of its own on its stack
    fn = tb.function
    own = tb.alloca(T.I64, name="own_pieces")
    tb.store(zero, own)
    alone = tb.icmp_signed(">", nt, ir.Constant(T.I64, MAX_THREADS))
    shares = tb.select(alone, one, nt)

    # for s in [0, shares): v = (tid + s) % nt; while (i = counter(v)++) < pieces: run piece i of v
    outer, take, run_bb, next_bb, done_bb = (fn.append_basic_block(n)
                                             for n in ("share", "take", "piece", "next_share", "done"))
    entry = tb.block
    tb.branch(outer)
    tb.position_at_end(outer)
    s_phi = tb.phi(T.I64, "s")
    s_phi.add_incoming(zero, entry)
    tb.cbranch(tb.icmp_signed("<", s_phi, shares), take, done_bb)
    tb.position_at_end(take)
    v = tb.srem(tb.add(tid, s_phi), nt)
    shared = tb.gep(counters, [tb.mul(v, ir.Constant(T.I64, COUNTER_STRIDE))], inbounds=True, source_etype=T.I64)
    i = tb.atomic_rmw("add", tb.select(alone, own, shared), one, "monotonic")
    tb.cbranch(tb.icmp_signed("<", i, pieces), run_bb, next_bb)
    tb.position_at_end(run_bb)
    share_end = tb.add(tb.mul(v, chunk), chunk)
    share_end = tb.select(tb.icmp_signed("<", share_end, t_ext), share_end, t_ext)
    lo = tb.add(tb.mul(v, chunk), tb.mul(i, piece))
    hi = tb.add(lo, piece)
    hi = tb.select(tb.icmp_signed("<", hi, share_end), hi, share_end)
    with tb.if_then(tb.icmp_signed("<", lo, hi)):
        tb.call(body_fn, captured + [T.cast(tb, tb.add(t_min, x), "int64", dtype) for x in (lo, hi)])
    tb.branch(take)
    tb.position_at_end(next_bb)
    s_phi.add_incoming(tb.add(s_phi, one), next_bb)
    tb.branch(outer)
    tb.position_at_end(done_bb)
