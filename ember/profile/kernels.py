"""Per-kernel profile of a compiled model, with warm-up.

A profiler that times the first call reports lazy initialization and cold caches as steady
state, so ``warmup`` untimed runs come first (default 3; 0 is allowed but the report says the
figures are cold). Then ``repeat`` runs time every kernel call; between them plain runs of the
same executable measure the end-to-end latency without profiling, so the report can state how
far the sum of the kernel times is from what a user sees (the profiler's overhead plus the
runtime's own work between kernels).

    prof = exe.profile(x, warmup=3, repeat=10)
    print(prof.table(top=10))
    prof.to_csv("k.csv"); prof.to_json("k.json"); prof.to_chrome_trace("k.trace.json")
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Optional, Sequence

from ..errors import ProfileError
from ..runtime.executable import explicit_sizes
from ..runtime.lanes import LANES
from ..runtime.shapes import evaluate

def _short(op: str) -> str:
    return op.split(".")[-1]


@dataclasses.dataclass
class KernelRow:
    """One kernel call of the program (or an aggregate of several, see ``group_by``).

    Times are seconds over the timed runs; ``flops`` and ``bytes`` are per call (the operator's
    arithmetic and the bytes of its arguments, each read or written once). ``median`` is a
    call's median time, which rates, shares and the time order use: one run disturbed by the
    machine (a 7.9 ms call among 15 us ones, on a shared VM) moves a mean tenfold, not it.
    """

    kernel: str
    nodes: str
    ops: str
    op_type: str
    calls: int
    total: float
    min: float
    flops: int
    bytes: int
    index: int = -1  # position in the program; -1 for an aggregate
    percent: float = 0.0  # of the sum of all kernel times
    peak_gflops: float = 0.0
    max: float = 0.0
    median: float = 0.0  # seconds a call (for an aggregate: its calls' medians, averaged)

    @property
    def mean(self) -> float:
        return self.total / self.calls if self.calls else 0.0

    @property
    def typical(self) -> float:
        """Seconds a call: the median where known, else the mean."""
        return self.median or self.mean

    @property
    def gflops(self) -> float:
        """Achieved GFLOP/s (from the median time)."""
        return self.flops / self.typical / 1e9 if self.typical else 0.0

    @property
    def gbps(self) -> float:
        return self.bytes / self.typical / 1e9 if self.typical else 0.0

    @property
    def percent_of_peak(self) -> float:
        return 100 * self.gflops / self.peak_gflops if self.peak_gflops else 0.0

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.update(mean=self.mean, gflops=self.gflops, gbps=self.gbps, percent_of_peak=self.percent_of_peak)
        return d


@dataclasses.dataclass
class KernelProfile:
    """The result of :func:`profile_kernels`: rows in program order and the run's summary."""

    rows: list
    warmup: int
    repeat: int
    latency: float  # median seconds of a plain (unprofiled) run
    kernel_sum: float  # median over the timed runs of the sum of kernel times
    peak_gflops: float
    peak_gbps: float
    events: list  # (run, call index, start s, duration s) for the trace
    model: str = "model"
    run_sums: list = dataclasses.field(default_factory=list)  # per timed run: sum of kernel times
    plain_runs: list = dataclasses.field(default_factory=list)  # the unprofiled run after each

    @property
    def cold(self) -> bool:
        """True when no warm-up ran: the first call's one-time costs are in the figures."""
        return self.warmup == 0

    @property
    def overhead(self) -> float:
        """(sum of kernel times) / (end-to-end latency) - 1: negative when the runtime spends
        time between kernels, positive when timing each kernel costs more than it saves.

        Measured on the best run of each kind (the fastest profiled run's kernel sum against the
        fastest plain run): on a shared machine other work only ever adds time, so the minima are
        the figures least disturbed by it, where medians or pairs of neighbouring runs still carry
        bursts of load into the ratio."""
        if self.run_sums and self.plain_runs and min(self.plain_runs) > 0:
            return min(self.run_sums) / min(self.plain_runs) - 1
        return self.kernel_sum / self.latency - 1 if self.latency else 0.0

    @property
    def flop_bound(self) -> float:
        """Seconds the calls' FLOPs take at the FMA peak: about the least any schedule of these
        kernels could take (what tuning can gain is at most about ``kernel_sum / flop_bound``;
        only fewer operations go below it). 0 without a peak."""
        return self.flops / (self.peak_gflops * 1e9) if self.peak_gflops else 0.0

    @property
    def flops(self) -> int:
        """FLOPs of one run: its calls' together."""
        return sum(r.flops for r in self.rows)

    def select(self, sort: str = "time", top: Optional[int] = None, group_by: str = "call") -> list:
        """Rows grouped (``call``: one per program call; ``kernel``: calls of one kernel
        together; ``op``: by op type), sorted (``time``, ``order``, ``name``, ``gflops``) and cut
        to the first ``top``."""
        rows = self.rows if group_by == "call" else _group(self.rows, group_by)
        keys = {"time": lambda r: -r.typical * r.calls, "order": lambda r: r.index, "name": lambda r: r.kernel,
                "gflops": lambda r: -r.gflops, "calls": lambda r: -r.calls}
        if sort not in keys:
            raise ProfileError(f"cannot sort by {sort!r}; choose one of {', '.join(keys)}")
        rows = sorted(rows, key=keys[sort])
        return rows[:top] if top else rows

    def summary(self) -> str:
        n = len({r.kernel for r in self.rows})
        warm = ("NO warm-up: these figures include the first (cold) call" if self.cold
                else f"after {self.warmup} warm-up run(s)")
        return (f"{self.model}: {len(self.rows)} kernel calls ({n} kernels), {self.repeat} timed runs {warm}. "
                f"Sum of kernel times {self.kernel_sum * 1e3:.3f} ms vs end-to-end {self.latency * 1e3:.3f} ms "
                f"without profiling (medians; best runs {100 * self.overhead:+.1f}%). Peak {self.peak_gflops:.0f} GFLOP/s, "
                f"{self.peak_gbps:.1f} GB/s (measured)" + self._bound_text() + ".")

    def _bound_text(self) -> str:
        bound = self.flop_bound
        if not bound or not self.kernel_sum:
            return ""
        return (f"; at that peak the {self.flops / 1e6:.0f} MFLOP take {bound * 1e3:.3f} ms, "
                f"the kernels {self.kernel_sum / bound:.2f}x that")

    # the exports live in their own modules; these are the doors to them
    def table(self, sort: str = "time", top: Optional[int] = None, group_by: str = "call",
              width: int = 160) -> str:
        from .report import kernel_table

        return kernel_table(self, sort=sort, top=top, group_by=group_by, width=width)

    def to_csv(self, path: Optional[str] = None, group_by: str = "call") -> str:
        from .export import kernels_csv

        return kernels_csv(self, path, group_by)

    def to_json(self, path: Optional[str] = None) -> str:
        from .export import kernels_json

        return kernels_json(self, path)

    def to_chrome_trace(self, path: Optional[str] = None) -> str:
        from .export import chrome_trace

        return chrome_trace(self, path)

    def plot(self, path: str, top: int = 10) -> str:
        from .plot import plot_kernels

        return plot_kernels(self, path, top)


