"""A GPU kernel's loop program run on the CPU: blocks and threads as loops, split at barriers.

CI has no GPU, but the tiling, indexing and shared-memory logic of a GPU schedule can still be
checked against numpy if its program runs on a CPU, the way POCL runs OpenCL kernels: the grid's
loops become serial loops (one block after another), and a block's threads run one after
another between two barriers. A barrier inside the thread loops splits them there -- every
thread runs the part before it, then every thread the part after -- which is what the barrier
guarantees on the GPU and all the program may assume. A barrier inside a loop or a condition
that every thread takes alike (:mod:`.verify_threads` checks that) moves the loop or the
condition out of the thread loops, around the split parts. A thread's own scratch (a ``local``
buffer inside the thread loops) that lives across a barrier gets one copy per thread; a value
bound by ``let`` across one is recomputed where it is used.

A warp's tensor-core product (``mma_sync``) reads the other lanes' fragments, so first it becomes
what a block can do without tensor cores: every thread puts its A and B fragments in shared
scratch, a barrier, each thread computes its own four values of D from the scratch (the lane
layout of :class:`~ember.loop.stmt.WarpMma`), another barrier; then the barriers split as above.

Only ``thread_*`` and ``block_*`` loops change; the result is an ordinary CPU loop program that
``ember.build`` compiles.
"""
from __future__ import annotations

from ...errors import LoweringError
from ..expr import Cast, IntImm, Load, Var, unflatten
from ..stmt import Allocate, Barrier, Buffer, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Store, THREAD_KINDS, WarpMma
from ..visit import rewrite, substitute, walk
from .verify_threads import has_barrier

__all__ = ["threads_on_cpu"]


def threads_on_cpu(func: PrimFunc) -> PrimFunc:
    """``func`` (a GPU kernel, see :mod:`.verify_threads`) as a CPU loop program."""
    return func.replace(name=func.name, body=_cpu(_mma_through_shared(func.body)))


def _mma_through_shared(body):
    """Each ``mma_sync`` as threads exchanging fragments through shared scratch (module doc)."""
    def nest(s):
        if not any(isinstance(n, WarpMma) for n in walk(s)):
            return s
        loops, inner = [], s
        while isinstance(inner, For) and inner.kind.startswith("thread_"):
            loops.append(inner)
            inner = inner.body
        ext = {lp.kind: lp.extent for lp in loops}
        var = {lp.kind: lp.var for lp in loops}
        one, zero = IntImm(1), IntImm(0)
        tid = var.get("thread_x", zero) + ext.get("thread_x", one) * (
            var.get("thread_y", zero) + ext.get("thread_y", one) * var.get("thread_z", zero))
        count = ext.get("thread_x", one) * ext.get("thread_y", one) * ext.get("thread_z", one)
        half = next(n for n in walk(s) if isinstance(n, WarpMma)).a.dtype
        sa = Buffer("mma_a_scratch", (count, 8), half, scope="shared")
        sb = Buffer("mma_b_scratch", (count, 4), half, scope="shared")
        lowered = rewrite(inner, lambda n: _mma_steps(n, tid, sa, sb) if isinstance(n, WarpMma) else None)
        for lp in reversed(loops):
            lowered = For(lp.var, lp.min, lp.extent, lp.kind, lowered)
        return Allocate(sa, Allocate(sb, lowered))

    def down(s):  # (outermost thread loops first: the scratch is the whole block's)
        if isinstance(s, For):
            return nest(s) if s.kind.startswith("thread_") else s.replace(body=down(s.body))
        if isinstance(s, SeqStmt):
            return SeqStmt(tuple(down(x) for x in s.stmts))
        if isinstance(s, IfThenElse):
            return IfThenElse(s.condition, down(s.then_case), None if s.else_case is None else down(s.else_case))
        if isinstance(s, (Allocate, LetStmt)):
            return s.replace(body=down(s.body))
        return s
    if not any(isinstance(n, WarpMma) for n in walk(body)):
        return body
    return down(body)


