"""Serving one model from a pool of client threads: Ember against ONNX Runtime with the same
thread settings, each runtime alone in its own process.

    python bench/concurrency.py                               # shufflenet and resnet50, random weights
    python bench/concurrency.py --light squeezenet --clients 1 2 4 8 --seconds 5
    python bench/concurrency.py --model model.onnx

For each model, each client count (1, 2, 4, 8 threads calling ``run`` in a loop on one
executable / one session, each request on an input of its own) and each thread setting, a
fresh process per runtime compiles or loads the model, computes every input's answer serially,
then lets the clients run for ``--seconds``. It prints requests/s, p50 and p99 latency, and the
number of wrong results (each checked against the serial answer; it must be 0).

The settings, the same for both runtimes:
  * ``all cores per run``: Ember's default (threads_per_run = cores, one run at a time; other
    callers wait their turn) against ORT with intra_op_num_threads = cores;
  * ``1 thread per run``: Ember with threads_per_run = 1 (one run per core at once) against ORT
    with intra_op_num_threads = 1.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

INPUTS = 32  # distinct inputs per process; request k uses input k % INPUTS


def _cores() -> int:
    from ember.runtime.pool import host_cores

    return host_cores()


# -- one runtime, in its own process --------------------------------------------------------
def _runner(runtime: str, path: str, threads: int, concurrent: int):
    """``(run(x) -> list of arrays, input info)`` for one runtime set up with these settings."""
    if runtime == "ember":
        import ember

        exe = ember.compile(path, wait=True)
        exe.threads_per_run = threads
        exe.max_concurrent_runs = concurrent
        name, shape, dtype = exe.input_info[0]
        return (lambda x: exe.run(x)), (name, shape, dtype)
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    i = sess.get_inputs()[0]
    shape = tuple(d if isinstance(d, int) else 1 for d in i.shape)
    return (lambda x: sess.run(None, {i.name: x})), (i.name, shape, "float32")


def child(runtime: str, path: str, clients: int, threads: int, concurrent: int, seconds: float) -> dict:
    run, (_, shape, dtype) = _runner(runtime, path, threads, concurrent)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(shape).astype(dtype) for _ in range(INPUTS)]
    for x in xs[:3]:
        run(x)  # warm-up
    want = [run(x) for x in xs]  # the serial answers
    lat: list = [[] for _ in range(clients)]
    wrong = [0] * clients
    start = threading.Barrier(clients + 1)
    stop = [0.0]

    def client(c: int) -> None:
        k = c
        start.wait()
        while True:
            t0 = time.perf_counter()
            if t0 >= stop[0]:
                return
            got = run(xs[k % INPUTS])
            lat[c].append(time.perf_counter() - t0)
            if not all(np.allclose(g, w, rtol=1e-4, atol=1e-5) for g, w in zip(got, want[k % INPUTS])):
                wrong[c] += 1
            k += clients

    ts = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in ts:
        t.start()
    stop[0] = time.perf_counter() + seconds
    start.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    all_lat = sorted(x for c in lat for x in c)
    n = len(all_lat)
    return {"requests": n, "rps": n / wall, "p50": statistics.median(all_lat) if n else 0.0,
            "p99": all_lat[min(n - 1, int(0.99 * n))] if n else 0.0, "wrong": sum(wrong)}


def measure(runtime: str, path: str, clients: int, threads: int, concurrent: int, seconds: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", runtime, "--model", path,
           "--clients", str(clients), "--threads", str(threads), "--concurrent", str(concurrent),
           "--seconds", str(seconds)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--light", action="append", help="a light model of the onnx package (random weights); repeatable")
    p.add_argument("--model", action="append", help="an ONNX file; repeatable")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8], help="client thread counts (default 1 2 4 8)")
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per measurement (default 3)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    p.add_argument("--concurrent", type=int, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.model[0], a.clients[0], a.threads, a.concurrent, a.seconds)))
        return 0

    from ember.bench.models import light_path, random_weights

    try:
        import onnxruntime  # noqa: F401
        runtimes = ["ember", "onnxruntime"]
    except ImportError:
        print("onnxruntime is not installed (pip install onnxruntime): Ember alone")
        runtimes = ["ember"]
    cores = _cores()
    settings = [("all cores per run", cores, 1), ("1 thread per run", 1, cores)]
    tmp = tempfile.mkdtemp(prefix="ember-concurrency-")
    models = [(m, random_weights(light_path(m), tmp)) for m in (a.light or [])]
    models += [(os.path.basename(m), m) for m in (a.model or [])]
    if not models:
        models = [(m, random_weights(light_path(m), tmp)) for m in ("shufflenet", "resnet50")]
    figures = []
    print(f"{cores} cores; each runtime alone in its own process, {a.seconds:g} s per measurement; "
          f"wrong = results that differ from the serial answer")
    for name, path in models:
        print(f"\n{name}")
        print(f"  {'setting':18s} {'clients':>7s} | {'ember req/s':>11s} {'p50 ms':>7s} {'p99 ms':>7s} {'wrong':>5s} | "
              f"{'ORT req/s':>9s} {'p50 ms':>7s} {'p99 ms':>7s} {'wrong':>5s} | {'req/s ratio':>11s}")
        for label, threads, concurrent in settings:
            for clients in a.clients:
                row = {"model": name, "setting": label, "clients": clients}
                for rt in runtimes:
                    row[rt] = measure(rt, path, clients, threads, concurrent, a.seconds)
                figures.append(row)
                cells = []
                for rt in ("ember", "onnxruntime"):
                    r = row.get(rt)
                    if r is None or "error" in r:
                        cells.append(f"{(r or {}).get('error', 'skipped')[:40]:>32s}")
                    else:
                        cells.append(f"{r['rps']:{11 if rt == 'ember' else 9}.1f} {r['p50'] * 1e3:7.2f} "
                                     f"{r['p99'] * 1e3:7.2f} {r['wrong']:5d}")
                e, o = row.get("ember", {}), row.get("onnxruntime", {})
                ratio = f"{e['rps'] / o['rps']:11.2f}" if "rps" in e and o and "rps" in o else f"{'':11s}"
                print(f"  {label:18s} {clients:7d} | {cells[0]} | {cells[1]} | {ratio}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=1)
    wrong = sum(r[rt].get("wrong", 0) for r in figures for rt in runtimes)
    print(f"\nwrong results in all: {wrong}  (ratio > 1: Ember serves more requests per second)")
    return 1 if any(r["ember"].get("wrong", 0) or "error" in r["ember"] for r in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