def _group(rows: list, by: str) -> list:
    if by not in ("kernel", "op"):
        raise ProfileError(f"cannot group by {by!r}; choose call, kernel or op")
    out: dict = {}
    for r in rows:
        key = r.kernel if by == "kernel" else r.op_type
        g = out.get(key)
        if g is None:
            out[key] = dataclasses.replace(r, kernel=key) if by == "kernel" else \
                dataclasses.replace(r, kernel=key, nodes="", ops=r.op_type)
            continue
        if by == "kernel":
            g.nodes = f"{g.nodes}, {r.nodes}"
        g.median = (g.median * g.calls + r.median * r.calls) / (g.calls + r.calls)
        g.calls += r.calls
        g.total += r.total
        g.min = min(g.min, r.min)
        g.max = max(g.max, r.max)
        g.percent += r.percent
        # per call figures become the average call's, so GFLOP/s stays total work / total time
        g.flops = (g.flops * (g.calls - r.calls) + r.flops * r.calls) // g.calls
        g.bytes = (g.bytes * (g.calls - r.calls) + r.bytes * r.calls) // g.calls
    return list(out.values())


def _peaks(target, again: bool = False) -> tuple:
    """The fp32 FMA peak and the copy bandwidth, measured once per target in a process, and
    once more with ``again``: the best of the measurements is kept. One takes some 30 ms, and
    another process on a core meanwhile halves it (`ember profile` once printed a 117 GFLOP/s
    peak on a 2-core Zen 4 whose convolutions ran at 200: "% peak" 165-180)."""
    from .peak import measure_bandwidth, measure_peak

    key = str(target)
    if key not in _PEAKS or again:
        new = (measure_peak(target), measure_bandwidth())
        old = _PEAKS.get(key, (0.0, 0.0))
        _PEAKS[key] = (max(old[0], new[0]), max(old[1], new[1]))
    return _PEAKS[key]


