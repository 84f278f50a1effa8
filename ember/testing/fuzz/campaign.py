"""A fuzz run: cases spread over workers for a time or a count, failures saved with what
replays them (:func:`replay`), a :class:`Summary` of outcomes per kind."""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import shutil
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional

from .cases import KINDS, SUFFIX, Case
from .child import FAILURES, OUTCOMES, Result, Zygote, build_corpus, run_input


@dataclasses.dataclass
class Summary:
    seed: int
    seconds: float = 0.0
    counts: Dict[str, collections.Counter] = dataclasses.field(
        default_factory=lambda: {k: collections.Counter() for k in KINDS})
    failures: List[str] = dataclasses.field(default_factory=list)  # saved case folders
    records: List[dict] = dataclasses.field(default_factory=list)  # case.json of each saved failure
    signatures: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    ran: int = 0

    @property
    def cases(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())

    def per_minute(self) -> float:
        return self.cases / self.seconds * 60 if self.seconds > 0 else 0.0

    def rows(self) -> list:
        """``[kind, cases, ok, ember_error, other_exception, crash, hang, cases/min]`` per kind
        with cases, then ``total``."""
        rows = []
        for kind in KINDS:
            c = self.counts[kind]
            n = sum(c.values())
            if n:
                rows.append([kind, n] + [c[o] for o in OUTCOMES] + [n / self.seconds * 60 if self.seconds else 0.0])
        rows.append(["total", self.cases] + [self.total(o) for o in OUTCOMES] + [self.per_minute()])
        return rows

    def table(self) -> str:
        head = ["kind", "cases"] + list(OUTCOMES) + ["cases/min"]
        body = [[str(x) if not isinstance(x, float) else f"{x:.1f}" for x in r] for r in self.rows()]
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
        fmt = lambda r: "  ".join(s.rjust(w) if i else s.ljust(w) for i, (s, w) in enumerate(zip(r, widths)))  # noqa: E731
        return "\n".join([fmt(head)] + [fmt(r) for r in body])

    def progress_line(self) -> str:
        parts = [f"{self.cases} cases"] + [f"{o} {self.total(o)}" for o in OUTCOMES]
        return f"[{self.seconds / 60:5.1f} min] " + "  ".join(parts) + f"  ({self.per_minute():.0f}/min)"


def save_failure(out: str, case: Case, res: Result, run_seed: int) -> str:
    """``out/failures/<kind>-<outcome>-<index>/``: the input, ``case.json`` and ``log.txt``."""
    d = os.path.join(out, "failures", f"{case.kind}-{res.outcome}-{case.index:06d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "input" + SUFFIX[case.kind]), "wb") as f:
        f.write(case.data)
    meta = {"kind": case.kind, "run_seed": run_seed, "index": case.index, "seed": case.seed,
            "source": case.source, "mutations": case.mutations, "outcome": res.outcome, "detail": res.detail,
            "phase": res.phase, "signature": res.signature(), "seconds": round(res.seconds, 3),
            "traceback": res.traceback, "replay": f"python bench/fuzz.py --replay {d}"}
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=2)
    if res.log:
        with open(os.path.join(d, "log.txt"), "w") as f:
            f.write(res.log)
    return d


