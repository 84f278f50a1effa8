"""The machine's fp32 FMA peak, measured with a kernel Ember generates.

Each core runs a loop of independent vector FMAs on register accumulators (enough of them to
cover the FMA latency on every pipe), so the figure is what generated code can reach, not a
datasheet number.
"""
from __future__ import annotations

import numpy as np

from ..loop.expr import Broadcast, IntImm, Load, Ramp, Var
from ..loop.stmt import Allocate, Buffer, For, PrimFunc, Store, seq


def fma_peak_kernel(lanes: int, threads: int, accumulators: int = 10, iters: int = 200_000) -> tuple:
    """A PrimFunc doing ``threads * iters * accumulators`` vector FMAs; returns (func, flops)."""
    xy = Buffer("xy", (2,), "float32", align=4)
    out = Buffer("out", (threads, lanes), "float32", align=4)
    acc = Buffer("acc", (accumulators, lanes), "float32", scope="local")
    t, it = Var("t"), Var("it")
    lane = Ramp(IntImm(0), IntImm(1), lanes)
    x = Broadcast(Load(xy, (IntImm(0),)), lanes)
    y = Broadcast(Load(xy, (IntImm(1),)), lanes)
    step = [Store(acc, Load(acc, (IntImm(k), lane)) * x + y, (IntImm(k), lane)) for k in range(accumulators)]
    init = [Store(acc, Broadcast(Load(xy, (IntImm(1),)), lanes), (IntImm(k), lane)) for k in range(accumulators)]
    total = Load(acc, (IntImm(0), lane))
    for k in range(1, accumulators):
        total = total + Load(acc, (IntImm(k), lane))
    body = For(t, IntImm(0), IntImm(threads), "parallel",
               Allocate(acc, seq(*init, For(it, IntImm(0), IntImm(iters), "serial", seq(*step)),
                                 Store(out, total, (t, lane)))))
    flops = 2 * threads * iters * accumulators * lanes
    return PrimFunc("fma_peak", (xy, out), body), flops


def measure_peak(target=None, repeat: int = 5) -> float:
    """Measured fp32 GFLOP/s of the generated FMA kernel on all cores."""
    from ..codegen.llvm import build
    from ..kernels.common import host, vector_lanes, vector_registers
    from .timing import median_time

    target = host(target)
    lanes = vector_lanes(target, "float32")
    threads = target.cores
    regs = vector_registers(lanes)
    func, flops = fma_peak_kernel(lanes, threads, accumulators=regs - 4)
    mod = build([func], target=target, name="fma_peak")
    xy = np.array([0.999999, 1e-6], dtype=np.float32)
    out = np.zeros((threads, lanes), dtype=np.float32)
    k = mod["fma_peak"]
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
