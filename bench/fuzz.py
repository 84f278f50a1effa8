"""Fuzz Ember's front doors: mutated ONNX models through ember.compile and mutated exports through
ember.load, each case in a child process with a timeout, until the time is up.

    python bench/fuzz.py --minutes 30 --out fuzz-out            # both kinds, one worker
    python bench/fuzz.py --minutes 5 --kind export --seed 7 --workers 2
    python bench/fuzz.py --replay fuzz-out/failures/onnx-crash-000123

Outcomes: ok, ember_error (an EmberError: the expected rejection), other_exception (any other
Python exception: a bug), crash (the child died), hang (past the timeout). Each crash, hang and
other exception is saved under OUT/failures/ with its seed (a few per likely-same bug) and
replays with --replay. Exits 1 when there was any. The cases are ember.testing.fuzz's; the CI
run is tests/testing/test_fuzz.py.
"""
import argparse
import json
import os
import sys

from ember.testing.fuzz import OUTCOMES, fuzz, replay


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--minutes", type=float, default=5.0, help="how long to run (default 5)")
    p.add_argument("--cases", type=int, help="stop after this many cases (even if time is left)")
    p.add_argument("--out", default="fuzz-out", help="where failures are saved (default fuzz-out)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: case i of seed s is always the same")
    p.add_argument("--kind", choices=["onnx", "export", "both"], default="both")
    p.add_argument("--workers", type=int, default=1, help="cases at a time (default 1)")
    p.add_argument("--timeout", type=float, help="seconds per case (default 30 for onnx, 20 for export)")
    p.add_argument("--memory-mb", type=int, default=4096, help="address-space limit of each child (default 4096)")
    p.add_argument("--replay", metavar="DIR", help="run one saved failure again and print its outcome")
    a = p.parse_args(argv)
    tty = sys.stderr.isatty()

    if a.replay:
        res = replay(a.replay, timeout=a.timeout or 60.0, memory_mb=a.memory_mb)
        with open(os.path.join(a.replay, "case.json")) as f:
            meta = json.load(f)
        print(f"{meta['kind']} case {meta['index']} (seed {meta['run_seed']}, from {meta['source']}): "
              f"{', '.join(meta['mutations'])}")
        print(f"was: {meta['outcome']}: {meta['detail']}")
        print(f"now: {res.outcome} in {res.phase} ({res.seconds:.2f} s): {res.detail}")
        if res.traceback:
            print(res.traceback.rstrip())
        if res.log.strip():
            print("child's output:\n" + res.log.rstrip())
        return 1 if res.outcome in ("other_exception", "crash", "hang") else 0

    def progress(summary) -> None:
        if tty:
            sys.stderr.write("\r" + summary.progress_line() + "\033[K")
            sys.stderr.flush()

    summary = fuzz(kind=a.kind, seed=a.seed, minutes=a.minutes, max_cases=a.cases, out=os.path.abspath(a.out),
                   workers=a.workers, timeout=a.timeout, memory_mb=a.memory_mb, progress=progress)
    if tty:
        sys.stderr.write("\n")
    print(f"seed {a.seed}, {summary.seconds / 60:.1f} min, {a.workers} worker(s); "
          f"{summary.ran} case(s) compiled or loaded and ran")
    print(summary.table())
    bad = sum(summary.total(o) for o in OUTCOMES[2:])
    if summary.signatures:
        print("\nfailures by likely cause:")
        for sig, n in summary.signatures.most_common():
            print(f"  {n:5d}  {sig}")
        print("\nsaved (replay with --replay DIR):")
        for d in summary.failures:
            print(f"  {d}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
