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

Only ``thread_*`` and ``block_*`` loops change; the result is an ordinary CPU loop program that
``ember.build`` compiles.
"""
from __future__ import annotations

from ...errors import LoweringError
from ..expr import Load
from ..stmt import Allocate, Barrier, Buffer, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Store, THREAD_KINDS
from ..visit import rewrite, substitute
from .verify_threads import has_barrier

__all__ = ["threads_on_cpu"]


def threads_on_cpu(func: PrimFunc) -> PrimFunc:
    """``func`` (a GPU kernel, see :mod:`.verify_threads`) as a CPU loop program."""
    return func.replace(name=func.name, body=_cpu(func.body))


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
