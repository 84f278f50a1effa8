"""Timing each runtime alone in a process of its own, as users run it.

In one process, a runtime's spinning worker threads steal the cores from the next runtime's
parallel region (on 2 cores this moves ratios by 2x on short models), so each measurement
here is a fresh ``python -m ember.bench.isolated`` child that loads one runtime, runs the
model on the inputs (an ``.npz`` the parent writes), warms up and reports the median of its
timed runs as JSON. The parent alternates the runtimes' children for a few rounds and takes
the median of their medians.

Each child also measures the round trip of a cache line between its two cores before and after
timing (:mod:`.placement`): on a shared VM the cores move between placements that change every
runtime's speed by ~30%, and a round is only comparable with rounds in the same placement.

    from ember.bench.isolated import time_isolated
    times = time_isolated("model.onnx", feeds, ["ember", "onnxruntime", "openvino"], threads=2)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, Sequence

import numpy as np

# Ember's code for another CPU of the same family, run on this host: ember_avx2 is AVX2 code
# without AVX-512 or VNNI (a Zen 3's), what an AVX2 host would run
EMBER_TARGETS = {"ember_avx2": "llvm -mcpu=znver3"}
RUNTIMES = ("ember", "ember_bf16", "ember_saturating", "ember_avx2", "ember_auto", "onnxruntime", "openvino",
            "openvino_default", "tvm", "from_torch", "inductor")


def _runner(runtime: str, path: str, threads: int, feeds: dict):
    """``run()`` for ``runtime`` on ``feeds`` (None when the runtime is not installed)."""
    if runtime in ("ember", "ember_bf16", "ember_saturating") or runtime in EMBER_TARGETS:
        import ember

        # (the parent compiled it once: the kernels come from the cache. ember_saturating: int8
        # products saturating as ORT's on a CPU without VNNI, CompileOptions.saturating_int8)
        exe = ember.compile(path, target=EMBER_TARGETS.get(runtime),
                            precision="bf16" if runtime == "ember_bf16" else "fp32",
                            saturating_int8=runtime == "ember_saturating", wait=True)
        exe.threads_per_run = threads
        return lambda: exe.run(**feeds)
    from .peers import PEERS
    from ember.runtime.executable import TensorInfo

    infos = [TensorInfo(k, v.shape, str(v.dtype)) for k, v in feeds.items()]
    run = PEERS[runtime](path, threads, infos)
    return None if run is None else (lambda: run(feeds))


def child(runtime: str, path: str, inputs: str, threads: int, repeat: int) -> dict:
    from ..runtime.placement import core_round_trip_ns
    from ..profile.timing import median_time

    with np.load(inputs) as z:
        feeds = {k: z[k] for k in z.files}
    t0 = time.perf_counter()
    run = _runner(runtime, path, threads, feeds)
    if run is None:
        return {"skipped": f"{runtime} is not installed"}
    setup = time.perf_counter() - t0
    out = run()
    first = np.asarray(out[0])
    before = core_round_trip_ns() if threads > 1 else None
    median = median_time(run, warmup=3, repeat=repeat)
    after = core_round_trip_ns() if threads > 1 else None
    return {"median": median, "setup": setup, "round_trips": [before, after],
            "checksum": float(np.abs(first.astype(np.float64)).sum()), "shape": list(first.shape)}


def measure(runtime: str, path: str, inputs: str, threads: int, repeat: int) -> dict:
    """One child process's figures (``{"error": ...}`` when it failed)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [sys.executable, "-m", "ember.bench.isolated", runtime, path, inputs, "--threads", str(threads),
           "--repeat", str(repeat)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def time_isolated(path: str, feeds: dict, runtimes: Sequence[str], threads: int, rounds: int = 3,
                  repeat: int = 20) -> Dict[str, dict]:
    """Per runtime: ``{"median": seconds, "setup": seconds, "checksum": ..., "rounds": [...]}``
    (medians over ``rounds`` children, alternating runtimes; each round's ``{"median",
    "round_trips", "placement"}``, its placement ``"near"``, ``"far"`` or None where the cores
    moved while it ran, see :func:`by_placement`), or ``{"error"/"skipped": why}``."""
    with tempfile.TemporaryDirectory(prefix="ember-iso-") as tmp:
        inputs = os.path.join(tmp, "inputs.npz")
        np.savez(inputs, **feeds)
        got: dict = {r: [] for r in runtimes}
        notes: dict = {}
        for _ in range(rounds):
            for r in runtimes:
                if r in notes:
                    continue
                res = measure(r, path, inputs, threads, repeat)
                if "median" in res:
                    got[r].append(res)
                else:
                    notes[r] = res
    from ..runtime.placement import group_placements

    children = [x for r in runtimes for x in got[r]]
    for x, where in zip(children, group_placements([x.get("round_trips", [None]) for x in children])):
        x["placement"] = where
    out: dict = {}
    for r in runtimes:
        if got[r]:
            out[r] = {"median": statistics.median(x["median"] for x in got[r]),
                      "setup": statistics.median(x["setup"] for x in got[r]),
                      "checksum": got[r][0]["checksum"], "shape": got[r][0]["shape"],
                      "rounds": [{k: x[k] for k in ("median", "round_trips", "placement") if k in x}
                                 for x in got[r]]}
        else:
            out[r] = notes.get(r, {"error": "no run"})
    return out


def timing_arguments(p) -> None:
    """The options of a benchmark that times runtimes alone in their processes: ``--rounds``,
    ``--repeat``, ``--threads``, ``--json``."""
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of processes (default 3)")
    p.add_argument("--repeat", type=int, default=20, help="timed runs per process (default 20)")
    p.add_argument("--threads", type=int, default=None, help="threads for every runtime (default: all cores)")
    p.add_argument("--json", default=None, help="write the figures here")


def paired_ratio(res: Dict[str, dict], a: str, b: str) -> float | None:
    """The median over rounds of ``a``'s time / ``b``'s in the same round (both children in
    one placement, or with it unknown): neighbours in time share more of a shared machine's
    state than the whole run's medians do, so the pairs cancel its slow swings. None without
    such a round."""
    ra, rb = res.get(a, {}).get("rounds", []), res.get(b, {}).get("rounds", [])
    pairs = [x["median"] / y["median"] for x, y in zip(ra, rb)
             if x.get("placement") == y.get("placement") and y["median"] > 0]
    return statistics.median(pairs) if pairs else None


def by_placement(res: Dict[str, dict]) -> Dict[str, Dict[str, list]]:
    """``{placement: {runtime: [round medians]}}`` over the runtimes of a :func:`time_isolated`
    result that ran, for the placements (``"near"``, ``"far"``) some round ran wholly in."""
    out: Dict[str, Dict[str, list]] = {}
    for runtime, v in res.items():
        for x in v.get("rounds", []):
            if x.get("placement"):
                out.setdefault(x["placement"], {}).setdefault(runtime, []).append(x["median"])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="time one runtime on one model in this process (a child)")
    p.add_argument("runtime", choices=RUNTIMES)
    p.add_argument("path")
    p.add_argument("inputs", help="an .npz of the inputs by name")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    a = p.parse_args(argv)
    print(json.dumps(child(a.runtime, a.path, a.inputs, a.threads, a.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
