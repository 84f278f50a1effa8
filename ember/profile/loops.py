"""Loop-level profiling of a compiled model: which loop of which kernel takes the time.

    prof = profile_loops(exe, [x], depth=2)
    print(prof.table(top=3)); print(prof.kernel_source(prof.kernels()[0]))

The model's kernels are lowered again from ``exe.kernel_sources``, instrumented with
cycle-counter reads (``ember.loop.passes.instrument_loops``) and built into a separate library;
an :class:`Executable` over that library runs the same program with the same constants.
"""
from __future__ import annotations

import statistics
import threading
import time
from typing import Sequence

import numpy as np

from ..errors import ProfileError
from ..runtime.loop_counters import LoopCounters, cycle_counter
from .loop_report import LoopProfile, LoopRow

MIN_RATE_SECONDS = 0.05  # the counter's rate is measured over at least this long


def build_instrumented(exe, depth: int = 1, records_per_site: int = 256, max_threads: int = 64):
    """``(executable, sites, sources)``: ``exe`` rebuilt with instrumented kernels.

    ``sites[kernel]`` lists its :class:`~ember.loop.passes.LoopSite` s and ``sources[kernel]``
    its printed instrumented loop IR with each site's line marked ``# [L<id>]``.
    """
    from ..codegen.llvm import build
    from ..driver import lower_kernel
    from ..kernels.common import host
    from ..loop.passes.instrument import instrument_loops, mark_sites
    from ..runtime.executable import Executable

    if not getattr(exe, "kernel_sources", None):
        if not exe.program.get("calls"):
            raise ProfileError("the model runs no kernels: there are no loops to profile")
        raise ProfileError("this executable has no kernel sources (a model loaded from an export "
                           "keeps only machine code, which cannot be re-instrumented): profile "
                           "the executable ember.compile() returns instead")
    funcs, sites, sources = [], {}, {}
    for schedule, args, name in exe.kernel_sources:
        func = schedule if args is None else lower_kernel(schedule, args, name)  # a PrimFunc written directly
        f, s = instrument_loops(func, depth, records_per_site, max_threads)
        funcs.append(f)
        sites[name] = s
        sources[name] = mark_sites(f.script(), s)
    module = build(funcs, target=host(exe.target), name="loop_profile")
    inst = Executable(module, exe.program, exe.constants)
    inst.threads_per_run = exe._pool._threads  # profile the loops as exe's runs execute them
    return inst, sites, sources


def profile_loops(exe, inputs: Sequence[np.ndarray], depth: int = 1, warmup: int = 3,
                  repeat: int = 10, records_per_site: int = 256) -> LoopProfile:
    """Profile the loops of ``exe``'s kernels down to nesting ``depth`` over ``repeat`` runs.

    Both the plain and the instrumented executable run ``warmup`` untimed times (the cold first
    call is excluded: counters are reset afterwards), then ``repeat`` alternating timed runs
    each; the counters cover exactly the instrumented timed runs and ``overhead`` compares the
    median latencies. Raises :class:`~ember.errors.ProfileError` when ``exe`` cannot be
    re-instrumented (a loaded export has no kernel sources).
    """
    if repeat < 1 or warmup < 0 or depth < 0:
        raise ProfileError(f"need repeat >= 1, warmup >= 0 and depth >= 0, got {repeat}, "
                           f"{warmup} and {depth}")
    with _COUNTERS_LOCK:
        return _profile_loops(exe, list(inputs), depth, warmup, repeat, records_per_site)


# An instrumented library's counters are globals of the loaded library (one per process, as
# dlopen shares it): two loop profiles at once would add into each other's counts.
_COUNTERS_LOCK = threading.Lock()


def _profile_loops(exe, inputs: list, depth: int, warmup: int, repeat: int,
                   records_per_site: int) -> LoopProfile:
    inst, sites, sources = build_instrumented(exe, depth, records_per_site)
    counters = {k: LoopCounters(inst.module, k) for k in sites}
    for _ in range(warmup):
        exe.run(*inputs)
        inst.run(*inputs)
    for c in counters.values():
        c.reset()
    plain, timed = [], []
    c0, t0 = cycle_counter(inst.module), time.perf_counter()
    for _ in range(repeat):  # alternating, so drifts (clock, other load) hit both alike
        t = time.perf_counter()
        exe.run(*inputs)
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        inst.run(*inputs)
        timed.append(time.perf_counter() - t)
    rest = MIN_RATE_SECONDS - (time.perf_counter() - t0)
    if rest > 0:
        time.sleep(rest)
    c1, t1 = cycle_counter(inst.module), time.perf_counter()
    rate = (c1 - c0) / (t1 - t0)
    rows, records = [], {}
    for kernel, ss in sites.items():
        n, cyc = counters[kernel].counts(), counters[kernel].cycles()
        total = max(1, int(cyc[:, 0].sum()))
        for s in ss:
            kept = records[(kernel, s.site)] = counters[kernel].records(s.site)
            threads = int((n[:, s.site] > 0).sum())
            # a site inside a parallel loop runs on every thread at once: its share of the
            # kernel is its CPU time over the CPU time those threads had (the body's wall time each)
            rows.append(LoopRow(
                kernel, s.site, s.depth, s.var, s.extent, s.kind, int(cyc[:, s.site].sum()),
                100.0 * float(cyc[:, s.site].sum()) / (total * max(1, threads)),
                int(n[:, s.site].sum()), len(kept), float(np.median(kept)) if len(kept) else 0.0,
                threads, int(cyc[:, s.site].max()), s.header))
    p, i = statistics.median(plain), statistics.median(timed)
    return LoopProfile(rows, i / p - 1.0, p, i, rate, repeat, depth, sources, records, plain, timed)


__all__ = ["build_instrumented", "profile_loops"]