def replay(case_dir: str, *, timeout: float = 60.0, cache_dir: Optional[str] = None, memory_mb: int = 4096) -> Result:
    """Run a saved failure again (same input, same random inputs) in a child process."""
    with open(os.path.join(case_dir, "case.json")) as f:
        meta = json.load(f)
    kind = meta["kind"]
    tmp = tempfile.mkdtemp(prefix="ember-fuzz-replay-")
    try:
        path = os.path.join(tmp, "input" + SUFFIX[kind])
        shutil.copyfile(os.path.join(case_dir, "input" + SUFFIX[kind]), path)
        return run_input(kind, path, meta["seed"], timeout=timeout, cache_dir=cache_dir or os.path.join(tmp, "cache"),
                         memory_mb=memory_mb)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fuzz(*, kind: str = "both", seed: int = 0, minutes: Optional[float] = None, max_cases: Optional[int] = None,
         out: Optional[str] = None, workers: int = 1, timeout: Optional[float] = None, cache_dir: Optional[str] = None,
         memory_mb: int = 4096, keep_per_signature: int = 5,
         progress: Optional[Callable[[Summary], None]] = None) -> Summary:
    """Run cases until ``minutes`` have passed or ``max_cases`` ran (at least one of them).

    ``kind``: ``onnx``, ``export`` or ``both`` (alternating). ``out``: where failures are saved
    (a temporary folder, removed, when None). ``timeout``: seconds per case (30 for ONNX, 20 for
    exports by default). ``cache_dir``: the children's kernel cache (a fresh one for the run by
    default). At most ``keep_per_signature`` inputs are saved per likely-same bug.
    """
    if minutes is None and max_cases is None:
        raise ValueError("fuzz needs minutes or max_cases")
    kinds = list(KINDS) if kind == "both" else [kind]
    if any(k not in KINDS for k in kinds):
        raise ValueError(f"kind must be onnx, export or both, got {kind!r}")
    scratch = tempfile.mkdtemp(prefix="ember-fuzz-")
    out = out or os.path.join(scratch, "out")
    cache = cache_dir or os.path.join(scratch, "cache")
    summary = Summary(seed)
    lock = threading.Lock()
    t0 = time.monotonic()
    stop_at = t0 + minutes * 60 if minutes is not None else None
    zygotes: list = []
    try:
        zygotes.append(Zygote())
        corpus = build_corpus(os.path.join(scratch, "seeds"), kinds, seed, cache, zygote=zygotes[0])
        zygotes += [Zygote() for _ in range(max(1, workers) - 1)]
        counter = iter(range(max_cases) if max_cases is not None else iter(int, 1))
        next_index = [0]

        def take() -> Optional[Case]:
            with lock:
                if stop_at is not None and time.monotonic() >= stop_at:
                    return None
                if next(counter, None) is None:
                    return None
                i = next_index[0]
                next_index[0] += 1
            return corpus.make_case(kinds[i % len(kinds)], seed, i)

        errors: list = []

        def work(zygote: Zygote) -> None:
            try:
                work_on(zygote)
            except BaseException as exc:  # noqa: B036 - the fuzzer's own bug: raised after the join
                errors.append(exc)

        def work_on(zygote: Zygote) -> None:
            while True:
                case = take()
                if case is None:
                    return
                path = os.path.join(scratch, f"case-{case.index}{SUFFIX[case.kind]}")
                with open(path, "wb") as f:
                    f.write(case.data)
                t = timeout if timeout is not None else (30.0 if case.kind == "onnx" else 20.0)
                res = run_input(case.kind, path, case.seed, timeout=t, cache_dir=cache, memory_mb=memory_mb,
                                zygote=zygote)
                os.unlink(path)
                with lock:
                    summary.counts[case.kind][res.outcome] += 1
                    summary.ran += res.ran
                    if res.outcome in FAILURES:
                        sig = f"{case.kind}: {res.signature()}"
                        summary.signatures[sig] += 1
                        if summary.signatures[sig] <= keep_per_signature:
                            d = save_failure(out, case, res, seed)
                            summary.failures.append(d)
                            with open(os.path.join(d, "case.json")) as f:
                                summary.records.append(json.load(f))
                    summary.seconds = time.monotonic() - t0
                    if progress is not None:
                        progress(summary)

        threads = [threading.Thread(target=work, args=(z,), daemon=True) for z in zygotes]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if errors:
            raise errors[0]
    finally:
        summary.seconds = time.monotonic() - t0
        for z in zygotes:
            z.close()
        shutil.rmtree(scratch, ignore_errors=True)  # with the failures too when no ``out`` was given
    return summary
