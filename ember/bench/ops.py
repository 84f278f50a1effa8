"""``ember bench-ops``: Ember's default kernels against numpy on the same shapes, in one run.

Prints the measured fp32 FMA peak of the machine, then for each kernel the median time of Ember
and numpy, the achieved GFLOP/s (compute-bound kernels) or GB/s (memory-bound ones), Ember's
share of the peak, and the ratio Ember/numpy (speed-up, higher is better).
"""
from __future__ import annotations

import argparse
import json
import operator
import sys
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np


@dataclass
class Row:
    kernel: str
    shape: str
    ember_ms: float
    numpy_ms: float
    metric: str  # "GFLOP/s" or "GB/s"
    ember_rate: float
    numpy_rate: float
    pct_peak: Optional[float]
    speedup: float  # numpy time / ember time


def _cases(quick: bool):
    """(name, shape text, builder, inputs maker, numpy reference, flops, bytes)."""
    from .. import kernels as K

    rng = np.random.default_rng(0)
    f32 = np.float32
    n = 512 if quick else 1024
    cases = []

    A, B = rng.standard_normal((n, n), f32), rng.standard_normal((n, n), f32)
    cases.append(("matmul", f"{n}x{n}x{n}", lambda: K.matmul(n, n, n), (A, B), lambda a, b: a @ b,
                  2 * n ** 3, None))
    b, m = 16, 256 if not quick else 128
    A3, B3 = rng.standard_normal((b, m, m), f32), rng.standard_normal((b, m, m), f32)
    cases.append(("batch_matmul", f"{b}x{m}x{m}x{m}", lambda: K.batch_matmul(b, m, m, m), (A3, B3),
                  lambda a, c: a @ c, 2 * b * m ** 3, None))
    ci, co, hw = (64, 64, 56) if not quick else (32, 32, 28)
    X, W = rng.standard_normal((1, ci, hw, hw), f32), rng.standard_normal((co, ci, 3, 3), f32)
    cases.append(("conv2d 3x3", f"1x{ci}x{hw}x{hw} * {co}x{ci}x3x3 pad 1",
                  lambda: K.conv2d_nchw(X.shape, W.shape, padding=(1, 1, 1, 1)), (X, W),
                  _numpy_conv, 2 * co * ci * 9 * hw * hw, None))
    r, c = (4096, 1024) if not quick else (1024, 512)
    S = rng.standard_normal((r, c), f32)
    cases.append(("softmax", f"{r}x{c}", lambda: K.softmax(r, c), (S,), _numpy_softmax, None, 2 * S.nbytes))
    g, be = rng.standard_normal(c, f32), rng.standard_normal(c, f32)
    cases.append(("layer_norm", f"{r}x{c}", lambda: K.layer_norm(r, c), (S, g, be), _numpy_layernorm,
                  None, 2 * S.nbytes))
    e = (16 << 20) if not quick else (1 << 20)  # 64 MiB of float32 per operand
    E1, E2 = rng.standard_normal(e, f32), rng.standard_normal(e, f32)
    cases.append(("add", f"{e} (64 MiB)" if not quick else f"{e}", lambda: K.broadcast_binary(operator.add, (e,), (e,)),
                  (E1, E2), np.add, None, 3 * E1.nbytes))
    rb = rng.standard_normal((r, c), f32)
    cb = rng.standard_normal((c,), f32)
    cases.append(("add broadcast", f"{r}x{c} + {c}", lambda: K.broadcast_binary(operator.add, (r, c), (c,)),
                  (rb, cb), np.add, None, 2 * rb.nbytes))
    T = rng.standard_normal((2048, 2048) if not quick else (512, 512), f32)
    cases.append(("transpose", f"{T.shape[0]}x{T.shape[1]}", lambda: K.transpose(T.shape, (1, 0)), (T,),
                  lambda t: np.ascontiguousarray(t.T), None, 2 * T.nbytes))
    R = rng.standard_normal((256, 64, 256) if not quick else (64, 32, 64), f32)
    for ax in (0, 1, 2):
        cases.append((f"sum axis {ax}", "x".join(map(str, R.shape)),
                      (lambda ax=ax: K.reduce(R.shape, ax, "sum")), (R,),
                      (lambda x, ax=ax: x.sum(axis=ax)), None, R.nbytes))
    cases.append(("max axis 2", "x".join(map(str, R.shape)), lambda: K.reduce(R.shape, 2, "max"), (R,),
                  lambda x: x.max(axis=2), None, R.nbytes))
    return cases


def _numpy_conv(x, w):
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))  # n c h w kh kw
    return np.einsum("nchwij,fcij->nfhw", cols, w, optimize=True)


