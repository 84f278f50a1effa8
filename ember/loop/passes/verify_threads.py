"""The checks a GPU kernel's loop program must pass before code is made for it.

A GPU runs a kernel as a grid of blocks of threads: the loops bound to ``block_*`` are the
grid, those bound to ``thread_*`` a block's threads, and every iteration of them runs at once.
So the program must say one launch shape and keep to what one block may hold:

- ``block_*`` loops enclose everything else (the grid is fixed at launch), each kind once on a
  path; ``thread_*`` loops have constant extents, one extent per kind in the whole kernel (the
  block's shape), whose product is at most the target's threads per block;
- ``shared`` buffers are allocated per block (outside the thread loops), their bytes together
  within the target's shared memory per block;
- every thread of a block must reach each ``barrier()`` (else the block hangs): none under a
  condition, or in a loop whose trip count, depends on a thread index, and none outside the
  thread loops; no ``parallel`` loop (a CPU's threads) in a GPU kernel;
- a warp's ``mma_sync`` likewise (its lanes execute it together), on ``local`` fragments, in a
  block of whole warps.

:func:`verify_threads` raises a :class:`~ember.errors.LoweringError` naming the kernel, the loop
or buffer at fault and the limit.
"""
from __future__ import annotations

from ...errors import LoweringError
from .. import dtype as dt
from ..expr import IntImm, Var
from ..stmt import Allocate, Barrier, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, THREAD_KINDS, WarpMma
from ..visit import walk

__all__ = ["has_barrier", "launch_shape", "verify_threads"]


def _uses(expr, names: set) -> bool:
    return any(isinstance(n, Var) and n.name in names for n in walk(expr))


def verify_threads(func: PrimFunc, max_threads: int = 1024, max_shared_bytes: int = 48 * 1024) -> dict:
    """Check ``func`` as a GPU kernel (see the module doc); its launch shape (:func:`launch_shape`)."""
    where = f"kernel {func.name!r}"
    extents: dict = {}  # thread kind -> its extent
    shared = [0]

    def fail(msg: str):
        raise LoweringError(f"{where}: {msg}")

    def visit(s, bound: tuple, threads: frozenset, inside_threads: bool):
        # bound: the kinds enclosing s; threads: names of the thread-index variables in scope
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                visit(x, bound, threads, inside_threads)
        elif isinstance(s, For):
            if s.kind == "parallel":
                fail(f"loop {s.var.name!r} is parallel (a CPU's threads); bind it to block_* or thread_* instead")
            if s.kind in THREAD_KINDS:
                if s.kind in bound:
                    fail(f"loop {s.var.name!r} is bound to {s.kind} inside another loop bound to it")
                if s.kind.startswith("block_"):
                    if any(b not in THREAD_KINDS or not b.startswith("block_") for b in bound):
                        fail(f"loop {s.var.name!r} (bound to {s.kind}) is inside other loops: the grid's "
                             f"loops must be outermost")
                else:
                    if not isinstance(s.extent, IntImm) or not isinstance(s.min, IntImm) or s.min.value != 0:
                        fail(f"loop {s.var.name!r} (bound to {s.kind}) must run from 0 over a constant extent, "
                             f"not {s.extent}: a block's shape is fixed at launch")
                    n = s.extent.value
                    if extents.setdefault(s.kind, n) != n:
                        fail(f"loops bound to {s.kind} have extents {extents[s.kind]} and {n}: a block has one shape")
                    total = 1
                    for k in set(bound) | {s.kind}:
                        if k.startswith("thread_"):
                            total *= extents[k]
                    if total > max_threads:
                        fail(f"loop {s.var.name!r}: {total} threads a block, over the limit of {max_threads}")
                inner = threads | ({s.var.name} if s.kind.startswith("thread_") else set())
                visit(s.body, bound + (s.kind,), frozenset(inner), inside_threads or s.kind.startswith("thread_"))
            else:
                if _has_grid(s.body):
                    fail(f"loop {s.var.name!r} ({s.kind}) encloses the grid's loops: they must be outermost")
                divergent = _uses(s.min, threads) or _uses(s.extent, threads)
                if divergent and has_barrier(s.body):
                    fail(f"loop {s.var.name!r}: its trip count depends on a thread index and its body has a "
                         f"barrier, which some threads would not reach")
                visit(s.body, bound + (s.kind,), threads, inside_threads)
        elif isinstance(s, IfThenElse):
            if _uses(s.condition, threads) and (has_barrier(s.then_case) or
                                                (s.else_case is not None and has_barrier(s.else_case))):
                fail(f"a barrier under the condition {s.condition}, which depends on a thread index: "
                     f"some threads would not reach it")
            visit(s.then_case, bound, threads, inside_threads)
            if s.else_case is not None:
                visit(s.else_case, bound, threads, inside_threads)
        elif isinstance(s, Allocate):
            b = s.buffer
            if b.scope == "shared":
                if inside_threads:
                    fail(f"shared buffer {b.name!r} is allocated inside a thread loop: shared memory is the "
                         f"block's, allocate it outside the thread_* loops")
                sizes = [d.value if isinstance(d, IntImm) else None for d in b.shape]
                if None in sizes:
                    fail(f"shared buffer {b.name!r} has the symbolic shape {b.shape}: its size must be known")
                n = dt.nbytes(b.dtype)
                for d in sizes:
                    n *= d
                shared[0] += n
                if shared[0] > max_shared_bytes:
                    fail(f"shared buffers take {shared[0]} bytes (with {b.name!r}), over the limit of "
                         f"{max_shared_bytes} a block")
            visit(s.body, bound, threads, inside_threads)
        elif isinstance(s, LetStmt):
            inner = threads | ({s.var.name} if _uses(s.value, threads) else set())
            visit(s.body, bound, frozenset(inner), inside_threads)
        elif isinstance(s, Barrier):
            if not inside_threads:
                fail("a barrier outside the thread_* loops: it synchronizes a block's threads, so it "
                     "belongs inside them")
        elif isinstance(s, WarpMma):
            if not inside_threads:
                fail("mma_sync outside the thread_* loops: a warp's lanes execute it together, so it belongs "
                     "inside them")
            for buf in (s.a, s.b, s.c, s.d):
                if buf.scope != "local":
                    fail(f"mma_sync reads and writes a lane's registers: {buf.name!r} must be a local buffer, "
                         f"not {buf.scope}")

    visit(func.body, (), frozenset(), False)
    if any(isinstance(n, WarpMma) for n in walk(func.body)):
        total = 1
        for n in extents.values():
            total *= n
        if total % 32:
            fail(f"mma_sync needs whole warps: the block's {total} threads are not a multiple of 32")
    return launch_shape(func)


def has_barrier(s) -> bool:
    """Whether statement ``s`` holds a barrier (or a warp's ``mma_sync``, which every lane must
    reach together too)."""
    return any(isinstance(n, (Barrier, WarpMma)) for n in walk(s))


def _has_grid(s) -> bool:
    return any(isinstance(n, For) and n.kind.startswith("block_") for n in walk(s))


def launch_shape(func: PrimFunc) -> dict:
    """``{"grid": {kind: extent}, "block": {kind: extent}}`` of ``func``'s bound loops (an extent
    an expression over its size parameters where symbolic)."""
    grid, block = {}, {}
    for n in walk(func.body):
        if isinstance(n, For) and n.kind in THREAD_KINDS:
            (grid if n.kind.startswith("block_") else block).setdefault(n.kind, n.extent)
    return {"grid": grid, "block": block}
