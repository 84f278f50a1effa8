"""Tuned kernels checked where they run: in the model, beside the rest of its kernels.

A candidate is timed alone, its inputs hot in the caches and the machine to itself. In the
model the kernel before it has just filled the caches with other data, so a schedule that won
alone can lose in place (last seen: three tiny squeeze-excitation kernels of EfficientNet-B0,
12-15 us each, 3-5 us slower in the model though faster alone). After a tuning run the
untuned and the tuned model are profiled in one process, alternately, each kernel call's least
time kept; a tuned kernel slower in place than its default by more than ``margin`` gets a
*set-aside* record for its trace. A compile then applies only records measured faster than
the set-aside one (:meth:`~ember.tune.database.Database.best_per_workload`): the default,
unless later tuning finds better. When the untuned kernels run far off their time at the
start of tuning, or the cores have moved since (:mod:`ember.runtime.placement`: a shared VM's
two vCPUs sharing an L3 or not), the machine is in another state and nothing is set aside.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from .records import SET_ASIDE, Record
from .workload import target_name, workload_key

__all__ = ["SET_ASIDE", "InModel", "InModelCheck", "check_in_model", "time_in_place"]


@dataclasses.dataclass(frozen=True)
class InModel:
    """One tuned kernel timed in place: its calls' least times in one run, untuned and tuned."""

    name: str
    workload: str
    untuned: float  # seconds
    tuned: float
    kept: bool


@dataclasses.dataclass(frozen=True)
class InModelCheck:
    """What :func:`check_in_model` found: the tuned kernels' rows and the whole model's kernel
    seconds in place, untuned and tuned (before any was set aside); ``note`` says why nothing
    was set aside, when the machine had changed state (``""`` otherwise)."""

    rows: tuple = ()
    untuned: float = math.nan
    tuned: float = math.nan
    note: str = ""

    @property
    def kept(self) -> float:
        """The tuned model's kernels in place, the set-aside kernels back at their default."""
        return self.tuned - sum(r.tuned - r.untuned for r in self.rows if not r.kept)

    def summary(self) -> str:
        """The report's lines."""
        aside = [r for r in self.rows if not r.kept]
        line = (f"in the model (kernels timed in place, least times): {self.untuned * 1e3:.2f} -> "
                f"{self.kept * 1e3:.2f} ms ({self.untuned / self.kept:.2f}x); "
                f"{len(self.rows) - len(aside)} tuned kernel(s) kept")
        if aside:
            line += (f", {len(aside)} set aside, slower there than their default: "
                     + ", ".join(f"{r.name} {r.tuned * 1e6:.1f} vs {r.untuned * 1e6:.1f} us" for r in aside))
        return line + (f"\n{self.note}" if self.note else "")


def time_in_place(exes: Sequence, inputs: list, rounds: int = 4, repeat: int = 15) -> list:
    """Per executable (same program, other kernels): ``{call index: (kernel, least seconds)}``
    over ``rounds`` profiles taken alternately (one process: no other runtime's threads, and
    machine noise, which only ever adds time, hits all alike)."""
    least: list = [{} for _ in exes]
    for _ in range(rounds):
        for k, e in enumerate(exes):
            for row in e.profile(*inputs, warmup=2, repeat=repeat).rows:
                old = least[k].get(row.index)
                if old is None or row.min < old[1]:
                    least[k][row.index] = (row.kernel, row.min)
    return least


def check_in_model(model, database, untuned_exe, target, *, input_shapes=None, rounds: int = 4,
                   margin: float = 0.03, baseline: float | None = None, tolerance: float = 0.1,
                   round_trip: float | None = None) -> InModelCheck:
    """The kernels that ``database``'s best records schedule, timed in place in ``model`` against
    ``untuned_exe`` (static kernels); the records of those slower than their default by more
    than ``margin`` are set aside.

    ``baseline``: the untuned kernels' seconds when tuning began. A shared machine can run a
    quarter slower for minutes (the 2-core VM these figures come from: EfficientNet-B0 at 7.0 or
    9.1 ms), and schedules that won in one state can lose in the other: when the check's untuned time is off the baseline by more than
    ``tolerance``, nothing is set aside and ``note`` says why (``""`` otherwise). Likewise when
    the cores are placed otherwise than when tuning began: ``round_trip`` is the cache-line round
    trip between them then (:func:`~ember.runtime.placement.core_round_trip_ns`), measured again
    before and after the check (this VM: ~70 ns with the two vCPUs on one L3, ~340 ns apart;
    the model 7.0 vs 9.1 ms, and the tuned schedules 4% faster in the first, 12% slower in
    the second)."""
    from ..compiler.compile import compile_model
    from ..compiler.generic import generic_kernels
    from .tasks import random_inputs

    tname = target_name(target)
    best = database.best_per_workload(tname)
    with generic_kernels("none"):
        tuned_exe = compile_model(model, target, input_shapes=input_shapes, tuning_db=best)
    names = set(getattr(tuned_exe, "tuned_kernels", ()))
    if not names or len(tuned_exe.kernel_calls) != len(untuned_exe.kernel_calls):
        return InModelCheck()
    workload_of = {g: workload_key(fn, target) for g, fn in tuned_exe.groups if g in names}
    from ..runtime.placement import core_round_trip_ns, describe, placements

    trips = [round_trip, core_round_trip_ns()]
    untuned, tuned = time_in_place([untuned_exe, tuned_exe], random_inputs(untuned_exe), rounds)
    trips.append(core_round_trip_ns())
    per: dict = {}  # workload -> [name, untuned s, tuned s]
    for i, (name, t) in tuned.items():
        if name in workload_of and i in untuned:
            acc = per.setdefault(workload_of[name], [name, 0.0, 0.0])
            acc[1] += untuned[i][1]
            acc[2] += t
    rows, set_aside = [], []
    for w, (name, u, t) in per.items():
        kept = t <= u * (1 + margin)
        rows.append(InModel(name, w, u, t, kept))
        rec = best.get(w)
        if not kept and rec is not None:
            set_aside.append(Record(w, tname, rec.trace, rec.decisions, (),
                                    f"{SET_ASIDE}: {t * 1e6:.1f} us a run against {u * 1e6:.1f} us untuned",
                                    rec.task))
    total_u = sum(v[1] for v in untuned.values())
    total_t = sum(v[1] for v in tuned.values())
    note = ""
    moved = round_trip is not None and len({p for p in placements(trips) if p}) > 1
    if moved:
        note = (f"the cores moved since tuning began ({describe(trips[:1])} then, "
                f"{describe(trips[1:])} for the check)")
    elif baseline and abs(total_u / baseline - 1) > tolerance:
        note = (f"the untuned kernels took {total_u * 1e3:.2f} ms here against {baseline * 1e3:.2f} ms when "
                f"tuning began")
    if note:
        note += ": the machine is in another state, so nothing was set aside (check again later: ember tune ... --minutes 0)"
        rows = [dataclasses.replace(r, kept=True) for r in rows]
    else:
        database.add_all(set_aside)
    return InModelCheck(tuple(sorted(rows, key=lambda r: -r.untuned)), total_u, total_t, note)