def _mma_steps(m: WarpMma, tid, sa: Buffer, sb: Buffer):
    e, k = Var("mma_e"), Var("mma_k")
    put = SeqStmt((For(e, IntImm(0), IntImm(8), "serial", Store(sa, Load(m.a, unflatten(m.a_offset + e, m.a.shape)), (tid, e))),
                   For(e, IntImm(0), IntImm(4), "serial", Store(sb, Load(m.b, unflatten(m.b_offset + e, m.b.shape)), (tid, e)))))
    lane = tid % 32
    base, g, t = tid - lane, lane // 4, lane % 4
    r, n = g + (e // 2) * 8, t * 2 + e % 2
    la, ea = (r % 8) * 4 + (k % 8) // 2, ((r // 8) + (k // 8) * 2) * 2 + k % 2
    lb, eb = n * 4 + (k % 8) // 2, (k // 8) * 2 + k % 2
    acc = Buffer("mma_acc", (1,), "float32", scope="local")
    product = Cast("float32", Load(sa, (base + la, ea))) * Cast("float32", Load(sb, (base + lb, eb)))
    step = Store(acc, Load(acc, (IntImm(0),)) + product, (IntImm(0),))
    each = Allocate(acc, SeqStmt((Store(acc, Load(m.c, unflatten(m.c_offset + e, m.c.shape)), (IntImm(0),)),
                                  For(k, IntImm(0), IntImm(16), "serial", step),
                                  Store(m.d, Load(acc, (IntImm(0),)), unflatten(m.d_offset + e, m.d.shape)))))
    return SeqStmt((put, Barrier(), For(e, IntImm(0), IntImm(4), "serial", each), Barrier()))


def _seq(stmts: list):
    stmts = [s for s in stmts if s is not None]
    if not stmts:
        return SeqStmt(())
    return stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))


def _cpu(s):
    """``s`` with its grid loops serial and each nest of thread loops run thread by thread."""
    if isinstance(s, For):
        if s.kind.startswith("thread_"):
            loops, body = [], s
            while isinstance(body, For) and body.kind.startswith("thread_"):
                loops.append(body)
                body = body.body
            return _seq(_split(_cpu(body), loops))
        kind = "serial" if s.kind in THREAD_KINDS else s.kind
        return For(s.var, s.min, s.extent, kind, _cpu(s.body))
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_cpu(x) for x in s.stmts))
    if isinstance(s, IfThenElse):
        return IfThenElse(s.condition, _cpu(s.then_case), None if s.else_case is None else _cpu(s.else_case))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _cpu(s.body))
    if isinstance(s, LetStmt):
        return LetStmt(s.var, s.value, _cpu(s.body))
    return s


def _threads(s, loops: list):
    """``s`` run by every thread: inside serial copies of the thread loops ``loops``."""
    for lp in reversed(loops):
        s = For(lp.var, lp.min, lp.extent, "serial", s)
    return s


def _split(s, loops: list) -> list:
    """Statements that run ``s`` for every thread of ``loops``, one barrier-free part at a time."""
    if not has_barrier(s):
        return [_threads(s, loops)]
    if isinstance(s, Barrier):
        return []
    if isinstance(s, SeqStmt):
        out, pending = [], []
        for x in s.stmts:
            if has_barrier(x):
                if pending:
                    out.append(_threads(_seq(pending), loops))
                    pending = []
                out += _split(x, loops)
            else:
                pending.append(x)
        if pending:
            out.append(_threads(_seq(pending), loops))
        return out
    if isinstance(s, For):  # (every thread runs it alike: its bounds name no thread index)
        return [For(s.var, s.min, s.extent, s.kind, _seq(_split(s.body, loops)))]
    if isinstance(s, IfThenElse):  # (a condition every thread decides alike)
        other = None if s.else_case is None else _seq(_split(s.else_case, loops))
        return [IfThenElse(s.condition, _seq(_split(s.then_case, loops)), other)]
    if isinstance(s, LetStmt):  # (its value, recomputed in each part that uses it)
        return _split(substitute(s.body, {s.var: s.value}), loops)
    if isinstance(s, Allocate):  # a thread's scratch across a barrier: one copy per thread
        b = s.buffer
        per = Buffer(b.name, tuple(lp.extent for lp in loops) + tuple(b.shape), b.dtype, None,
                     "global" if b.scope == "shared" else b.scope, b.align)
        ids = tuple(lp.var for lp in loops)

        def widen(n):
            if isinstance(n, Load) and n.buffer == b:
                return Load(per, ids + tuple(n.indices), n.predicate)
            if isinstance(n, Store) and n.buffer == b:
                return Store(per, n.value, ids + tuple(n.indices), n.predicate)
            return None
        return [Allocate(per, _seq(_split(rewrite(s.body, widen), loops)))]
    raise LoweringError(f"a barrier inside a {type(s).__name__} statement cannot run on the CPU")
