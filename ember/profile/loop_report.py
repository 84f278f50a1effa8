"""The result of :func:`ember.profile.profile_loops`: per-loop rows, table, JSON and CSV."""
from __future__ import annotations

import csv
import dataclasses
import io
from typing import Optional

FIELDS = ("kernel", "loop", "depth", "var", "extent", "kind", "cycles", "percent", "calls",
          "records", "median_cycles", "threads", "max_thread_cycles", "header")


@dataclasses.dataclass(frozen=True)
class LoopRow:
    """One instrumented site of one kernel, over all timed runs.

    ``loop`` is the site id (0: the kernel's whole body, depth 0). ``cycles`` is summed over
    the ``threads`` that ran the site, so inside a parallel loop it is CPU time;
    ``percent`` is the share of the kernel it stands for: those cycles over the body's
    (wall) cycles times ``threads``, so the loops at one level of a nest add up to at most
    100. ``max_thread_cycles`` is the busiest thread's share. ``calls`` counts every execution; ``records`` is how many durations were
    kept (bounded per thread) and ``median_cycles`` their median, a per-execution figure that
    one disturbed run does not skew. ``header`` is the loop's line in the printed loop IR.
    """

    kernel: str
    loop: int
    depth: int
    var: str
    extent: str
    kind: str
    cycles: int
    percent: float
    calls: int
    records: int
    median_cycles: float
    threads: int
    max_thread_cycles: int
    header: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class LoopProfile:
    """Loop-level cycle counts of a model's kernels, and what measuring them cost.

    ``overhead`` is instrumented/plain - 1 of the median end-to-end latencies (alternating
    runs); ``cycles_per_second`` is the counter's measured rate; ``repeat`` the timed runs the
    counts cover. ``records[(kernel, loop)]`` holds the kept durations (numpy int64, cycles);
    ``plain_runs``/``instrumented_runs`` the end-to-end seconds of every timed run.
    """

    rows: list
    overhead: float
    plain_seconds: float
    instrumented_seconds: float
    cycles_per_second: float
    repeat: int
    depth: int
    sources: dict = dataclasses.field(default_factory=dict, repr=False)
    records: dict = dataclasses.field(default_factory=dict, repr=False)
    plain_runs: list = dataclasses.field(default_factory=list, repr=False)
    instrumented_runs: list = dataclasses.field(default_factory=list, repr=False)

    # -- queries ----------------------------------------------------------------------------
    def kernels(self) -> list[str]:
        """Kernel names, slowest first (by their body's cycles)."""
        body = [r for r in self.rows if r.loop == 0]
        return [r.kernel for r in sorted(body, key=lambda r: -r.cycles)]

    def rows_of(self, kernel: str) -> list[LoopRow]:
        """The rows of ``kernel`` in site order (the body, then loops in program order)."""
        return sorted((r for r in self.rows if r.kernel == kernel), key=lambda r: r.loop)

    def seconds(self, cycles: float) -> float:
        """``cycles`` as seconds at the measured counter rate."""
        return cycles / self.cycles_per_second

    def kernel_source(self, kernel: str) -> str:
        """The kernel's instrumented loop IR as printed, each site's line marked ``# [L<id>]``."""
        try:
            return self.sources[kernel]
        except KeyError:
            raise KeyError(f"no kernel {kernel!r} in this profile; kernels: "
                           f"{', '.join(self.kernels())}") from None

    # -- rendering --------------------------------------------------------------------------
    def table(self, kernel: Optional[str] = None, top: Optional[int] = None) -> str:
        """A text table: kernels slowest first (or only ``kernel``), each kernel's loops in
        program order, indented by depth. ``top`` keeps the ``top`` slowest kernels.
        ``cycles/call`` is the mean over all executions, ``median`` that of the kept ones.
        ``ms/run`` is the site's time per timed run at the measured rate; inside a parallel
        loop its CPU time divided over the threads that ran it, comparable with the kernel's
        wall time. ``thr`` is that thread count."""
        names = [kernel] if kernel is not None else self.kernels()
        if kernel is not None and kernel not in self.sources:
            self.kernel_source(kernel)  # raises, naming the kernels
        if top is not None:
            names = names[:top]
        head = ("loop", "ms/run", "% kernel", "calls", "cycles/call", "median", "thr", "kept",
                "loop IR")
        body = []
        for k in names:
            for r in self.rows_of(k):
                ms = 1e3 * self.seconds(r.cycles / max(1, r.threads)) / max(1, self.repeat)
                label = f"kernel {k}" if r.loop == 0 else "  " * r.depth + r.header
                body.append((f"L{r.loop}", f"{ms:.3f}", f"{r.percent:.1f}", str(r.calls),
                             f"{r.cycles / max(1, r.calls):.0f}", f"{r.median_cycles:.0f}",
                             str(r.threads), str(r.records),
                             label))
        widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) if i == len(head) - 1 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(row, widths))).rstrip()
                 for row in [head] + body]
        summary = (f"{self.repeat} timed runs, depth {self.depth}; plain "
                   f"{1e3 * self.plain_seconds:.3f} ms, instrumented "
                   f"{1e3 * self.instrumented_seconds:.3f} ms (overhead "
                   f"{100 * self.overhead:+.1f}%); counter {self.cycles_per_second / 1e9:.3f} GHz")
        return "\n".join([summary, lines[0], "-" * len(lines[0])] + lines[1:]) + "\n"

    def __str__(self) -> str:
        return self.table()

    def to_json(self) -> dict:
        """Everything but the kept durations, as JSON-ready dicts and lists."""
        return {"overhead": self.overhead, "plain_seconds": self.plain_seconds,
                "instrumented_seconds": self.instrumented_seconds,
                "cycles_per_second": self.cycles_per_second, "repeat": self.repeat,
                "depth": self.depth, "plain_runs": self.plain_runs,
                "instrumented_runs": self.instrumented_runs, "rows": [r.as_dict() for r in self.rows]}

    def to_csv(self) -> str:
        """The rows as CSV text (one line per site, header first)."""
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow(r.as_dict())
        return out.getvalue()


__all__ = ["LoopProfile", "LoopRow"]
