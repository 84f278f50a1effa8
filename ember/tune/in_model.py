"""Tuned kernels checked where they run: in the model, beside the rest of its kernels.

A candidate is timed alone, on inputs that stand in for the model's. In the model the kernel
before it has just left its output in the caches (in the other core's, for the half it
wrote), so a schedule that won alone can lose in place (last seen: ResNet-50's 14x14 3x3 conv,
1.22x faster than its default alone, cold and paired, 0.78x in the model). After a tuning run
the untuned model and ``k`` tuned ones -- the first with each workload's best record alone,
the second with its runner-up, and so on -- are profiled in one process, alternately, each
kernel call's least time kept. Per workload the candidate least slow in place against its
default is kept (the best alone, or a runner-up: the ones ranked above it alone get a
*passed-over* record, and a compile applies it); where none of the ``k`` beats the default by
``margin``, the best alone gets a *set-aside* record, and a compile applies only records
measured faster than it (:meth:`~ember.tune.database.Database.best_per_workload`): the
default, unless later tuning finds better. Each profile is sorted by where the cores were
(:mod:`ember.runtime.placement`: a shared VM's two vCPUs sharing an L3 or not), and a
candidate's figure is its worst over the placements seen. Where the cores cannot be seen, a
check whose untuned kernels run far off their time at the start of tuning records nothing
(the machine in another state).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from .records import PASSED_OVER, SET_ASIDE, Record
from ..compiler.workload import target_name, workload_key

__all__ = ["PASSED_OVER", "SET_ASIDE", "InModel", "InModelCheck", "check_in_model", "time_in_place"]


@dataclasses.dataclass(frozen=True)
class InModel:
    """One tuned kernel timed in place: its calls' least times in one run, untuned and tuned,
    per placement of the cores the check ran in (``times``: ``(where, untuned s, tuned s)``;
    ``where`` is ``"near"``, ``"far"`` or ``""`` where unknown, see :mod:`ember.runtime.placement`),
    for the candidate that fared best there: the ``rank``-th best alone of the ``tried``."""

    name: str
    workload: str
    times: tuple
    kept: bool
    rank: int = 1
    tried: int = 1

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
        """The model's kernels in place in one placement with the kept candidates: the untuned
        ones, less what each kept candidate saved there."""
        for w, _, untuned, _ in self.placed:
            if w == where:
                return untuned - sum(u - t for r in self.rows if r.kept for w2, u, t in r.times if w2 == where)
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
        up = sum(1 for r in self.rows if r.kept and r.rank > 1)
        line = (f"in the model (kernels timed in place, least times{', by placement of the cores' if len(self.placed) > 1 else ''}): "
                f"{per}; {len(self.rows) - len(aside)} tuned kernel(s) kept"
                + (f" ({up} of them a runner-up: the best alone lost to it in place)" if up else ""))
        if aside:
            line += (f", {len(aside)} set aside, slower there than their default: "
                     + ", ".join(f"{r.name} {r.tuned * 1e6:.1f} vs {r.untuned * 1e6:.1f} us"
                                 + (f" ({r.where})" if len(self.placed) > 1 else "") for r in aside))
        return line + (f"\n{self.note}" if self.note else "")


def time_in_place(exes: Sequence, inputs: list, rounds: int = 4, repeat: int = 15) -> list:
    """Per executable (same program, other kernels): ``{call index: (kernel, least seconds)}``
    over ``rounds * repeat`` profiled runs of each, taken in turn, one run of each executable
    after the other (one process: no other runtime's threads, and machine noise, which only
    ever adds time, hits all alike). Run by run, not block by block: three identical
    EfficientNet-B0 executables profiled in blocks of 15 runs differed by up to 8% in their
    big kernels' least times (the machine's state lasts about a block), run by run by 0.5%."""
    least: list = [{} for _ in exes]
    for r in range(rounds * repeat):
        for k, e in enumerate(exes):
            for row in e.profile(*inputs, warmup=0 if r else 2, repeat=1).rows:
                old = least[k].get(row.index)
                if old is None or row.min < old[1]:
                    least[k][row.index] = (row.kernel, row.min)
    return least


def _rounds_by_placement(exes: Sequence, inputs: list, rounds: int, start: float | None) -> dict:
    """``{where: (per-executable least times as time_in_place gives them, rounds)}``: ``rounds``
    of profiled runs (:func:`time_in_place`'s 15 of each executable, in turn), each sorted by
    where the cores were before and after it (a round
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
                   round_trip: float | None = None, k: int = 3, defaults: dict | None = None,
                   precision: str = "fp32") -> InModelCheck:
    """The ``k`` best candidates alone of each workload in ``database``, timed in place in
    ``model`` against ``untuned_exe`` (static kernels); per workload the one least slow there
    than its default, in the worst placement of the cores seen, is kept, and recorded so that a
    compile applies it (the ones ranked above it alone are passed over); where none beats the
    default by ``margin`` the best alone is set aside (the module docstring).
    ``defaults``: ``{workload: the default schedule's trace}``; a candidate no faster alone than
    the default, and those after it, are not tried.

    A shared VM moves its vCPUs between sharing an L3 and not (:mod:`ember.runtime.placement`;
    the 2-core VM these figures come from: EfficientNet-B0 untuned at 7.0 or 9.0 ms), and
    schedules tuned in one placement can lose in the other (measured: the same database's
    tuned kernels 1.08x faster in the model in one, 0.90x in the other, some of them 0.6x).
    Each round is sorted by where the cores were, and a candidate is judged by its worst
    placement: a tuned model should not lose to the untuned one on the machine it was tuned
    on, whichever way the machine is placed.

    ``round_trip``: the cores' round trip when tuning began
    (:func:`~ember.runtime.placement.core_round_trip_ns`), where they could be seen. Where they
    could not (one core, no probe), ``baseline``, the untuned kernels' seconds when tuning
    began, stands in: when the check finds them off it by more than ``tolerance``, the machine
    is in another state, nothing is recorded and ``note`` says why (``""`` otherwise)."""
    from ..compiler.compile import compile_model
    from ..compiler.generic import generic_kernels
    from .tasks import random_inputs

    tname = target_name(target)
    # (this model's workloads only: a shared database holds other models' too)
    mine = {workload_key(fn, target) for _, fn in untuned_exe.groups}
    ranked = database.ranked_per_workload(tname, k, workloads=mine)
    for w, recs in ranked.items():
        cut = [i for i, r in enumerate(recs) if defaults and r.trace == defaults.get(w)]
        ranked[w] = recs[:cut[0]] if cut else recs
    variants = []  # (executable, {kernel name: workload}) of the j-th best per workload
    why = "no record ranks above its default" if ranked else "no record of this model's workloads"
    for j in range(max((len(r) for r in ranked.values()), default=0)):
        chosen = {w: recs[j] for w, recs in ranked.items() if len(recs) > j}
        with generic_kernels("none"):
            exe = compile_model(model, target, input_shapes=input_shapes, tuning_records=chosen,
                                precision=precision, wait=True)
        names = set(getattr(exe, "tuned_kernels", ()))
        if not names or len(exe.kernel_calls) != len(untuned_exe.kernel_calls):
            why = (f"the {j + 1}-th best records applied to no kernel" if not names else
                   f"with the {j + 1}-th best records the model made {len(exe.kernel_calls)} kernel calls, "
                   f"untuned {len(untuned_exe.kernel_calls)}")
            break
        variants.append((exe, {g: workload_key(fn, target) for g, fn in exe.groups if g in names}))
    if not variants:
        return InModelCheck(note=f"nothing checked: {why}")
    by_where = _rounds_by_placement([untuned_exe] + [e for e, _ in variants], random_inputs(untuned_exe), rounds,
                                    round_trip)
    if not by_where:
        return InModelCheck(note=f"nothing checked: the cores moved during every round ({2 * rounds} tried); "
                                 f"check again on a quieter machine (ember tune MODEL --minutes 0 --db DB)")
    per: dict = {}  # workload -> [name, {rank: {where: [untuned s, tuned s]}}]
    placed = []
    for where, (leasts, n) in by_where.items():
        untuned = leasts[0]
        for rank, ((_, workload_of), tuned) in enumerate(zip(variants, leasts[1:]), 1):
            for i, (name, t) in tuned.items():
                if name in workload_of and i in untuned:
                    entry = per.setdefault(workload_of[name], [name, {}])
                    acc = entry[1].setdefault(rank, {}).setdefault(where, [0.0, 0.0])
                    acc[0] += untuned[i][1]
                    acc[1] += t
        placed.append((where, n, sum(v[1] for v in untuned.values()), sum(v[1] for v in leasts[1].values())))
    placed.sort(key=lambda p: -p[1])
    rows, verdicts = [], []
    for w, (name, by_rank) in per.items():
        seen = {where for times in by_rank.values() for where in times}

        def worst(rank):  # (a candidate missing from a placement seen is not judged there)
            times = by_rank[rank]
            return max(t / u if u > 0 else math.inf for u, t in times.values()) if times.keys() == seen else math.inf

        rank = min(by_rank, key=lambda r: (worst(r), r))
        kept = worst(rank) <= 1 + margin
        row = InModel(name, w, tuple((x, u, t) for x, (u, t) in by_rank[rank].items()), kept, rank, len(by_rank))
        rows.append(row)
        recs = ranked[w]
        if kept:
            verdicts += [Record(w, tname, r.trace, r.decisions, (),
                                f"{PASSED_OVER}: its rank {i + 1} alone lost to rank {rank}'s in place "
                                f"({row.tuned * 1e6:.1f} us a run, untuned {row.untuned * 1e6:.1f})"
                                + (f" (cores {row.where})" if row.where else ""), r.task)
                         for i, r in enumerate(recs[:rank - 1])]
        else:
            verdicts.append(Record(w, tname, recs[0].trace, recs[0].decisions, (),
                                   f"{SET_ASIDE}: {row.tuned * 1e6:.1f} us a run against {row.untuned * 1e6:.1f} us "
                                   f"untuned" + (f" (cores {row.where})" if row.where else "")
                                   + (f", the least slow of its {len(by_rank)} best alone" if len(by_rank) > 1 else ""),
                                   recs[0].task))
    note = ""
    for where, n, u, _ in placed:
        # (where the cores can be seen, the rounds compare tuned and untuned within each
        # placement, side by side; a baseline taken minutes before is the weaker witness: the
        # last run's was taken with the machine in another state the probe does not separate,
        # 8.94 ms against 7.81 in the same placement, and would have kept a set that loses 6%)
        if baseline and round_trip is None and abs(u / baseline - 1) > tolerance:
            note = (f"the untuned kernels took {u * 1e3:.2f} ms here against {baseline * 1e3:.2f} ms when "
                    f"tuning began: the machine is in another state, so nothing was recorded (check again "
                    f"later: ember tune ... --minutes 0)")
    if note:  # (as a compile applies them now: each workload's best alone)
        rows = [dataclasses.replace(r, kept=True, rank=1, times=tuple((x, u, t) for x, (u, t) in per[r.workload][1][1].items()))
                if 1 in per[r.workload][1] else dataclasses.replace(r, kept=True) for r in rows]
    else:
        database.add_all(verdicts)
    return InModelCheck(tuple(sorted(rows, key=lambda r: -r.untuned)), tuple(placed), note)
