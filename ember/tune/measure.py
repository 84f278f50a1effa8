"""Building and timing candidates in an isolated worker process.

A candidate may crash (a schedule the checks let through that still writes out of bounds), hang
or compute a wrong answer; none of that may stop the tuner. So every build and measurement
runs in a child process (``python -m ember.tune.measure``): it builds the task's default
schedule first (the reference output), then each candidate in turn, announcing each before it
starts and answering one JSON line after. The parent (:class:`Measurer`) watches: a child that
dies took the announced candidate with it (``crash: signal 11``), one silent past the timeout
is killed (``timeout``), and a fresh child goes on with the candidates left. A result that
differs from the reference is ``wrong``.

Timing: the kernel is called through its bare C entry (no argument checks) in batches of at
least 2 ms, after a warm-up; ``times`` are seconds per call of each batch. Two things make a
time alone say what the kernel will do in the model:

* **Cold inputs.** In the model a kernel's weights were last read a whole run ago (ResNet-50
  reads 100 MB between), so they come from memory; timed on one set of arrays they sit in the
  caches, and a schedule that reuses them badly looks fine. Each call takes the next of
  several copies of the inputs, enough to fill twice the last-level cache (TVM's measurement
  flushes the caches for the same reason). Measured on ResNet-50's 3x3 convs: a tuned kernel
  0.91x its default with hot arrays was 0.69x with rotated copies and 0.71x in the model.
* **Paired with the default.** A shared machine's speed drifts by tens of percent from one
  second to the next, so a candidate timed now and the default timed earlier differ by the
  drift, and the best of a hundred candidates is mostly the luckiest. Each batch of a
  candidate is followed (then preceded: ABBA) by a batch of the default schedule, and
  ``baseline`` holds those; the tuner compares the candidate by the ratio of the pair.

Where the tuner gives a ``place`` (:mod:`ember.tune.in_place`), the checked candidates are
timed in the model instead, after all of the batch are built: each round runs the model once
per candidate and once with the default, and a crash there is announced as that candidate's.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import pickle
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

__all__ = ["Measurer", "Result", "measure_in_process", "quiet", "timing"]

RTOL = 1e-3


@dataclasses.dataclass
class Result:
    decisions: str  # JSON of the decisions the schedule used
    trace: str = ""
    times: tuple = ()
    error: str = ""
    build_seconds: float = 0.0
    baseline: tuple = ()  # the default schedule's times, each batch beside the same one of ``times``
    where: str = ""  # "in place" where timed in the model (ember.tune.in_place), "" alone

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.times)

    @property
    def median(self) -> float:
        return _middle(self.times) if self.ok else float("inf")

    @property
    def ratio(self) -> float | None:
        """The median of the candidate's time over the default's, batch by batch (None when not
        timed beside the default)."""
        if not self.ok or len(self.baseline) != len(self.times) or not all(b > 0 for b in self.baseline):
            return None
        return _middle([t / b for t, b in zip(self.times, self.baseline)])


def _middle(values) -> float:
    """The upper median: a measured value, never an average of two."""
    v = sorted(values)
    return v[len(v) // 2]


def _lock_file(which: str):
    from ..config import cache_dir

    os.makedirs(cache_dir(), exist_ok=True)
    return open(os.path.join(cache_dir(), f"tune-{which}.lock"), "a+")


@contextlib.contextmanager
def timing():
    """Held while a candidate is timed: this machine's other tuning work waits (:func:`quiet`).
    On 2 cores one busy Python process turns a parallel kernel's 100 us into the scheduler's
    tick (its second thread waits for the core), so a measurement must not overlap the search
    that proposes the next candidates. Two locks give the timer precedence: it announces
    itself on ``intent`` (new quiet work waits there), then waits on ``busy`` for the work
    already running to finish."""
    with _lock_file("intent") as intent, _lock_file("busy") as busy:
        fcntl.flock(intent, fcntl.LOCK_EX)
        fcntl.flock(busy, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(busy, fcntl.LOCK_UN)
            fcntl.flock(intent, fcntl.LOCK_UN)


@contextlib.contextmanager
def quiet():
    """Work that must not run while a candidate is timed on this machine."""
    global _QUIET
    if _QUIET is None:
        _QUIET = (_lock_file("intent"), _lock_file("busy"))
    intent, busy = _QUIET
    fcntl.flock(intent, fcntl.LOCK_SH)  # (waits while a timer has announced itself)
    fcntl.flock(busy, fcntl.LOCK_SH)
    fcntl.flock(intent, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(busy, fcntl.LOCK_UN)


_QUIET = None


class Measurer:
    """Measures candidates of one machine, one at a time, each task's in a child process.

    ``timeout``: seconds a candidate may take, build included, before it counts as hung.
    ``min_repeat``: timed batches per candidate."""

    def __init__(self, timeout: float = 30.0, repeat: int = 7, batch_seconds: float = 0.002):
        self.timeout = timeout
        self.repeat = repeat
        self.batch_seconds = batch_seconds

    def measure(self, builder, target_spec: str, candidates: Sequence[dict], place=None) -> list:
        """One :class:`Result` per candidate (decision dicts), in order; timed in the model
        where ``place`` (an :class:`~ember.tune.in_place.InPlace`) is given and here."""
        results: dict = {}
        pending = list(range(len(candidates)))
        if place is not None and not place.available():
            place = None  # (a remote worker without the model's library: timed alone)
        while pending:
            self._run_child(builder, target_spec, candidates, pending, results, place)
        return [results[i] for i in range(len(candidates))]

    def _run_child(self, builder, target_spec, candidates, pending: list, results: dict, place=None) -> None:
        job = pickle.dumps({"builder": builder, "target": target_spec, "repeat": self.repeat,
                            "batch_seconds": self.batch_seconds, "place": place,
                            "candidates": [(i, candidates[i]) for i in pending]})
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["EMBER_COMPILE_JOBS"] = "1"  # (no compile worker starting beside a timed kernel)
        # every core of the target, as the model runs (a Dask worker's environment says 1)
        from ..target import Target

        env["OMP_NUM_THREADS"] = str(Target.from_string(target_spec).cores)
        proc = subprocess.Popen([sys.executable, "-m", "ember.tune.measure"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        proc.stdin.write(job)
        proc.stdin.close()
        current: int | None = None
        deadline = time.monotonic() + self.timeout * 2  # (the reference: imports and a build)
        buf = b""
        err_tail = b""
        try:
            while True:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    self._kill(proc)
                    if current is None:  # the reference never finished
                        for i in list(pending):
                            results[i] = Result(json.dumps(candidates[i]), error="reference: timeout")
                            pending.remove(i)
                    else:
                        results[current] = Result(json.dumps(candidates[current]),
                                                  error=f"timeout: over {self.timeout:g} s")
                        pending.remove(current)
                    return
                ready, _, _ = select.select([proc.stdout, proc.stderr], [], [], min(wait, 1.0))
                if proc.stderr in ready:
                    chunk = os.read(proc.stderr.fileno(), 65536)
                    err_tail = (err_tail + chunk)[-4000:]
                if proc.stdout in ready:
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:  # the child is gone
                        code = proc.wait()
                        why = f"crash: signal {-code}" if code < 0 else f"crash: exit {code}"
                        tail = err_tail.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
                        if current is not None and current in pending:
                            results[current] = Result(json.dumps(candidates[current]), error=f"{why} {tail[0]}".strip())
                            pending.remove(current)
                        elif current is None:
                            for i in list(pending):
                                results[i] = Result(json.dumps(candidates[i]), error=f"reference: {why} {tail[0]}")
                                pending.remove(i)
                        return
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        msg = json.loads(line)
                        if msg["event"] == "ready":
                            deadline = time.monotonic() + self.timeout
                        elif msg["event"] == "start":
                            current = msg["i"]
                            deadline = time.monotonic() + self.timeout
                        elif msg["event"] == "result":
                            i = msg["i"]
                            results[i] = Result(msg["decisions"], msg["trace"], tuple(msg["times"]), msg["error"],
                                                msg["build_seconds"], tuple(msg.get("baseline", ())),
                                                msg.get("where", ""))
                            pending.remove(i)
                            current = None
                        elif msg["event"] == "reference_error":
                            for i in list(pending):
                                results[i] = Result(json.dumps(candidates[i]), error=f"reference: {msg['error']}")
                                pending.remove(i)
                        if not pending:
                            proc.wait(timeout=10)
                            return
        finally:
            if proc.poll() is None:
                self._kill(proc)
            proc.stdout.close()
            proc.stderr.close()

    @staticmethod
    def _kill(proc) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


# -- the child ---------------------------------------------------------------------------------

def _build(builder, target, values: dict):
    """``(kernel, decisions JSON, trace JSON)`` of the builder's schedule under ``values``."""
    from ..driver import build
    from ..loop.knobs import decisions

    with decisions(values) as d:
        sch, args, name = builder.schedule(target)
    mod = build(sch, args, name, target=target)
    return mod[name], d.to_json(), sch.trace.to_json()