def _numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _numpy_layernorm(x, g, b, eps=1e-5):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def run(quick: bool = False, only: Optional[str] = None, repeat: int = 10, check: bool = True,
        out=sys.stdout) -> dict:
    """Measure every kernel; returns {"peak_gflops": ..., "rows": [...]}."""
    from .. import driver
    from ..kernels.common import host
    from ..profile.peak import measure_peak
    from ..profile.timing import interleaved

    target = host()
    peak = measure_peak(target)
    print(f"target: {target.cpu} ({target.vector_bits}-bit vectors, {target.cores} cores)", file=out)
    print(f"measured fp32 FMA peak (generated kernel, all cores): {peak:.1f} GFLOP/s", file=out)
    overhead_us, cache_ms = _runtime_costs()
    print(f"kernel call overhead (1-element add, numpy arrays): {overhead_us:.2f} us; "
          f"rebuild from the compile cache: {cache_ms:.1f} ms", file=out)
    rows = []
    for name, shape, make, inputs, ref, flops, nbytes in _cases(quick):
        if only and only not in name:
            continue
        s, args = make()
        mod = driver.build(s, args, "k")
        kern = mod["k"]
        expected = ref(*inputs)
        result = np.empty(expected.shape, np.float32)
        kern(*inputs, result)
        if check and not np.allclose(result, expected, rtol=1e-3, atol=1e-3):
            err = float(np.max(np.abs(result - expected)))
            raise AssertionError(f"{name}: Ember's result differs from numpy's (max abs err {err})")
        t = interleaved({"ember": lambda: kern(*inputs, result), "numpy": lambda: ref(*inputs)},
                        warmup=3, repeat=repeat)
        if flops:
            metric, er, nr = "GFLOP/s", flops / t["ember"] / 1e9, flops / t["numpy"] / 1e9
            pct = 100 * er / peak
        else:
            metric, er, nr = "GB/s", nbytes / t["ember"] / 1e9, nbytes / t["numpy"] / 1e9
            pct = None
        rows.append(Row(name, shape, t["ember"] * 1e3, t["numpy"] * 1e3, metric, er, nr, pct,
                        t["numpy"] / t["ember"]))
    _print(rows, out)
    return {"target": target.cpu, "cores": target.cores, "peak_gflops": peak,
            "call_overhead_us": overhead_us, "cache_hit_build_ms": cache_ms,
            "rows": [asdict(r) for r in rows]}


def _runtime_costs() -> tuple[float, float]:
    """Per-call overhead of a kernel (microseconds) and the time of a build that hits the cache."""
    import time

    from .. import driver
    from ..kernels import broadcast_binary

    s, args = broadcast_binary(operator.add, (1,), (1,))
    driver.build(s, args, "tiny")
    t = time.perf_counter()
    s, args = broadcast_binary(operator.add, (1,), (1,))
    kern = driver.build(s, args, "tiny")["tiny"]
    cache_ms = (time.perf_counter() - t) * 1e3
    a, b, c = (np.ones(1, np.float32) for _ in range(3))
    for _ in range(1000):
        kern(a, b, c)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(10000):
            kern(a, b, c)
        best = min(best, (time.perf_counter() - t) / 10000)
    return best * 1e6, cache_ms


def _print(rows, out):
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # rich is a dependency, but a plain table must still work
        Console = None
    headers = ["kernel", "shape", "ember ms", "numpy ms", "ember", "numpy", "% peak", "ember vs numpy"]
    lines = [[r.kernel, r.shape, f"{r.ember_ms:.3f}", f"{r.numpy_ms:.3f}", f"{r.ember_rate:.1f} {r.metric}",
              f"{r.numpy_rate:.1f} {r.metric}", "" if r.pct_peak is None else f"{r.pct_peak:.0f}%",
              f"{r.speedup:.2f}x"] for r in rows]
    if Console is not None:
        t = Table(title="Ember kernels vs numpy (medians; ratio = numpy time / Ember time)")
        for h in headers:
            t.add_column(h, justify="left" if h in ("kernel", "shape") else "right")
        for l in lines:
            t.add_row(*l)
        Console(file=out, width=140).print(t)
    else:
        print(" | ".join(headers), file=out)
        for l in lines:
            print(" | ".join(l), file=out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="ember bench-ops",
        description="Benchmark Ember's default kernels (matmul, conv2d, softmax, ...) against numpy on "
                    "the same inputs, after measuring the machine's fp32 FMA peak with a generated "
                    "kernel. Prints medians, GFLOP/s or GB/s, percent of peak and the speed-up.")
    p.add_argument("--quick", action="store_true", help="smaller shapes (a smoke run in seconds)")
    p.add_argument("--only", metavar="NAME", help="only kernels whose name contains NAME (e.g. matmul)")
    p.add_argument("--repeat", type=int, default=10, help="timed turns per kernel (default 10)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    a = p.parse_args(argv)
    res = run(quick=a.quick, only=a.only, repeat=a.repeat)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0
