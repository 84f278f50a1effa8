"""Evolutionary search over one task's decisions, ranked by the cost model.

Each round: a population of decision sets -- the best measured so far, their mutations (one
knob changed) and crossovers, and fresh random ones -- is turned into schedules here (a few
milliseconds each: computes, schedule, lowering, features), candidates whose trace was already
measured or proposed are dropped, the cost model scores the rest, and the best few plus one
random pick (so a wrong model cannot starve the search) go to measurement.

The space is discovered as it goes: knobs reached only under some decisions are seen only then.
Candidates whose threads would write other parts of the output than the default schedule's
are not proposed (``keep_partition``; see :mod:`.partition` for why).

A trace's time is the mean of its measurements, and the apparent best is measured again
(:meth:`TaskSearch.incumbent`) until it has :data:`CONFIRM` of them: one measurement in the
model has a noise of ~3% (the default timed against itself), so the best of fifty candidates
measured once each is mostly the luckiest (the winner's curse). Measured on EfficientNet-B0's
1x1 conv 1152->192: the tuner's ranks 2-10 by single measurements (1.11-1.39x its default)
were all 0.77-0.91x its default when re-timed precisely.
"""
from __future__ import annotations

import json
import math
import random
import statistics

from ..errors import EmberError
from .features import loop_features
from .measure import quiet
from .partition import output_partition
from ..loop.knobs import decisions

__all__ = ["CONFIRM", "Candidate", "TaskSearch"]

#: Measurements of a task's apparent best before the search trusts it (its first included).
CONFIRM = 3


class Candidate:
    __slots__ = ("decisions", "features", "partition", "trace", "values")

    def __init__(self, values: dict, decisions_json: str, trace: str, features: list, partition=None):
        self.values = values
        self.decisions = decisions_json
        self.trace = trace
        self.features = features
        self.partition = partition  # which part of the output each thread writes (.partition)


