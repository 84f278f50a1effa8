"""One executable for every input size against a compile for each size: the cost of symbolic
shapes. Each row times, each in a fresh process of its own and alternating processes:

  * ``dynamic``: ``ember.compile(model)`` of the model as exported with a dynamic batch (and
    sequence), run at the row's sizes (its generic kernels take the sizes as arguments);
  * ``static``: ``ember.compile(model, input_shapes=...)`` for exactly those sizes;
  * ``onnxruntime``: a session of the same dynamic model, at the same sizes.

    python bench/dynamic.py                           # ResNet-50 at batch 1 and 8, BERT at seq 32/128/384
    python bench/dynamic.py --model bert --size 1x128 --rounds 5

Models come from the zoo (ember.bench.zoo: torchvision and transformers classes with random
weights, exported with torch.onnx.export(dynamo=True)); it needs the ``zoo`` extra. Also
printed: the first run at a new size (its layout: checks, memory plan, call arguments) and
the load time of the dynamic model's export.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

DEFAULT = [("resnet50", (1, 0)), ("resnet50", (8, 0)), ("bert", (1, 32)), ("bert", (1, 128)), ("bert", (1, 384))]


def _inputs(name: str, batch: int, seq: int) -> dict:
    from ember.bench.zoo import ZOO

    return ZOO[name].example(batch=batch, seq=seq or None, seed=1)


def child(kind: str, name: str, path: str, batch: int, seq: int, repeat: int) -> dict:
    import numpy as np

    from ember.profile.timing import median_time

    feeds = _inputs(name, batch, seq)
    out: dict = {}
    if kind == "onnxruntime":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        run = lambda: sess.run(None, feeds)  # noqa: E731
    else:
        import ember

        t0 = time.perf_counter()
        if kind == "static":
            exe = ember.compile(path, input_shapes={k: v.shape for k, v in feeds.items()}, wait=True)
        elif kind == "load":
            exe = ember.load(path)
            out["load"] = time.perf_counter() - t0
        else:
            exe = ember.compile(path, wait=True)
        t1 = time.perf_counter()
        exe.run(**feeds)
        out["first_run"] = time.perf_counter() - t1
        run = lambda: exe.run(**feeds)  # noqa: E731
    out["median"] = median_time(run, warmup=3, repeat=repeat)
    y = run()[0]
    out["checksum"] = float(np.abs(np.asarray(y, np.float64)).sum())
    return out


def measure(kind: str, name: str, path: str, batch: int, seq: int, repeat: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--model", name, "--path", path,
           "--size", f"{batch}x{seq}", "--repeat", str(repeat)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--model", action="append", help="a zoo model (repeatable; default resnet50 and bert)")
    p.add_argument("--size", action="append", help="BATCHxSEQ (SEQ 0 for vision models); repeatable")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of processes (default 3)")
    p.add_argument("--repeat", type=int, default=20, help="timed runs per process (default 20)")
    p.add_argument("--dir", default=os.path.join(os.path.expanduser("~"), ".cache", "ember", "zoo"),
                   help="where the exported models are kept")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        b, s = (int(v) for v in a.size[0].split("x"))
        print(json.dumps(child(a.child, a.model[0], a.path, b, s, a.repeat)))
        return 0

    from ember.bench.zoo import export

    if a.model and a.size:
        rows = [(m, tuple(int(v) for v in s.split("x"))) for m in a.model for s in a.size]
    elif a.model:
        rows = [r for r in DEFAULT if r[0] in a.model]
    else:
        rows = DEFAULT
    print(f"each runtime alone in its own process, {a.rounds} alternating rounds, medians of {a.repeat} runs",
          flush=True)
    figures = []
    exports: dict = {}
    for name in dict.fromkeys(m for m, _ in rows):
        path = export(name, a.dir, dynamic=True)
        import ember

        so = os.path.join(a.dir, f"{name}.dyn.so")
        ember.compile(path, wait=True).export(so)  # compiled once here: the children find the kernels cached
        exports[name] = (path, so)
    print(f"{'model':10} {'size':>8} | {'static ms':>9} {'dynamic ms':>10} {'dyn/static':>10} | "
          f"{'ORT ms':>8} {'dyn/ORT':>8} | {'1st run ms':>10} {'load ms':>8}")
    for name, (batch, seq) in rows:
        path, so = exports[name]
        got: dict = {"static": [], "dynamic": [], "onnxruntime": [], "load": []}
        extra: dict = {}
        for _ in range(a.rounds):
            for kind in ("static", "dynamic", "onnxruntime", "load"):
                r = measure(kind, name, so if kind == "load" else path, batch, seq, a.repeat)
                if "error" in r:
                    extra.setdefault("errors", []).append(f"{kind}: {r['error']}")
                    continue
                got[kind].append(r["median"])
                if kind == "dynamic":
                    extra.setdefault("first_run", []).append(r["first_run"])
                if kind == "load":
                    extra.setdefault("load", []).append(r["load"])
        med = {k: statistics.median(v) if v else float("nan") for k, v in got.items()}
        first = statistics.median(extra.get("first_run", [float("nan")]))
        load = statistics.median(extra.get("load", [float("nan")]))
        size = f"{batch}x{seq}" if seq else f"{batch}"
        print(f"{name:10} {size:>8} | {med['static'] * 1e3:9.2f} {med['dynamic'] * 1e3:10.2f} "
              f"{med['dynamic'] / med['static']:10.2f} | {med['onnxruntime'] * 1e3:8.2f} "
              f"{med['dynamic'] / med['onnxruntime']:8.2f} | {first * 1e3:10.1f} {load * 1e3:8.1f}", flush=True)
        for e in extra.get("errors", []):
            print(f"    error: {e}")
        figures.append({"model": name, "batch": batch, "seq": seq, **{k: med[k] for k in med},
                        "first_run": first, "load": load})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