def input_sets(input_bytes: int, cache_bytes: int, most: int = 64) -> int:
    """Copies of a kernel's inputs that timed calls go round: enough to fill twice
    ``cache_bytes`` (each call then reads its inputs from memory, as in the model), at most
    ``most`` (a small kernel's copies then sit in the outer caches: where the model leaves a small
    kernel's inputs too)."""
    return max(1, min(most, -(-2 * cache_bytes // max(1, input_bytes))))


def _batches(cfunc, ptr_sets: list, start: int, number: int) -> tuple:
    """Seconds per call of ``number`` calls, each on the next set of pointers; the next set."""
    n = len(ptr_sets)
    t0 = time.perf_counter()
    for k in range(start, start + number):
        cfunc(*ptr_sets[k % n])
    return (time.perf_counter() - t0) / number, (start + number) % n


def _timed(kernel, ptr_sets: list, repeat: int, batch_seconds: float, ref=None) -> tuple:
    """``(times, baseline)``: ``repeat`` batches of ``kernel``, each with one batch of ``ref``
    (the default schedule) beside it, alternately after and before (ABBA: a drift of the
    machine's speed then weighs on both alike)."""
    cfunc = kernel._cfunc
    cfunc(*ptr_sets[0])
    t0 = time.perf_counter()
    cfunc(*ptr_sets[-1])
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(batch_seconds / one))
    times, baseline = [], []
    at = 0
    for r in range(repeat):
        pair = [(cfunc, times), (ref._cfunc, baseline)] if ref is not None else [(cfunc, times)]
        for f, into in (pair if r % 2 == 0 else pair[::-1]):
            t, at = _batches(f, ptr_sets, at, number)
            into.append(t)
    return times, baseline


def _timed_in_place(timer, ref, held: list, repeat: int, emit) -> None:
    """Time the built candidates ``held`` (``(message, kernel)``) in the model (``timer``: a
    :class:`~ember.tune.in_place.PlaceTimer`): ``repeat`` rounds, each one run of the model per
    candidate and one with the default ``ref`` first (then last: ABBA over the rounds); each
    message gets its times and the default's of the same rounds."""
    for msg, kernel in [({"i": None}, ref)] + held:  # (warm-up: each kernel's code, the model's data)
        if msg["i"] is not None:
            emit({"event": "start", "i": msg["i"]})
        timer.time(kernel)
    for msg, _ in held:
        msg["times"], msg["baseline"], msg["where"] = [], [], "in place"
    for r in range(repeat):
        base = timer.time(ref) if r % 2 == 0 else None
        for msg, kernel in (held if r % 2 == 0 else held[::-1]):
            emit({"event": "start", "i": msg["i"]})  # (a crash here is this candidate's)
            msg["times"].append(timer.time(kernel))
        base = timer.time(ref) if base is None else base
        for msg, _ in held:
            msg["baseline"].append(base)


def _place_timer(place, ref_kernel):
    """A :class:`~ember.tune.in_place.PlaceTimer` for ``place``, or None where the task is
    timed alone (no place given, or the model's kernel is not the task's)."""
    if place is None:
        return None
    from ..errors import TuneError

    try:
        timer = place.timer()
    except TuneError:  # (a program run in phases, a kernel not in it)
        return None
    return timer if timer.fits(ref_kernel) else None


def measure_in_process(builder, target, candidates: Sequence, repeat: int = 7, batch_seconds: float = 0.002,
                       emit=None, place=None) -> list:
    """Build and time ``candidates`` (``(index, decisions)``) here, against the default
    schedule's output; ``emit(message)`` gets the protocol's messages. ``place``: an
    :class:`~ember.tune.in_place.InPlace` to time them in the model (after all are built and
    checked), not alone."""
    import numpy as np

    from ..runtime import ndarray

    import ctypes

    emit = emit or (lambda m: None)
    host = builder.arrays(seed=0)
    arrays = [ndarray.from_numpy(a).numpy() for a in host]  # (64-byte aligned copies)
    n_out = 1
    inputs = arrays[:-n_out]
    sets = input_sets(sum(a.nbytes for a in inputs), target.l3_bytes)
    copies = [inputs] + [[ndarray.from_numpy(a).numpy() for a in inputs] for _ in range(sets - 1)]
    ptr_sets = [[ctypes.c_void_p(a.ctypes.data) for a in c + arrays[-n_out:]] for c in copies]
    try:
        ref_kernel, _, _ = _build(builder, target, {})
        ref_kernel(*arrays)
        ref = [a.copy() for a in arrays[-n_out:]]
        timer = _place_timer(place, ref_kernel)
    except Exception as e:  # noqa: BLE001  (any failure of the reference ends this task's measurements)
        emit({"event": "reference_error", "error": f"{type(e).__name__}: {e}"})
        return []
    emit({"event": "ready"})
    out, held = [], []
    for i, values in candidates:
        emit({"event": "start", "i": i})
        t0 = time.perf_counter()
        msg = {"event": "result", "i": i, "decisions": json.dumps(values, sort_keys=True), "trace": "", "times": [],
               "error": "", "build_seconds": 0.0}
        try:
            kernel, msg["decisions"], msg["trace"] = _build(builder, target, values)
            msg["build_seconds"] = time.perf_counter() - t0
            for a in arrays[-n_out:]:
                a[...] = 0
            with timing():
                kernel(*arrays)
            worst = 0.0
            for got, want in zip(arrays[-n_out:], ref):
                got, want = got.astype(np.float64), want.astype(np.float64)  # (8-bit codes would wrap)
                scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
                diff = float(np.max(np.abs(got - want))) if want.size else 0.0
                if not np.isfinite(diff) or diff > RTOL * scale:
                    worst = max(worst, diff if np.isfinite(diff) else float("inf"))
            if worst:
                msg["error"] = f"wrong: max difference {worst:.3g} from the default schedule's output"
            elif timer is not None:
                held.append((msg, kernel))
                continue
            else:
                with timing():
                    msg["times"], msg["baseline"] = _timed(kernel, ptr_sets, repeat, batch_seconds, ref_kernel)
        except Exception as e:  # noqa: BLE001  (a candidate that fails to build is a failed record)
            msg["error"] = f"build: {type(e).__name__}: {str(e)[:300]}"
        emit(msg)
        out.append(msg)
    if held:
        with timing():
            _timed_in_place(timer, ref_kernel, held, repeat, emit)
        for msg, _ in held:
            emit(msg)
            out.append(msg)
    return out


def _child_main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # (anything else printed goes to stderr, not into the protocol)
    job = pickle.loads(sys.stdin.buffer.read())
    from ..target import Target

    target = Target.from_string(job["target"])

    def emit(m):
        out.write(json.dumps(m) + "\n")
        out.flush()
    measure_in_process(job["builder"], target, job["candidates"], job["repeat"], job["batch_seconds"], emit,
                       job.get("place"))


if __name__ == "__main__":
    _child_main()