class TaskSearch:
    """The search state of one task: its space, what was measured, the best so far."""

    def __init__(self, task, target, seed: int = 0, keep_partition: bool = True):
        self.task = task
        # propose only schedules whose threads write the parts of the output the default's do
        # (:mod:`.partition`: a timing alone cannot see what another split costs in the model)
        self.keep_partition = keep_partition
        self.target = target
        self.space = dict(task.knobs)
        self.rng = random.Random(seed)
        self.seen: set = set()  # traces proposed
        self.measured: dict = {}  # trace -> the mean of its measurements' medians, seconds (inf: one failed)
        self.samples: dict = {}  # trace -> its measurements' medians
        self.remeasuring: set = set()  # traces handed out by incumbent() and not recorded yet
        self.values_of: dict = {}  # trace -> the values that made it
        self.default_time: float | None = None
        self.best_time = math.inf
        self.best: str | None = None  # the best trace
        self.trials = 0
        self.failures = 0
        self.rounds = 0
        self.split_otherwise = 0  # candidates not proposed: their threads split the output otherwise
        self.history: list = []  # (trial number, best seconds) after each improvement
        self._cache: dict = {}  # decisions key -> Candidate or None
        self._splits: dict = {}  # (knob, value JSON) -> [candidates, of which split otherwise]

    # -- candidates ---------------------------------------------------------------------------
    def candidate(self, values: dict) -> Candidate | None:
        """The schedule ``values`` make (None when it does not schedule)."""
        from ..loop.lower import lower

        key = json.dumps(values, sort_keys=True)
        if key in self._cache:
            return self._cache[key]
        reference = self._partition() if self.keep_partition and key != "{}" else None
        try:
            with quiet(), decisions(values) as d:  # (not while a candidate is timed here)
                sch, args, name = self.task.builder.schedule(self.target)
                func = lower(sch, args, name)
                partition = output_partition(func, self.target.cores) if self.keep_partition else None
                # (one that will not be proposed needs no features: a third of a candidate's time)
                off = self.keep_partition and key != "{}" and partition != reference
                features = None if off else loop_features(func, self.target.cores)
            for k, knob in d.seen.items():
                self.space.setdefault(k, knob)
            c = Candidate(dict(d.values), d.to_json(), sch.trace.to_json(), features, partition)
            if self.keep_partition and key != "{}":
                self._note_split(c)
        except EmberError:
            c = None
        self._cache[key] = c
        return c

    def _note_split(self, c: Candidate) -> None:
        """Count, per knob value other than the default's, the candidates made with it and how
        many of those split the output otherwise (and so were lowered for nothing)."""
        for k, v in c.values.items():
            knob = self.space.get(k)
            if knob is not None and v != knob.default:
                n = self._splits.setdefault((k, json.dumps(v)), [0, 0])
                n[0] += 1
                n[1] += c.features is None

    def _choices(self, k: str) -> list:
        """Knob ``k``'s values, less those that split the output otherwise every time in at
        least four candidates (``conv.weight_group`` values that change how a task's rows
        group, ``dw.order="rows"``): most random draws would otherwise be lowered only to be
        turned away, which halved the candidates made per second."""
        choices = self.space[k].choices
        if not self.keep_partition:
            return list(choices)
        kept = [v for v in choices if not self._splits_otherwise(k, v)]
        return kept or list(choices)

    def _splits_otherwise(self, k: str, v) -> bool:
        n = self._splits.get((k, json.dumps(v)))
        return n is not None and n[0] >= 4 and n[1] == n[0]

    def _partition(self):
        c = self.candidate({})
        return c.partition if c is not None else None

    def _random(self) -> dict:
        return {k: self.rng.choice(self._choices(k)) for k in self.space}

    def _mutate(self, values: dict) -> dict:
        v = dict(values)
        k = self.rng.choice(sorted(self.space))
        v[k] = self.rng.choice(self._choices(k))
        return v

    def _cross(self, a: dict, b: dict) -> dict:
        return {k: (a if self.rng.random() < 0.5 else b).get(k, self.space[k].default) for k in self.space}

    def propose(self, model, n: int, population: int = 48) -> list:
        """Up to ``n`` unmeasured candidates, best predicted first (the default schedule first
        of all, in the first round)."""
        out = []
        if self.rounds == 0 and self.default_time is None:
            c = self.candidate({})
            if c is not None:
                self.seen.add(c.trace)
                out.append(c)
        parents = [self.values_of[t] for t in sorted(self.measured, key=self.measured.get)[:8]
                   if math.isfinite(self.measured[t])]
        pool: dict = {}
        tries = 0
        while len(pool) < population and tries < population * 4:
            tries += 1
            r = self.rng.random()
            if parents and r < 0.45:
                values = self._mutate(self.rng.choice(parents))
            elif len(parents) > 1 and r < 0.6:
                values = self._cross(*self.rng.sample(parents, 2))
            else:
                values = self._random()
            c = self.candidate(values)
            if c is None or c.trace in self.seen or c.trace in pool:
                continue
            if c.features is None:  # (its threads split the output otherwise than the default's)
                self.split_otherwise += 1
                continue
            pool[c.trace] = c
        cands = list(pool.values())
        scores = model.predict([c.features for c in cands]) if model is not None else None
        if scores is None:
            self.rng.shuffle(cands)
        else:
            cands = [c for _, _, c in sorted(zip(scores, range(len(cands)), cands), key=lambda t: (-t[0], t[1]))]
        want = n - len(out)
        picked = cands[:max(0, want - 1)]
        rest = cands[len(picked):]
        if rest and want > 0:
            picked.append(self.rng.choice(rest))  # one at random: exploration
        for c in picked:
            self.seen.add(c.trace)
        self.rounds += 1
        return out + picked

    # -- results ------------------------------------------------------------------------------
    def record(self, cand: Candidate, median: float, again: bool = False) -> bool:
        """Note a measurement of ``cand`` (``again``: a re-measurement of a trace measured
        before, not a trial); True when the best improved."""
        if not again:
            self.trials += 1
            self.failures += not math.isfinite(median)
        self.remeasuring.discard(cand.trace)
        self.values_of[cand.trace] = cand.values
        self.note(cand.trace, median)
        if math.isfinite(median) and cand.decisions == self._default_decisions():
            self.default_measured(median)
        return self.rebest()

    def note(self, trace: str, median: float) -> None:
        """One more measurement of ``trace`` (``inf``: it failed, and then it is never best)."""
        xs = self.samples.setdefault(trace, [])
        xs.append(median)
        self.measured[trace] = statistics.fmean(xs) if all(map(math.isfinite, xs)) else math.inf

    def note_default(self, default: Candidate, median: float) -> None:
        """The default measured again beside a batch (``median`` on this search's scale): one
        more sample of its trace, which later proposals may take as a parent. (Its own batch
        may still be out: with two workers, that measurement came back first, and a parent
        without its values was a KeyError.)"""
        self.values_of[default.trace] = default.values
        self.note(default.trace, median)

    def default_measured(self, median: float) -> None:
        """The default, measured beside a batch: its first time fixes the scale of this
        search's times (:func:`ember.tune.tuner._comparable`); later ones do not move it."""
        if self.default_time is None:
            self.default_time = median

    @property
    def baseline(self) -> float | None:
        """The default's time as candidates are compared with it: the mean of its measurements
        in a candidate's place in the batch, on the search's scale (or its first time, before
        there is one). Not the scale itself: the default in a candidate's place measured a
        steady 0.90-0.93x of its runs beside it on one ResNet-50 conv, 1.03x on another kernel,
        and a candidate must beat the default as measured where it is measured."""
        default = self.candidate({})
        m = self.measured.get(default.trace) if default is not None else None
        return m if m is not None and math.isfinite(m) else self.default_time

    def rebest(self) -> bool:
        """Set the best: the trace of least mean (the default's at :attr:`baseline`). True when
        a candidate became the best at a better time than before (noted in ``history``; the
        default's own times moving are not an improvement)."""
        default = self.candidate({})
        dtrace = default.trace if default is not None else None
        best, best_time = None, math.inf
        if self.baseline is not None and dtrace is not None:
            best, best_time = dtrace, self.baseline
        for trace, t in self.measured.items():
            if trace != dtrace and t < best_time:
                best, best_time = trace, t
        improved = best_time < self.best_time and best != dtrace
        self.best, self.best_time = best, best_time
        if improved:
            self.history.append((self.trials, best_time))
        return improved

    def incumbent(self) -> Candidate | None:
        """The apparent best, to be measured again with the next batch, while it has fewer than
        :data:`CONFIRM` measurements, is not the default and is not being measured again in a
        batch still out; else None."""
        if (self.best is None or len(self.samples.get(self.best, ())) >= CONFIRM or self.best not in self.values_of
                or self.best in self.remeasuring):
            return None
        default = self.candidate({})
        if default is not None and self.best == default.trace:
            return None
        c = self.candidate(self.values_of[self.best])
        # (the same decisions make another trace when the schedules changed since it was recorded)
        if c is None or c.trace != self.best:
            return None
        self.remeasuring.add(c.trace)
        return c

    def _default_decisions(self) -> str:
        c = self.candidate({})
        return c.decisions if c is not None else "{}"

    @property
    def speedup(self) -> float:
        if self.baseline is None or not math.isfinite(self.best_time):
            return 1.0
        return self.baseline / self.best_time
