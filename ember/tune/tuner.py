"""``ember tune``: tune a model's kernels within a time budget, into a records database.

The loop: extract the tasks (:mod:`.tasks`), load what the database already knows (records
of these workloads resume their searches; records with features of any workload train the
cost model before the first measurement), then until the budget is spent pick the task with
the most expected gain, let its search (:mod:`.search`) propose a batch, measure it on the
runner (:mod:`.runners`) while the next batch is proposed, store every result as a record and
retrain the cost model as results come in.

Expected gain of a task: the time it still costs the model (its share, scaled by its best
over its default) times a chance of improvement that shrinks with the rounds spent on it and
grows with its recent improvements. A first round counts as half the task's time: heavy
tasks start first, and a kernel of 0.1% of the model waits until the big ones flatten out.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time

from ..errors import TuneError
from .cost_model import CostModel
from .measure import quiet
from .records import Record
from .search import TaskSearch
from ..compiler.workload import target_name

__all__ = ["TuneReport", "tune"]


@dataclasses.dataclass
class TaskReport:
    name: str
    workload: str
    description: str
    weight: float  # seconds of one model run (untuned)
    default: float  # seconds per call: the default as candidates are compared with it (TaskSearch.baseline)
    best: float
    trials: int
    failures: int
    first_improvement: int | None  # trials until the first candidate beat the default
    history: list  # (trial, best seconds)

    @property
    def speedup(self) -> float:
        return self.default / self.best if self.best and math.isfinite(self.best) and self.default else 1.0


@dataclasses.dataclass
class TuneReport:
    model: str
    seconds: float
    trials: int
    failures: int
    tasks: list  # TaskReport, heaviest first
    curve: list  # (elapsed seconds, estimated model latency in seconds)
    latency_untuned: float
    transfer_samples: int
    where: str
    in_model: object = None  # the InModelCheck after the budget (ember.tune.in_model), or None
    timed: str = "alone"  # where candidates were timed: "in the model" (ember.tune.in_place), "alone", or a mix
    remeasured: int = 0  # measurements of apparent bests again (.search.CONFIRM), not counted as trials
    input_shapes: dict = dataclasses.field(default_factory=dict)  # the shapes of symbolic inputs tuned at

    @property
    def trials_per_minute(self) -> float:
        return self.trials / (self.seconds / 60) if self.seconds else 0.0

    @property
    def latency_estimate(self) -> float:
        return self.curve[-1][1] if self.curve else self.latency_untuned

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.update(trials_per_minute=self.trials_per_minute, latency_estimate=self.latency_estimate)
        if self.in_model is not None:
            m = self.in_model
            for k, v in (("untuned", m.untuned), ("tuned", m.tuned), ("kept", m.kept)):
                d["in_model"][k] = v if math.isfinite(v) else None
            for row, r in zip(d["in_model"]["rows"], m.rows):
                row.update(untuned=r.untuned, tuned=r.tuned, where=r.where)
        for t, r in zip(d["tasks"], self.tasks):
            t["speedup"] = r.speedup
            for k in ("default", "best"):
                t[k] = t[k] if math.isfinite(t[k]) else None
        return d

    def table(self) -> str:
        lines = [f"{'task':44} {'share':>6} {'default us':>11} {'best us':>9} {'speedup':>8} {'trials':>7} {'1st gain':>8}"]
        for t in self.tasks:
            first = "-" if t.first_improvement is None else str(t.first_improvement)
            # (a task the budget never reached has no times: "-", not "inf")
            default, best = (f"{x * 1e6:.1f}" if math.isfinite(x) else "-" for x in (t.default, t.best))
            lines.append(f"{t.description[:44]:44} {100 * t.weight / max(self.latency_untuned, 1e-12):5.1f}% "
                         f"{default:>11} {best:>9} {t.speedup:7.2f}x {t.trials:7d} {first:>8}")
        lines.append(f"{self.trials} trials in {self.seconds:.0f} s ({self.trials_per_minute:.0f} per minute, "
                     f"{self.failures} failed{f', {self.remeasured} apparent bests measured again' if self.remeasured else ''}) "
                     f"on {self.where}, timed {self.timed}; estimated latency "
                     f"{self.latency_untuned * 1e3:.2f} -> {self.latency_estimate * 1e3:.2f} ms")
        if self.in_model is not None and self.in_model.rows:
            lines.append(self.in_model.summary())
        return "\n".join(lines)


def _estimate(searches: list, untuned: float) -> float:
    saved = 0.0
    for s in searches:
        if s.baseline and math.isfinite(s.best_time):
            saved += s.task.weight * (1 - s.best_time / s.baseline)
    return untuned - saved


def _priority(s: TaskSearch) -> float:
    if s.rounds == 0:  # (a first round is worth most, but a tiny kernel's is worth little)
        return s.task.weight * 0.5
    cost = s.task.weight * (s.best_time / s.baseline if s.baseline and math.isfinite(s.best_time) else 1.0)
    recent = sum(1 for trial, _ in s.history if trial > s.trials - 16 and trial > 1)
    return cost * (0.25 / math.sqrt(s.rounds) + 0.1 * recent)


def _resume(search: TaskSearch, records: list) -> None:
    """What the database knows of this workload: measured traces (each by the mean of its
    records, as the database ranks them), the best, the default. A trace the in-model check
    set aside or passed over is never best here either."""
    from .records import PASSED_OVER, SET_ASIDE

    default = search.candidate({})
    defaults = []
    for r in records:
        try:
            values = json.loads(r.decisions)
        except ValueError:
            continue
        search.seen.add(r.trace)
        search.values_of[r.trace] = values
        search.note(r.trace, r.median)
        if r.error.startswith((SET_ASIDE, PASSED_OVER)):
            continue
        if default is not None and r.trace == default.trace and r.ok:
            defaults.append(r.median)
    if defaults:  # (the scale of its records: new ones are timed on it too)
        search.default_time = statistics.fmean(defaults)
    search.rebest()
    search.history.clear()  # (improvements of this run only)
    if search.measured:
        search.rounds = 1
        search.trials = 0


def _likely_input_shapes(model) -> dict:
    """The likely shapes (:func:`ember.compiler.likely.likely_shapes`) of ``model``'s inputs
    with symbolic dims; empty for a static model or one whose symbols have none."""
    from ..compiler.likely import likely_shapes
    from ..graph.ir import Module

    if isinstance(model, Module):
        return likely_shapes(model.main)
    from ..frontend.onnx.checks import load_model
    from ..frontend.onnx.importer import from_onnx

    proto, _ = load_model(model)
    return likely_shapes(from_onnx(proto).main)


def tune(model, db, *, minutes: float = 8.0, cluster: str | None = None, target=None, batch: int = 8,
         workers: int = 1, timeout: float = 30.0, transfer: bool = True, progress: bool | None = None,
         max_tasks: int | None = None, input_shapes=None, seed: int = 0, log=None,
         only=None, validate: bool = True, keep_partition: bool = True, in_place: bool = True,
         precision: str = "fp32") -> TuneReport:
    """Tune ``model``'s kernels for ``minutes`` into the records database ``db`` (a path or
    URL, or an open Database); returns a :class:`TuneReport`. ``cluster``: a Dask scheduler's
    address, ``None`` for a LocalCluster of ``workers``, ``"none"`` for child processes of this
    machine without Dask. ``transfer``: train the cost model on the database's records of
    other workloads before the first measurement. ``only``: keep the tasks for which
    ``only(task)`` is true (``ember tune --only conv2d`` keeps descriptions containing it).
    ``precision``: as ``ember.compile``'s (``"bf16"``: its bfloat16 kernels are the ones tuned).
    ``validate``: after the budget, time each kernel's best few in the model against the
    default and keep the one least slow there, or the default (:mod:`.in_model`). ``keep_partition``:
    propose only schedules whose threads write the same parts of the output as the default
    schedule's (:mod:`.partition`; ``ember tune --any-partition`` turns it off). ``in_place``:
    time candidates in the model, where the measuring processes can load it (this machine's;
    :mod:`.in_place`), else alone (``ember tune --alone``)."""
    from ..kernels.common import host
    from .database import Database, open_database
    from .runners import make_runner
    from .tasks import extract_tasks

    target = host(target)
    tname = target_name(target)
    spec = f"llvm -mtriple={target.triple} -mcpu={target.cpu}" if target != host() else "llvm"
    out = log or sys.stderr
    show = progress if progress is not None else out.isatty()
    t_start = time.monotonic()
    if input_shapes is None:
        # a model with symbolic inputs is tuned at its likely shape, which its dynamic compile's
        # static twins are made for (ember.compiler.twin), so the records serve it as it is
        input_shapes = _likely_input_shapes(model)
        if input_shapes:
            shown = " ".join(f"{k}={','.join(map(str, v))}" for k, v in input_shapes.items())
            print(f"tuning at the likely input shape {shown} (--input-shape chooses another)", file=out, flush=True)
    print("extracting tasks (compile, profile) ...", file=out, flush=True)
    tasks, exe = extract_tasks(model, target, input_shapes=input_shapes, precision=precision)
    if not tasks:
        raise TuneError("this model has no kernel with schedule decisions to tune")
    if only is not None:
        tasks = [t for t in tasks if only(t)]
        if not tasks:
            raise TuneError("no task of this model is left by the filter (only=...)")
    if max_tasks:
        tasks = tasks[:max_tasks]
    untuned = getattr(exe, "tune_latency", 0.0) or sum(exe.tune_seconds.values())
    from ..runtime.placement import core_round_trip_ns

    start_trip = core_round_trip_ns()  # where the cores were for that baseline (see the check)
    database = db if isinstance(db, Database) else open_database(db)
    # (closed here whatever happens, when opened here: a Database passed in is the caller's)
    with contextlib.ExitStack() as stack:
        if database is not db:
            stack.enter_context(contextlib.closing(database))
        cost = CostModel()
        searches = [TaskSearch(t, target, seed + i, keep_partition) for i, t in enumerate(tasks)]
        known = {t.workload for t in tasks}
        for s in searches:
            _resume(s, database.records(workload=s.task.workload, target=tname))
        transfer_samples = 0
        if transfer:
            transfer_samples = cost.add_records(r for r in database.records(target=tname) if r.workload not in known)
        cost.add_records(r for w in known for r in database.records(workload=w, target=tname))
        cost.fit()
        deadline = t_start + minutes * 60
        places = {}
        if in_place and cluster in (None, "local", "none") and minutes > 0:
            # (a remote cluster's workers cannot load this machine's file: they time alone)
            from .in_place import InPlace, export_untuned

            library = stack.enter_context(tempfile.TemporaryDirectory(prefix="ember-tune-"))
            path = export_untuned(exe, library)
            places = {t.name: InPlace(path, t.name) for t in tasks}
        runner = make_runner(cluster, timeout=timeout, workers=workers)
        print(f"tuning {len(tasks)} task(s) for {minutes:g} min on {runner.where}, candidates timed "
              + ("in the model" if places else "alone")
              + (f"; cost model pre-trained on {transfer_samples} record(s) of other workloads" if transfer_samples else ""),
              file=out, flush=True)
        display = _Display(searches, untuned, show, out)
        curve = [(0.0, _estimate(searches, untuned))]
        inflight: list = []  # (future, search, candidates, the apparent best again or None, with the default)
        trials = failures = confirmations = 0
        timed = [0, 0]  # candidates timed alone, in the model (a worker that cannot load it times alone)
        since_fit = 0
        try:
            while True:
                now = time.monotonic()
                if now < deadline:
                    while len(inflight) < runner.workers + 1:
                        ready = [s for s in searches if not _exhausted(s)]
                        if not ready:
                            break
                        s = max(ready, key=_priority)
                        cands = s.propose(cost if cost.trained else None, batch)
                        if not cands:
                            s.rounds += 1000  # (nothing new: the space is exhausted)
                            continue
                        # the apparent best again, until it is measured CONFIRM times (the
                        # winner's curse: .search), and the default with every batch: each
                        # candidate is timed by its ratio to the default in the same rounds
                        again = s.incumbent()
                        default = s.candidate({})
                        values = [c.values for c in cands + [again, default] if c is not None]
                        fut = runner.submit(s.task.builder, spec, values, places.get(s.task.name))
                        inflight.append((fut, s, cands, again, default is not None))
                if not inflight:
                    break
                done = [x for x in inflight if x[0].done()]
                if not done:
                    time.sleep(0.05)
                    if time.monotonic() > deadline + 2 * timeout:
                        break
                    continue
                for item in done:
                    inflight.remove(item)
                    fut, s, cands, again, with_default = item
                    try:
                        _, _, _, results = fut.result()
                    except Exception as e:  # noqa: BLE001  (a lost worker: the batch fails, tuning goes on)
                        results = [None] * (len(cands) + (again is not None) + with_default)
                        print(f"{s.task.name}: a measurement batch was lost ({type(e).__name__}: {e})", file=out)
                    records = []
                    base = results.pop() if with_default and len(results) > len(cands) + (again is not None) else None
                    default = s.candidate({})
                    if base is not None and base.ok and default is not None:
                        # the default, measured again: its first time fixes the scale; a record
                        # too, on that scale (paired with itself: ratio 1, give or take noise)
                        s.default_measured(base.median)
                        times = _comparable(base, s.default_time)
                        s.note_default(default, statistics.median(times))
                        s.rebest()
                        records.append(Record(s.task.workload, tname, base.trace or default.trace, base.decisions,
                                              times, "", s.task.description, json.dumps(default.features)))
                    if again is not None and len(results) > len(cands):
                        r = results.pop()
                        times = _comparable(r, s.default_time)
                        s.record(again, statistics.median(times) if times else math.inf, again=True)
                        confirmations += 1
                        cost.add(s.task.workload, again.trace, again.features, s.measured[again.trace])
                        records.append(Record(s.task.workload, tname, again.trace, again.decisions, times,
                                              (r.error if r else "lost") or "", s.task.description,
                                              json.dumps(again.features)))
                    elif again is not None:  # (no result came back for it: it may be handed out again)
                        s.remeasuring.discard(again.trace)
                    for c, r in zip(cands, results):
                        times = _comparable(r, s.default_time)
                        median = statistics.median(times) if times else math.inf
                        trace = r.trace if r is not None and r.trace else c.trace
                        s.record(c, median)
                        trials += 1
                        failures += r is None or not r.ok
                        if r is not None and r.ok:
                            timed[r.where == "in place"] += 1
                        cost.add(s.task.workload, trace, c.features, median)
                        records.append(Record(s.task.workload, tname, trace, r.decisions if r else c.decisions,
                                              times, (r.error if r else "lost") or "",
                                              s.task.description, json.dumps(c.features)))
                    database.add_all(records)
                    since_fit += len(cands)
                    if since_fit >= 16:
                        with quiet():
                            cost.fit()
                        since_fit = 0
                    curve.append((time.monotonic() - t_start, _estimate(searches, untuned)))
                    display.update(time.monotonic() - t_start)
        finally:
            display.close()
            runner.close()
        check = None
        # (with --minutes 0, what the database already holds for this model is checked)
        if validate and (trials or any(s.best is not None for s in searches)):
            from .in_model import check_in_model

            print("checking the tuned kernels in the model ...", file=out, flush=True)
            defaults = {s.task.workload: d.trace for s in searches if (d := s.candidate({})) is not None}
            check = check_in_model(model, database, exe, target, input_shapes=input_shapes,
                                   baseline=untuned or None, round_trip=start_trip, defaults=defaults,
                                   precision=precision)
    reports = [TaskReport(s.task.name, s.task.workload, s.task.description, s.task.weight, s.baseline or math.inf,
                          s.best_time, s.trials, s.failures, _first_improvement(s), list(s.history))
               for s in searches]
    return TuneReport(str(model), time.monotonic() - t_start, trials, failures, reports, curve, untuned,
                      transfer_samples, runner.where, check, _timed_where(*timed), confirmations,
                      {k: tuple(v) for k, v in (input_shapes or {}).items()})


def _comparable(r, default_time: float | None) -> tuple:
    """A candidate's times as the tuner compares and records them: each batch's time over the
    default's batch beside it, times ``default_time`` -- the default's time as first measured
    (or its records' mean, resuming), fixed for the search so that every record of it is on
    one scale -- or the raw times where it was not timed beside the default (a failure:
    empty). (A scale that moved to each new least time of the default put early and late
    candidates of one EfficientNet-B0 conv on scales 17% apart: the late ones won by it.)"""
    if r is None or not r.ok:
        return ()
    if r.ratio is None or not default_time:
        return tuple(r.times)
    return tuple(default_time * t / b for t, b in zip(r.times, r.baseline))


def _timed_where(alone: int, in_place: int) -> str:
    """Where the candidates were timed, for the report."""
    if alone and in_place:
        return f"in the model ({alone} of {alone + in_place} alone: their workers could not load it)"
    return "in the model" if in_place else "alone"


def _exhausted(s: TaskSearch) -> bool:
    return s.rounds >= 1000


def _first_improvement(s: TaskSearch) -> int | None:
    """Trials of this run until a candidate first beat the default schedule (the default
    itself is the first trial)."""
    if s.baseline is None:
        return None
    for trial, t in s.history:
        if t < s.baseline * 0.98:
            return trial
    return None


class _Display:
    """A live table of the tasks (rich) on a terminal; a line per improvement elsewhere."""

    def __init__(self, searches: list, untuned: float, show: bool, out):
        self.searches, self.untuned, self.out = searches, untuned, out
        self.live = None
        self.best = {id(s): math.inf for s in searches}
        if show:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(self._table(0.0), console=Console(file=out), refresh_per_second=2, transient=False)
            self.live.start()

    def _table(self, elapsed: float):
        from rich.table import Table

        est = _estimate(self.searches, self.untuned)
        t = Table(title=f"ember tune: {elapsed:.0f} s, estimated latency {self.untuned * 1e3:.2f} -> {est * 1e3:.2f} ms")
        for col in ("task", "share", "default us", "best us", "speedup", "trials"):
            t.add_column(col, justify="left" if col == "task" else "right")
        for s in sorted(self.searches, key=lambda s: -s.task.weight)[:20]:
            d = s.baseline
            t.add_row(s.task.description[:48], f"{100 * s.task.weight / max(self.untuned, 1e-12):.1f}%",
                      f"{d * 1e6:.1f}" if d else "-", f"{s.best_time * 1e6:.1f}" if math.isfinite(s.best_time) else "-",
                      f"{s.speedup:.2f}x", str(s.trials))
        return t

    def update(self, elapsed: float) -> None:
        if self.live is not None:
            self.live.update(self._table(elapsed))
            return
        for s in self.searches:
            if s.best_time < self.best[id(s)] and s.baseline:
                self.best[id(s)] = s.best_time
                print(f"[{elapsed:5.0f} s] {s.task.description[:48]}: {s.baseline * 1e6:.1f} -> "
                      f"{s.best_time * 1e6:.1f} us ({s.speedup:.2f}x, {s.trials} trials); estimated latency "
                      f"{_estimate(self.searches, self.untuned) * 1e3:.2f} ms", file=self.out, flush=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
