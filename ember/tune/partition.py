"""Which part of its output each thread of a kernel writes: a schedule's partition of the work.

A parallel loop's iterations are split into one contiguous share per thread (see
:mod:`ember.codegen.llvm.parallel`; a thread that finishes first takes over pieces of a slower
one's, so this is the partition of a run without such delays), so the loop program says, per
thread, the range of every output dimension that thread stores to. Two schedules with the same
ranges leave the output in the same cores' caches; the next kernel reads it where it was
written.

Why the tuner cares: a candidate is timed alone, reading inputs that its own threads brought
into their caches the run before. In the model its inputs were just written by the kernel
before it, each part by the core that computed it. A candidate whose threads split the work
another way than its default (rows instead of channel blocks) reads much of its input from the
other core's cache -- nearly free where the cores share an L3, but across chiplets (and on a
VM whose vCPUs the host places apart) each such line crosses the fabric. Last measured on
EfficientNet-B0 (its tuned kernels timed in the model with the two vCPUs on different L3s):
10 of the 11 tuned kernels that split their output differently from their default were slower
there than the default, against 10 of the 21 that split it the same way.
"""
from __future__ import annotations

from typing import Optional

from ..loop.arith import const_bounds
from ..loop.stmt import Allocate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Store

__all__ = ["output_partition"]


def _const(e) -> Optional[int]:
    v = getattr(e, "value", None)
    return int(v) if isinstance(v, int) else None


def output_partition(func: PrimFunc, threads: int) -> Optional[tuple]:
    """Per dimension of ``func``'s output (its last parameter), how ``threads`` threads split
    it: ``None`` where every thread stores to the same range (the dimension is not split),
    else each thread's inclusive ``(lo, hi)``, clipped to the dimension. ``None`` for the
    whole when the kernel does not run in parallel, or when a loop's extent or an index is
    not a known constant (a symbolic shape): nothing to compare."""
    out = func.params[-1] if func.params else None
    shape = [_const(d) for d in getattr(out, "shape", ())]
    if out is None or threads < 2 or any(d is None for d in shape):
        return None
    boxes: dict = {}  # thread -> per-dim [lo, hi]
    unknown = False

    def store(s: Store, ranges: dict, thread: int) -> None:
        nonlocal unknown
        box = boxes.setdefault(thread, [None] * len(s.indices))
        for d, idx in enumerate(s.indices):
            lo, hi = const_bounds(idx, ranges)
            if lo is None or hi is None:
                unknown = True
                return
            lo, hi = max(lo, 0), min(hi, shape[d] - 1)  # (a padded block's columns past the end)
            box[d] = (lo, hi) if box[d] is None else (min(box[d][0], lo), max(box[d][1], hi))

    def visit(s, ranges: dict, thread: Optional[int]) -> None:
        nonlocal unknown
        if isinstance(s, For):
            lo, ext = _const(s.min), _const(s.extent)
            if lo is None or ext is None:
                unknown = True
                return
            if ext <= 0:
                return
            if s.kind == "parallel" and thread is None:
                chunk = -(-ext // threads)
                for t in range(threads):
                    a, b = t * chunk, min(ext, (t + 1) * chunk) - 1
                    if a <= b:
                        visit(s.body, {**ranges, s.var: (lo + a, lo + b)}, t)
                return
            visit(s.body, {**ranges, s.var: (lo, lo + ext - 1)}, thread)
        elif isinstance(s, LetStmt):
            visit(s.body, {**ranges, s.var: (s.value, s.value)}, thread)
        elif isinstance(s, SeqStmt):
            for c in s.stmts:
                visit(c, ranges, thread)
        elif isinstance(s, Allocate):
            visit(s.body, ranges, thread)
        elif isinstance(s, IfThenElse):
            visit(s.then_case, ranges, thread)
            if s.else_case is not None:
                visit(s.else_case, ranges, thread)
        elif isinstance(s, Store) and thread is not None and s.buffer.name == out.name:
            store(s, ranges, thread)

    visit(func.body, {}, None)
    if unknown or len(boxes) < 2:
        return None
    per_thread = [boxes[t] for t in sorted(boxes)]
    dims = []
    for d in range(len(shape)):
        ranges = tuple(b[d] for b in per_thread)
        dims.append(None if len(set(ranges)) == 1 else ranges)
    return tuple(dims)