def _row_peak(call: dict, target, fp32_peak: float) -> float:
    """The peak a kernel call's speed is measured against: its packed dot's (``vdpbf16ps``,
    ``vpdpbusd``: measured once per target) where its products run on one, else the fp32 FMA
    peak."""
    dot = call.get("dot")
    if not dot or target is None:
        return fp32_peak
    from .peak import measure_peak

    key = (str(target), dot)
    if key not in _PEAKS:
        _PEAKS[key] = measure_peak(target, dot=dot) or fp32_peak
    return _PEAKS[key]


_PEAKS: dict = {}


def time_calls(exe, bound: list, layout, calls: Optional[list] = None) -> list:
    """One run of ``exe``'s single-phase program (inputs ``bound``, laid out as ``layout``),
    each kernel call timed on its own: ``[(start, seconds), ...]`` in program order.
    ``calls``: the program's ``(kernel, argument slots)`` to run instead of its own (the tuner
    times a candidate kernel in place this way, :mod:`ember.tune.in_place`)."""
    calls = exe._calls if calls is None else calls
    clock = time.perf_counter
    out = [(0.0, 0.0)] * len(calls)

    def run() -> None:
        with exe._pool.run() as state:  # an arena of its own: other threads may be running exe
            vals = exe._values(state, bound, layout)
            for i, (kernel, args) in enumerate(calls):
                # gathered and checked outside the timed region: the call's checks cost a few
                # microseconds, which the program's native loop of calls does not pay
                a = [vals[x] for x in args] + list(explicit_sizes(kernel, layout.scalars[i]))
                if hasattr(kernel, "run_prepared"):
                    cargs, run_ = kernel.prepare(*a), kernel.run_prepared
                else:  # any callable (a test's stand-in)
                    cargs, run_ = a, lambda c, k=kernel: k(*c)
                t0 = clock()
                run_(cargs)
                out[i] = (t0, clock() - t0)

    # on a lane, as exe.run runs: kernels called from this thread would make it a second
    # OpenMP team, and with more team threads than cores libgomp puts its workers to sleep
    # after every parallel region (EfficientNet-B0: every kernel timed ~2x slow)
    LANES.execute(exe._pool.threads_per_run, run)
    return out


def profile_kernels(exe, inputs: Sequence = (), *, warmup: int = 3, repeat: int = 10,
                    named: Optional[dict] = None, peak_gflops: Optional[float] = None,
                    peak_gbps: Optional[float] = None, model: str = "model") -> KernelProfile:
    """Profile every kernel call of ``exe`` on ``inputs`` (see the module docstring).

    ``peak_gflops``/``peak_gbps`` default to the machine's measured FMA peak and copy bandwidth.
    """
    if warmup < 0 or repeat < 1:
        raise ProfileError(f"warmup must be >= 0 and repeat >= 1, got warmup={warmup}, repeat={repeat}")
    # a tiered executable: the one running now, throughout (the next one swapped in lays its
    # program out otherwise -- tier 0 runs a conv and its epilogue as two calls)
    exe = getattr(exe, "current", exe)
    named = dict(named or {})
    calls = exe._calls
    info = exe.program["calls"]
    given = (peak_gflops, peak_gbps)
    if None in given:
        pg, pb = _peaks(exe.target)
        peak_gflops = peak_gflops or pg
        peak_gbps = peak_gbps or pb
    clock = time.perf_counter
    for _ in range(warmup):
        exe.run(*inputs, **named)
    times = [[] for _ in calls]
    sums, plain, events = [], [], []
    origin = clock()
    bound = exe._inputs(tuple(inputs), named)
    if not exe._single:
        return _profile_phases(exe, inputs, named, warmup, repeat, peak_gflops, peak_gbps, model)
    layout = exe._layout(bound)

    for r in range(repeat):
        total = 0.0
        for i, (t0, dt) in enumerate(time_calls(exe, bound, layout)):
            times[i].append(dt)
            events.append((r, i, t0 - origin, dt))
            total += dt
        sums.append(total)
        t0 = clock()
        exe.run(*inputs, **named)
        plain.append(clock() - t0)
    if None in given:  # (measured again after the runs: the better of two moments)
        pg, pb = _peaks(exe.target, again=True)
        peak_gflops, peak_gbps = given[0] or pg, given[1] or pb
    rows = []
    medians = [statistics.median(t) for t in times]
    kernel_total = sum(medians) or 1.0
    module = getattr(exe, "module", None)
    backend = {e["name"]: e.get("backend") for e in (module.metadata.get("kernels", []) if module else [])}
    for i, (c, ts) in enumerate(zip(info, times)):
        ops = c.get("ops", [])
        # (a group running on its tier-0 kernel while tier 1 compiles: named as the group,
        # marked; an offloaded group's kernel: marked with its backend)
        name = f"{c['tier0_of']} [tier 0]" if "tier0_of" in c else c["kernel"]
        if backend.get(c["kernel"]):
            name = f"{name} [{backend[c['kernel']]}]"
        rows.append(KernelRow(kernel=name, nodes=c.get("nodes", ""), ops="+".join(_short(o) for o in ops),
                              op_type=_short(c.get("anchor") or "?"), calls=len(ts), total=sum(ts), min=min(ts), max=max(ts),
                              median=medians[i], flops=int(evaluate(c.get("flops", 0), layout.env) or 0),
                              bytes=int(evaluate(c.get("bytes", 0), layout.env) or 0), index=i,
                              percent=100 * medians[i] / kernel_total,
                              peak_gflops=_row_peak(c, getattr(exe, "target", None), peak_gflops)))
    return KernelProfile(rows=rows, warmup=warmup, repeat=repeat, latency=statistics.median(plain),
                         kernel_sum=statistics.median(sums), peak_gflops=peak_gflops, peak_gbps=peak_gbps,
                         events=events, model=model, run_sums=sums, plain_runs=plain)


