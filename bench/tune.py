"""Tune a model and measure what it gained end to end.

    python bench/tune.py                                  # EfficientNet-B0 of the zoo, 8 minutes
    python bench/tune.py MODEL.onnx --minutes 8 --plot curve.png

1. ``ember tune`` into a fresh SQLite database (a local Dask cluster measures, candidates timed
   in the model unless ``--alone``);
2. the untuned and the tuned model, each alone in a fresh process, alternating, ``--rounds``
   times (``ember.bench.isolated``; the tuned one compiles with ``EMBER_TUNING_DB``), beside
   ONNX Runtime in the same run;
3. their outputs on one random input (they must match: rtol 1e-3);
4. the kernels of both timed in place (one process, profiled runs of each in turn, least times): the
   figure the tuner's estimate predicts, free of the swings between separate processes; and
   whole runs of both in one process, alternating blocks (per-block ratios: the machine's
   state changes between blocks, both sides of a block see the same);
5. the tuning curve (estimated latency over time) and the per-task table; trials per minute
   beside TVM MetaSchedule's ~14 (the issue's anchor).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import numpy as np


def _time(path: str, inputs: str, db, runtime: str = "ember") -> dict:
    from ember.bench.isolated import measure

    old = os.environ.pop("EMBER_TUNING_DB", None)
    if db:
        os.environ["EMBER_TUNING_DB"] = db
    try:
        res = measure(runtime, path, inputs, threads=os.cpu_count() or 2, repeat=30)
    finally:
        os.environ.pop("EMBER_TUNING_DB", None)
        if old is not None:
            os.environ["EMBER_TUNING_DB"] = old
    if "median" not in res:
        raise SystemExit(f"{runtime} failed: {res}")
    return res  # its median and the cores' round trips before and after (ember.runtime.placement)


def _in_model(exe, tuned_exe, feeds: dict, tuned: set, rounds: int = 4) -> None:
    """The untuned and the tuned model's kernels timed in place (one process, both Ember, so no
    other runtime's threads: profiles alternate), each call's least time: what the tuner's
    estimate predicts, without the run-to-run swings of separate processes."""
    from ember.tune.in_model import time_in_place

    untuned, tuned_calls = time_in_place([exe, tuned_exe], [feeds[i.name] for i in exe.input_info], rounds)
    u = sum(t for _, t in untuned.values())
    t = sum(t for _, t in tuned_calls.values())
    lost = [i for i, (k, x) in tuned_calls.items() if k in tuned and x > untuned[i][1] * 1.02]
    print(f"\nin the model (kernels timed in place, {rounds * 15} profiled runs of each in turn, least times): "
          f"untuned {u * 1e3:.2f} ms, tuned {t * 1e3:.2f} ms ({u / t:.3f}x); "
          f"{len(lost)} tuned kernel call(s) slower in place than the default by > 2%")


def _runs_in_one_process(exe, tuned_exe, feeds: dict, blocks: int = 8, runs: int = 40) -> None:
    """Whole runs (the native runner, not the profiler) of both executables in one process,
    alternating blocks: each block pair sees the same state of the machine, so the per-block
    ratios show whether tuning wins in all of them (a shared VM moves between speeds for seconds
    at a time, and a schedule can win in one and lose in another)."""
    import time

    from ember.runtime.placement import core_round_trip_ns, placements

    med: dict = {"untuned": [], "tuned": []}
    trips = []
    for _ in range(blocks):
        trips.append(core_round_trip_ns())
        for key, e in (("untuned", exe), ("tuned", tuned_exe)):
            for _ in range(3):
                e.run(**feeds)
            ts = []
            for _ in range(runs):
                t0 = time.perf_counter()
                e.run(**feeds)
                ts.append(time.perf_counter() - t0)
            med[key].append(statistics.median(ts))
    u, t = statistics.median(med["untuned"]), statistics.median(med["tuned"])
    print(f"\nwhole runs in one process ({blocks} alternating blocks of {runs}, medians): untuned "
          f"{u * 1e3:.2f} ms, tuned {t * 1e3:.2f} ms ({u / t:.3f}x); per block: "
          + " ".join(f"{a / b:.2f}" for a, b in zip(med["untuned"], med["tuned"])))
    _by_placement_line(placements(trips), med)


def _by_placement_line(where: list, med: dict) -> None:
    """Untuned against tuned apart for each placement of the cores the blocks or rounds ran in
    (``where[i]``: the i-th one's, None where it moved or is unknown), when there were two."""
    if len({w for w in where if w}) < 2:
        return
    parts = []
    for w in ("near", "far"):
        idx = [i for i, x in enumerate(where) if x == w]
        if idx:
            u = statistics.median(med["untuned"][i] for i in idx)
            t = statistics.median(med["tuned"][i] for i in idx)
            extra = "".join(f", {k} {statistics.median(v[i] for i in idx) * 1e3:.2f} ms"
                            for k, v in med.items() if k not in ("untuned", "tuned"))
            parts.append(f"{w} ({len(idx)}): untuned {u * 1e3:.2f} ms, tuned {t * 1e3:.2f} ms ({u / t:.3f}x){extra}")
    print("  the cores moved between placements (near: sharing an L3, far: not); by placement: " + "; ".join(parts))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="an ONNX file (default: the zoo's EfficientNet-B0)")
    p.add_argument("--minutes", type=float, default=8.0)
    p.add_argument("--db", help="the records database (default: a fresh one in a temporary folder)")
    p.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (default 5)")
    p.add_argument("--cluster", default=None, help="as ember tune --cluster (default: a local Dask cluster)")
    p.add_argument("--no-transfer", action="store_true")
    p.add_argument("--any-partition", action="store_true", help="as ember tune --any-partition")
    p.add_argument("--alone", action="store_true", help="as ember tune --alone: candidates timed alone")
    p.add_argument("--plot", metavar="FILE.png")
    p.add_argument("--skip-tune", action="store_true", help="only time and check an existing --db")
    a = p.parse_args(argv)
    import ember
    from ember.tune.tuner import tune

    path = a.model
    if path is None:
        from ember.bench.zoo import export

        path = export("efficientnet_b0", os.path.join(os.path.expanduser("~"), ".cache", "ember", "zoo"))
    tmp = tempfile.mkdtemp(prefix="ember-tune-")
    db = a.db or os.path.join(tmp, "tuning.db")
    if not a.skip_tune:
        report = tune(path, db, minutes=a.minutes, cluster=a.cluster, transfer=not a.no_transfer, progress=False,
                      keep_partition=not a.any_partition, in_place=not a.alone)
        print(report.table())
        print(f"\ntrials per minute: {report.trials_per_minute:.0f} (TVM MetaSchedule, the issue's anchor: ~14)")
        print("\ntuning curve (estimated latency from the tasks' measured bests):")
        marks = [m * 60 for m in (0, 0.5, 1, 2, 4, 6, 8, 12, 16, 30, 60) if m <= a.minutes + 0.01]
        for m in marks:
            lat = [lat for t, lat in report.curve if t <= m + 1e-9][-1]
            print(f"  {m / 60:5.1f} min  {lat * 1e3:7.2f} ms")
        if a.plot:
            from ember.tune.plot import plot_curve

            plot_curve(report, a.plot)
            print(f"wrote {a.plot}")
    rng = np.random.default_rng(0)
    exe = ember.compile(path, cache=False, wait=True)
    # a model with dynamic axes runs at its likely shape, which it was tuned at (its kernels'
    # static twins serve it)
    feeds = {i.name: rng.standard_normal(tuple(d if isinstance(d, int) else exe.likely_sizes[d] for d in i.shape))
             .astype(i.dtype) for i in exe.input_info}
    inputs = os.path.join(tmp, "inputs.npz")
    np.savez(inputs, **feeds)
    tuned_exe = ember.compile(path, tuning_db=db, wait=True)
    ref, got = exe.run(**feeds)[0], tuned_exe.run(**feeds)[0]
    diff = float(np.max(np.abs(ref - got)))
    scale = float(np.max(np.abs(ref)))
    print(f"\noutputs: max difference {diff:.3g} (outputs up to {scale:.3g}); "
          f"{len(tuned_exe.tuned_kernels)} of {len(exe.groups)} kernels tuned")
    _in_model(exe, tuned_exe, feeds, set(tuned_exe.tuned_kernels))
    _runs_in_one_process(exe, tuned_exe, feeds)
    del exe, tuned_exe
    times = {"untuned": [], "tuned": [], "onnxruntime": []}
    trips: list = []  # per round: every child's round trips before and after
    for _ in range(a.rounds):
        got = {"untuned": _time(path, inputs, None), "tuned": _time(path, inputs, db),
               "onnxruntime": _time(path, inputs, None, "onnxruntime")}
        for k, res in got.items():
            times[k].append(res["median"])
        trips.append([t for res in got.values() for t in res.get("round_trips", [])])
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nend to end, each alone in its process, median of {a.rounds} alternating rounds:")
    for k, v in med.items():
        print(f"  {k:12} {v * 1e3:8.2f} ms   " + " ".join(f"{x * 1e3:.2f}" for x in times[k]))
    print(f"  tuned vs untuned: {med['untuned'] / med['tuned']:.2f}x faster; "
          f"tuned / ONNX Runtime: {med['tuned'] / med['onnxruntime']:.2f}")
    from ember.runtime.placement import group_placements

    where = group_placements(trips)  # a round counts where all three children ran wholly in one
    print("  placement per round: " + " ".join(w or "moved" for w in where))
    _by_placement_line(where, times)
    ok = diff <= 1e-3 * max(1.0, scale)
    print("outputs match" if ok else "OUTPUTS DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
