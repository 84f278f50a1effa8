"""Tuned kernels checked where they run: in the model, beside the rest of its kernels.

A candidate is timed alone, its inputs hot in the caches and the machine to itself. In the
model the kernel before it has just filled the caches with other data, so a schedule that won
alone can lose in place (last seen: three tiny squeeze-excitation kernels of EfficientNet-B0,
12-15 us each, 3-5 us slower in the model though faster alone). After a tuning run the
untuned and the tuned model are profiled in one process, alternately, each kernel call's least
time kept; a tuned kernel slower in place than its default by more than ``margin`` gets a
*set-aside* record for its trace. A compile then applies only records measured faster than
the set-aside one (:meth:`~ember.tune.database.Database.best_per_workload`): the default,
unless later tuning finds better. Each profile is sorted by where the cores were
(:mod:`ember.runtime.placement`: a shared VM's two vCPUs sharing an L3 or not), and a tuned
kernel slower than its default in any placement seen is set aside. Where the cores cannot be
seen, a check whose untuned kernels run far off their time at the start of tuning sets nothing
aside (the machine in another state).
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
    """One tuned kernel timed in place: its calls' least times in one run, untuned and tuned,
    per placement of the cores the check ran in (``times``: ``(where, untuned s, tuned s)``;
    ``where`` is ``"near"``, ``"far"`` or ``""`` where unknown, see :mod:`ember.runtime.placement`)."""

    name: str
    workload: str
    times: tuple
    kept: bool

    def _worst(self) -> tuple:
        return max(self.times, key=lambda t: t[2] / t[1] if t[1] > 0 else math.inf)

    @property
    def untuned(self) -> float:
        """Seconds untuned, in the placement where the tuned kernel fared worst."""
        return self._worst()[1]

    @property
    def tuned(self) -> float:
        return self._worst()[2]

    @property
    def where(self) -> str:
        return self._worst()[0]


@dataclasses.dataclass(frozen=True)
class InModelCheck:
    """What :func:`check_in_model` found: the tuned kernels' rows, and the whole model's kernel
    seconds in place, untuned and tuned (before any was set aside), per placement of the cores
    (``placed``: ``(where, rounds, untuned s, tuned s)``, the most seen first; ``untuned`` and
    ``tuned`` are its figures); ``note`` says why nothing was set aside, when the machine had
    changed state (``""`` otherwise)."""

    rows: tuple = ()
    placed: tuple = ()
    note: str = ""

    @property
    def untuned(self) -> float:
        return self.placed[0][2] if self.placed else math.nan

    @property
    def tuned(self) -> float:
        return self.placed[0][3] if self.placed else math.nan

    def kept_in(self, where: str) -> float:
        """The tuned model's kernels in place in one placement, the set-aside ones back at
        their default."""
        for w, _, _, tuned in self.placed:
            if w == where:
                return tuned - sum(t - u for r in self.rows if not r.kept for w2, u, t in r.times if w2 == where)
        return math.nan

    @property
    def kept(self) -> float:
        """:meth:`kept_in` the placement most seen."""
        return self.kept_in(self.placed[0][0]) if self.placed else math.nan

    def summary(self) -> str:
        """The report's lines."""
        aside = [r for r in self.rows if not r.kept]
        per = "; ".join(f"{(w + ' (' + str(n) + ' rounds)') if w else ''}{': ' if w else ''}"
                        f"{u * 1e3:.2f} -> {self.kept_in(w) * 1e3:.2f} ms ({u / self.kept_in(w):.2f}x)"
                        for w, n, u, _ in self.placed)
        line = (f"in the model (kernels timed in place, least times{', by placement of the cores' if len(self.placed) > 1 else ''}): "
                f"{per}; {len(self.rows) - len(aside)} tuned kernel(s) kept")
        if aside:
            line += (f", {len(aside)} set aside, slower there than their default: "
                     + ", ".join(f"{r.name} {r.tuned * 1e6:.1f} vs {r.untuned * 1e6:.1f} us"
                                 + (f" ({r.where})" if len(self.placed) > 1 else "") for r in aside))
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