def _profile_phases(exe, inputs, named, warmup, repeat, peak_gflops, peak_gbps, model) -> KernelProfile:
    """A program that runs in phases (sizes bound while running, control flow): each run goes
    through ``exe.run`` with the executable's timer set, which times every kernel call of the
    main program and every control step (an If's branch, a Loop's iterations: the subgraphs'
    kernels are in their step's time). Flops and bytes count where they do not depend on sizes
    bound while running."""
    calls, info = exe._calls, exe.program["calls"]
    steps = exe.program.get("controls", [])
    clock = time.perf_counter
    origin = clock()
    per_run: dict = {}
    events: list = []
    run = [0]

    def timer(what, t0, dt):
        key = what[1] if what[0] == "call" else len(calls) + what[1]
        per_run.setdefault(key, []).append(dt)
        events.append((run[0], key, t0 - origin, dt))

    times: dict = {}
    sums, plain = [], []
    for r in range(warmup + repeat):
        per_run.clear()
        run[0] = r - warmup
        exe._timer = timer
        try:
            exe.run(*inputs, **named)
        finally:
            exe._timer = None
        if r < warmup:
            continue
        for key, ts in per_run.items():
            times.setdefault(key, []).append(sum(ts))
        sums.append(sum(sum(ts) for ts in per_run.values()))
        t0 = clock()
        exe.run(*inputs, **named)
        plain.append(clock() - t0)
    events = [e for e in events if e[0] >= 0]
    medians = {key: statistics.median(ts) for key, ts in times.items()}
    total = sum(medians.values()) or 1.0
    rows = []
    for key in sorted(times):
        ts = times[key]
        if key < len(calls):
            c = info[key]
            kernel, nodes = c["kernel"], c.get("nodes", "")
            ops, op_type = "+".join(_short(o) for o in c.get("ops", [])), _short(c.get("anchor") or "?")
            flops, nbytes = (int(evaluate(c.get(k, 0), {}) or 0) for k in ("flops", "bytes"))
            peak = _row_peak(c, getattr(exe, "target", None), peak_gflops)
        else:
            step = steps[key - len(calls)]
            kernel, nodes, ops, op_type = f"<{step['kind']}>", step.get("nodes", ""), step["kind"], step["kind"]
            flops = nbytes = 0
            peak = peak_gflops
        rows.append(KernelRow(kernel=kernel, nodes=nodes, ops=ops, op_type=op_type, calls=len(ts), total=sum(ts),
                              min=min(ts), max=max(ts), median=medians[key], flops=flops, bytes=nbytes, index=key,
                              percent=100 * medians[key] / total, peak_gflops=peak))
    return KernelProfile(rows=rows, warmup=warmup, repeat=repeat, latency=statistics.median(plain),
                         kernel_sum=statistics.median(sums), peak_gflops=peak_gflops, peak_gbps=peak_gbps,
                         events=events, model=model, run_sums=sums, plain_runs=plain)


__all__ = ["KernelProfile", "KernelRow", "profile_kernels", "time_calls"]
