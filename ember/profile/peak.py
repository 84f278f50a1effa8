"""The machine's fp32 FMA peak, measured with a kernel Ember generates, and likewise the
peak of each packed dot (``vdpbf16ps``: bf16; ``vpdpbusd``: int8) where the CPU has it, or
of the AVX2 sequence that computes it (``pmaddubsw`` + ``pmaddwd``; bytes widened for
``pmaddwd``).

Each core runs a loop of independent vector FMAs (or packed dots) on register accumulators
(enough of them to cover the latency on every pipe), so the figure is what generated code can
reach, not a datasheet number. A packed dot of ``g`` products per lane counts ``2 g``
operations, as ``g`` multiply-adds.
"""
from __future__ import annotations

import numpy as np

from ..loop.expr import Broadcast, IntImm, Load, Ramp, Var, as_expr
from ..loop.intrinsics import PACKED_DOTS, WORD, packed_dot
from ..loop.stmt import Allocate, Buffer, For, PrimFunc, Store, seq


def fma_peak_kernel(lanes: int, threads: int, accumulators: int = 10, iters: int = 200_000,
                    dot: str | None = None) -> tuple:
    """A PrimFunc doing ``threads * iters * accumulators`` vector FMAs (or packed dots
    ``dot``, of int32 words); returns (func, operations)."""
    acc_type = "float32" if dot is None else PACKED_DOTS[dot][3]
    xy = Buffer("xy", (2,), "float32" if dot is None else WORD, align=4)
    out = Buffer("out", (threads, lanes), acc_type, align=4)
    acc = Buffer("acc", (accumulators, lanes), acc_type, scope="local")
    t, it = Var("t"), Var("it")
    lane = Ramp(IntImm(0), IntImm(1), lanes)
    x = Broadcast(Load(xy, (IntImm(0),)), lanes)
    y = Broadcast(Load(xy, (IntImm(1),)), lanes)

    def update(k):
        a = Load(acc, (IntImm(k), lane))
        if dot is None:
            return a * x + y
        # an integer dot reads its accumulator's words: a dot of loop invariants would be
        # hoisted out of the loop where it is not the accumulating instruction itself (AVX2's
        # pmaddwd, pmaddubsw), leaving only the adds to time
        return a + packed_dot(dot, a if acc_type == WORD else x, y)
    step = [Store(acc, update(k), (IntImm(k), lane)) for k in range(accumulators)]
    first = Broadcast(Load(xy, (IntImm(1),)) if dot is None else as_expr(0, acc_type), lanes)
    init = [Store(acc, first, (IntImm(k), lane)) for k in range(accumulators)]
    total = Load(acc, (IntImm(0), lane))
    for k in range(1, accumulators):
        total = total + Load(acc, (IntImm(k), lane))
    body = For(t, IntImm(0), IntImm(threads), "parallel",
               Allocate(acc, seq(*init, For(it, IntImm(0), IntImm(iters), "serial", seq(*step)),
                                 Store(out, total, (t, lane)))))
    per = 2 if dot is None else 2 * PACKED_DOTS[dot][2]
    flops = per * threads * iters * accumulators * lanes
    return PrimFunc("fma_peak" if dot is None else f"{dot}_peak", (xy, out), body), flops


def measure_peak(target=None, repeat: int = 5, dot: str | None = None) -> float:
    """Measured fp32 GFLOP/s of the generated FMA kernel on all cores (with ``dot``, GOP/s of
    that packed dot's kernel; 0.0 where the CPU has no instruction for it)."""
    from ..codegen.llvm import build
    from ..kernels.common import host, vector_lanes, vector_registers
    from .timing import median_time

    from ..codegen.llvm.dot import hardware, pairwise, widened

    target = host(target)
    lanes = vector_lanes(target, "float32")
    threads = target.cores
    regs = vector_registers(lanes)
    # (a dot on AVX2 without VNNI is a sequence: pmaddubsw then pmaddwd by ones, or bytes
    # widened for pmaddwd; its peak is that sequence's)
    if dot is not None and not any(f(dot, lanes, target.feature_set) for f in (hardware, pairwise, widened)):
        return 0.0
    func, flops = fma_peak_kernel(lanes, threads, accumulators=regs - 4, dot=dot)
    mod = build([func], target=target, name=func.name)
    if dot is None:
        xy = np.array([0.999999, 1e-6], dtype=np.float32)
    else:
        xy = np.array([0x3F803F80, 0x00010001], dtype=np.int32)  # (bf16 1.0 pairs; small integers)
    out = np.zeros((threads, lanes), dtype=np.float32 if dot is None or "bf16" in dot else np.int32)
    k = mod[func.name]
    # a peak is the best the machine does, so take the fastest run, not the median
    sec = min(median_time(lambda: k(xy, out), warmup=1, repeat=1) for _ in range(repeat))
    return flops / sec / 1e9


def measure_bandwidth(nbytes: int = 64 << 20, repeat: int = 5) -> float:
    """Measured memory bandwidth in GB/s: a copy of ``nbytes`` (far past the caches) counts
    its read and its write."""
    import time

    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return 2 * nbytes / best / 1e9