def _rounds_by_placement(exes: Sequence, inputs: list, rounds: int, start: float | None) -> dict:
    """``{where: (per-executable least times as time_in_place gives them, rounds)}``: ``rounds``
    alternating profiles, each sorted by where the cores were before and after it (a round
    they moved in is dropped, and another run, up to twice as many in all). ``where`` is
    relative to the least round trip seen, ``start`` (the one when tuning began) among them;
    ``""`` where the cores cannot be seen (one core)."""
    from ..runtime.placement import core_round_trip_ns, group_placements

    got: list = []  # ((trip before, trip after), least times)
    for _ in range(2 * rounds):
        before = core_round_trip_ns()
        least = time_in_place(exes, inputs, rounds=1)
        got.append(((before, core_round_trip_ns()), least))
        where = group_placements([trips for trips, _ in got], also=[start])
        # a round counts in one placement, or unplaced where the cores cannot be seen at all
        used = [w is not None or trips == (None, None) for (trips, _), w in zip(got, where)]
        if sum(used) >= rounds:
            break
    out: dict = {}
    for (_, least), w, ok in zip(got, where, used):
        if not ok:
            continue  # the cores moved while it ran
        merged, n = out.get(w or "", ([{} for _ in exes], 0))
        for m, d in zip(merged, least):
            for idx, (name, t) in d.items():
                if idx not in m or t < m[idx][1]:
                    m[idx] = (name, t)
        out[w or ""] = (merged, n + 1)
    return out


def check_in_model(model, database, untuned_exe, target, *, input_shapes=None, rounds: int = 4,
                   margin: float = 0.03, baseline: float | None = None, tolerance: float = 0.1,
                   round_trip: float | None = None) -> InModelCheck:
    """The kernels that ``database``'s best records schedule, timed in place in ``model`` against
    ``untuned_exe`` (static kernels); the records of those slower than their default by more
    than ``margin`` in any placement of the cores the check saw are set aside.

    A shared VM moves its vCPUs between sharing an L3 and not (:mod:`ember.runtime.placement`;
    the 2-core VM these figures come from: EfficientNet-B0 untuned at 7.0 or 9.0 ms), and
    schedules tuned in one placement can lose in the other (measured: the same database's
    tuned kernels 1.08x faster in the model in one, 0.90x in the other, some of them 0.6x).
    Each round is sorted by where the cores were, and a tuned kernel is kept only where it is
    not slower in any placement seen: a tuned model should not lose to the untuned one on the
    machine it was tuned on, whichever way the machine is placed.

    ``round_trip``: the cores' round trip when tuning began
    (:func:`~ember.runtime.placement.core_round_trip_ns`), where they could be seen. Where they
    could not (one core, no probe), ``baseline``, the untuned kernels' seconds when tuning
    began, stands in: when the check finds them off it by more than ``tolerance``, the machine
    is in another state, nothing is set aside and ``note`` says why (``""`` otherwise)."""
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
    by_where = _rounds_by_placement([untuned_exe, tuned_exe], random_inputs(untuned_exe), rounds, round_trip)
    per: dict = {}  # workload -> [name, {where: [untuned s, tuned s]}]
    placed = []
    for where, ((untuned, tuned), n) in by_where.items():
        for i, (name, t) in tuned.items():
            if name in workload_of and i in untuned:
                acc = per.setdefault(workload_of[name], [name, {}])[1].setdefault(where, [0.0, 0.0])
                acc[0] += untuned[i][1]
                acc[1] += t
        placed.append((where, n, sum(v[1] for v in untuned.values()), sum(v[1] for v in tuned.values())))
    placed.sort(key=lambda p: -p[1])
    rows, set_aside = [], []
    for w, (name, times) in per.items():
        kept = all(t <= u * (1 + margin) for u, t in times.values())
        rows.append(InModel(name, w, tuple((k, u, t) for k, (u, t) in times.items()), kept))
        rec = best.get(w)
        if not kept and rec is not None:
            worst = rows[-1]
            set_aside.append(Record(w, tname, rec.trace, rec.decisions, (),
                                    f"{SET_ASIDE}: {worst.tuned * 1e6:.1f} us a run against {worst.untuned * 1e6:.1f} us "
                                    f"untuned" + (f" (cores {worst.where})" if worst.where else ""), rec.task))
    note = ""
    for where, n, u, _ in placed:
        # (where the cores can be seen, the rounds compare tuned and untuned within each
        # placement, side by side; a baseline taken minutes before is the weaker witness: the
        # last run's was taken with the machine in another state the probe does not separate,
        # 8.94 ms against 7.81 in the same placement, and would have kept a set that loses 6%)
        if baseline and round_trip is None and abs(u / baseline - 1) > tolerance:
            note = (f"the untuned kernels took {u * 1e3:.2f} ms here against {baseline * 1e3:.2f} ms when "
                    f"tuning began: the machine is in another state, so nothing was set aside (check again "
                    f"later: ember tune ... --minutes 0)")
    if note:
        rows = [dataclasses.replace(r, kept=True) for r in rows]
    else:
        database.add_all(set_aside)
    return InModelCheck(tuple(sorted(rows, key=lambda r: -r.untuned)), tuple(placed), note)
