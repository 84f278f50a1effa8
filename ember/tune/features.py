"""Features of a lowered loop program, what the cost model learns from.

They describe the loop nest, not the op, so what is learned on one model's convolutions
carries to another's: how much work runs in parallel and how evenly it splits over the cores,
how much runs in vectors and in unrolled register blocks, how large the scratch buffers are,
how long the loops around the innermost block are, how many stores a guard predicates. Each
is a float (sizes as log2), a fixed vector of :data:`NAMES`.
"""
from __future__ import annotations

import math

from ..loop.expr import Load
from ..loop.stmt import Allocate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Store
from ..loop.visit import walk

NAMES = (
    "store_iters", "load_iters", "stores", "loops", "depth",
    "parallel_loops", "parallel_extent", "parallel_balance", "iters_per_thread",
    "vector_lanes", "vector_share", "unrolled_block", "unrolled_stmts",
    "reduction_extent", "serial_inner", "alloc_bytes", "alloc_max", "allocs_in_parallel",
    "guarded_stores", "branches", "param_bytes", "param_max", "heavy_depth", "heavy_unroll_share",
)


def _extent(e) -> int:
    v = getattr(e, "value", None)
    return int(v) if isinstance(v, int) else 64  # (a symbolic extent: some typical size)


def _log(x: float) -> float:
    return math.log2(x) if x > 0 else -1.0


def loop_features(func: PrimFunc, cores: int = 1) -> list:
    """The :data:`NAMES` features of ``func`` for a machine of ``cores`` cores."""
    f = dict.fromkeys(NAMES, 0.0)
    stats = {"store_iters": 0.0, "load_iters": 0.0, "vector_iters": 0.0, "heavy": (0.0, None)}
    allocs = []

    def visit(s, loops: tuple, in_parallel: bool):
        if isinstance(s, For):
            ext = _extent(s.extent)
            f["loops"] += 1
            if s.kind == "parallel":
                f["parallel_loops"] += 1
                if not in_parallel:
                    f["parallel_extent"] = max(f["parallel_extent"], ext)
            visit(s.body, loops + ((s.kind, ext),), in_parallel or s.kind == "parallel")
            return
        if isinstance(s, Allocate):
            n = math.prod(_extent(d) if not isinstance(d, int) else d for d in s.buffer.shape)
            allocs.append(n * 4)
            f["allocs_in_parallel"] += in_parallel
            visit(s.body, loops, in_parallel)
            return
        if isinstance(s, IfThenElse):
            f["branches"] += 1
            visit(s.then_case, loops, in_parallel)
            if s.else_case is not None:
                visit(s.else_case, loops, in_parallel)
            return
        if isinstance(s, Store):
            iters = math.prod(e for _, e in loops) if loops else 1
            lanes = math.prod(e for k, e in loops if k == "vectorized")
            loads = sum(1 for n in walk(s.value) if isinstance(n, Load))
            f["stores"] += 1
            f["depth"] = max(f["depth"], len(loops))
            f["guarded_stores"] += s.predicate is not None
            stats["store_iters"] += iters
            stats["load_iters"] += iters * loads
            if lanes > 1:
                stats["vector_iters"] += iters
                f["vector_lanes"] = max(f["vector_lanes"], lanes)
            if iters > stats["heavy"][0]:
                stats["heavy"] = (iters, loops)
            return
        for child in _children(s):
            visit(child, loops, in_parallel)

    visit(func.body, (), False)
    f["store_iters"] = _log(stats["store_iters"])
    f["load_iters"] = _log(stats["load_iters"])
    f["vector_share"] = stats["vector_iters"] / stats["store_iters"] if stats["store_iters"] else 0.0
    ext = f["parallel_extent"]
    if ext:
        per = math.ceil(ext / max(1, cores))
        f["parallel_balance"] = ext / (per * max(1, cores))
        f["iters_per_thread"] = _log(stats["store_iters"] / min(ext, max(1, cores)))
    else:
        f["iters_per_thread"] = f["store_iters"]
    f["parallel_extent"] = _log(ext)
    heavy = stats["heavy"][1] or ()
    unrolled = [e for k, e in heavy if k == "unrolled"]
    serial = [e for k, e in heavy if k == "serial"]
    f["unrolled_block"] = _log(math.prod(unrolled)) if unrolled else -1.0
    f["unrolled_stmts"] = _log(math.prod(unrolled) * max(1, f["vector_lanes"]))
    # the loop just outside the unrolled register block: a reduction's length
    inner = [e for k, e in heavy if k != "unrolled" and k != "vectorized"]
    f["reduction_extent"] = _log(inner[-1]) if inner else -1.0
    f["serial_inner"] = _log(math.prod(serial[-2:])) if serial else -1.0
    f["heavy_depth"] = len(heavy)
    f["heavy_unroll_share"] = len(unrolled) / len(heavy) if heavy else 0.0
    f["alloc_bytes"] = _log(sum(allocs))
    f["alloc_max"] = _log(max(allocs)) if allocs else -1.0
    sizes = []
    for p in func.params:
        shape = getattr(p, "shape", None)
        if shape is not None:
            sizes.append(math.prod(_extent(d) if not isinstance(d, int) else d for d in shape) * 4)
    f["param_bytes"] = _log(sum(sizes))
    f["param_max"] = _log(max(sizes)) if sizes else -1.0
    return [float(f[n]) for n in NAMES]


def _children(s) -> list:
    if isinstance(s, SeqStmt):
        return list(s.stmts)
    if isinstance(s, LetStmt):
        return [s.body]
    return []


__all__ = ["NAMES", "loop_features"]
