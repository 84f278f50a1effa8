"""Time to a model's first result with tiered compilation, in fresh processes.

For each model, each figure from its own Python process (``import ember`` not counted; from
``ember.compile`` to the first output, checked against ONNX Runtime's):

  * ``others cached``: the kernel cache holds other models' kernels but not this one's. The
    models are split in two halves; each half is measured in a copy of a cache filled by
    compiling the other half (tier 0 and tier 1), a fresh copy per model (of their kernels:
    their kept executables, with their weights, are not copied, which only churned the page
    cache before the measurement);
  * ``empty``: an empty kernel cache;
  * ``tier 1 at``: in the empty-cache process, when every group runs at tier 1 (no runs meanwhile);
  * ``wait=True``: today's cold compile (``ember.compile(model, wait=True)``, empty cache) and
    its first run -- what the user waited before tiers;
  * ``tier 0`` / ``tier 1 ms``: one run's time on each (medians of 5 runs; tier 0 measured
    while tier 1 compiles, as a user meets it, with the run on the core the build leaves).

Then the tier-0 kernels each model's first result ran on, and how many of them no other
model of the run has (tier-0 kernels are named by what they compute, so these are what a cache
of the other models' kernels lacks).

The slowest three rows, with others' kernels cached and from an empty cache, are followed by
where their first result's time goes (import and passes, the tier-0 build, the first run).

    python bench/first_result.py                               # the light nine and the zoo
    python bench/first_result.py resnet50 bert --json fr.json
    python bench/first_result.py --onnx ~/.cache/ember/ecosystem/timm/ghostnetv2_100.onnx
    python bench/first_result.py --arch convnext_tiny,regnet  # bench/arch_sweep.py's architectures

Light models are the onnx package's (random weights); zoo models are exported once to
``~/.cache/ember/zoo`` (the ``zoo`` extra); ``--arch`` exports with ``torch.onnx.export(...,
dynamo=True)`` to ``~/.cache/ember/arch_sweep``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, sys, time
import numpy as np
import ember
mode, path, feeds_path = sys.argv[1:4]
data = np.load(feeds_path)
feeds = {k[2:]: data[k] for k in data.files if k.startswith("x_")}
want = [data[k] for k in sorted((k for k in data.files if k.startswith("y_")), key=lambda k: int(k[2:]))]
t0 = time.perf_counter()
exe = ember.compile(path, wait=(mode == "wait"))
t1 = time.perf_counter()
got = exe.run(**feeds)
t2 = time.perf_counter()
ok = all(np.allclose(g, w, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(w).max()))) for g, w in zip(got, want))
info = getattr(exe, "tier_info", None)
out = {"compile_s": t1 - t0, "first_s": t2 - t0, "first_run_s": t2 - t1, "correct": bool(ok),
       "tiered": info is not None, "phases": {k: v for k, v in exe.compile_times.items()}}
if info is not None:
    out["tier0_groups"] = len(info.at_tier0)
    out["groups"] = len(info.tiers)
    out["tier0_kernels"] = sorted({c["kernel"] for c in exe.current.program["calls"] if c["kernel"].startswith("tier0_")})
    if mode == "time":
        ts = []
        for _ in range(5):
            t = time.perf_counter(); exe.run(**feeds); ts.append(time.perf_counter() - t)
        out["tier0_run_s"] = sorted(ts)[2]
    exe.wait()
    out["tier1_s"] = time.perf_counter() - t0  # (in "time" mode delayed by its runs: not reported)
if mode in ("time", "wait"):
    exe.run(**feeds)
    ts = []
    for _ in range(5):
        t = time.perf_counter(); exe.run(**feeds); ts.append(time.perf_counter() - t)
    out["tier1_run_s"] = sorted(ts)[2]
print(json.dumps(out))
"""


def _where(e: dict) -> str:
    """A first result's time by phase: import and passes (folding apart), the kernels' build,
    the first run."""
    ph = e["phases"]
    passes = sum(v for k, v in ph.items() if k.startswith("pass "))
    return (f"{e['first_s']:.2f} s = import {ph.get('import', 0):.2f} + passes {passes:.2f} "
            f"(folding {ph.get('pass fold_constant', 0):.2f}) + kernels {ph.get('codegen', 0):.2f} "
            f"({e.get('tier0_groups', 0)} of {e.get('groups', 0)} groups at tier 0) + first run {e['first_run_s']:.2f}")


def _child(mode: str, path: str, feeds: str, cache: str) -> dict:
    # the model file read once first, so that every figure finds it in the page cache (a
    # model's first figure is its 'others cached' one, right after the copy of a filled cache)
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["EMBER_CACHE_DIR"] = cache
    r = subprocess.run([sys.executable, "-c", _CHILD, mode, path, feeds], capture_output=True, text=True,
                       env=env, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-1500:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _feeds(path: str, out: str) -> str:
    """Random inputs (dynamic dims at 1, or 224/128 by name) and ONNX Runtime's outputs, saved:
    from its reference kernels (graph optimizations off), as bench/ecosystem.py checks quantized
    files -- its optimized int8 kernels saturate their pair sums on a CPU without VNNI (2-5%
    off on EfficientNet-B0 QDQ on a Zen 3), which Ember's do not."""
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else (1 if k == 0 else 224) for k, d in enumerate(i.shape)]
        if "int" in i.type:
            feeds[i.name] = rng.integers(0, 100, shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    outs = sess.run(None, feeds)
    np.savez(out, **{f"x_{k}": v for k, v in feeds.items()}, **{f"y_{k}": v for k, v in enumerate(outs)})
    return out


def _arch_paths(names: list) -> list:
    import torch

    import arch_sweep as sweep

    d = os.path.join(os.path.expanduser("~"), ".cache", "ember", "arch_sweep")
    os.makedirs(d, exist_ok=True)
    out = []
    for name in names:
        path = os.path.join(d, f"{name}.onnx")
        if not os.path.exists(path):
            kind, source = sweep.ARCHS[name]
            with torch.no_grad():
                torch.onnx.export(sweep._build(source), sweep._inputs(kind, 1, 128, 0), path, dynamo=True,
                                  input_names=["x"], output_names=["y"])
        out.append((name, path))
    return out


def _fill(paths: list, cache: str) -> None:
    """A cache holding these models' kernels, both tiers (each compiled tiered, waited for)."""
    code = "import sys, ember\nexe = ember.compile(sys.argv[1])\ngetattr(exe, 'wait', lambda: None)()\n"
    for _, path in paths:
        env = dict(os.environ, EMBER_CACHE_DIR=cache)
        subprocess.run([sys.executable, "-c", code, path], env=env, check=True, capture_output=True, timeout=3600)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("models", nargs="*", help="light or zoo model names, zoo/NAME for the zoo's where a light model has the "
                   "name (default: the light nine and the zoo)")
    p.add_argument("--onnx", action="append", default=[], help="an ONNX file to add (repeatable)")
    p.add_argument("--arch", default="", help="comma-separated architectures of bench/arch_sweep.py to add")
    p.add_argument("--no-others", action="store_true", help="skip the 'others cached' figure (no cache fills)")
    p.add_argument("--json", help="also write the rows here")
    a = p.parse_args(argv)
    from compile_times import LIGHT, model_paths

    names = a.models
    if not names and not a.onnx and not a.arch:
        names = list(LIGHT)
        try:
            from ember.bench import zoo

            names += [f"zoo/{n}" if n in LIGHT else n for n in zoo.ZOO]
        except ImportError:
            print("(the zoo needs torch, torchvision and transformers: light models only)", file=sys.stderr)
    paths = model_paths(names) + [(os.path.splitext(os.path.basename(x))[0], x) for x in a.onnx]
    if a.arch:
        paths += _arch_paths([n for n in a.arch.split(",") if n])
    work = tempfile.mkdtemp(prefix="ember-first-result-")
    rows = []
    try:
        feeds = {name: _feeds(path, os.path.join(work, name.replace("/", "_") + ".npz")) for name, path in paths}
        halves = [paths[0::2], paths[1::2]]
        filled = []
        if not a.no_others:
            for k, half in enumerate(halves):
                cache = os.path.join(work, f"fill{k}")
                print(f"filling a cache with {len(halves[1 - k])} other models' kernels ...", file=sys.stderr, flush=True)
                _fill(halves[1 - k], cache)
                filled.append(cache)
        head = (f"{'model':<22}{'others cached':>14}{'empty':>8}{'tier 1 at':>10}{'wait=True':>10}"
                f"{'groups':>8}{'tier 0 ms':>10}{'tier 1 ms':>10}  ok")
        print(head)
        for k, half in enumerate(halves):
            for name, path in half:
                row = {"model": name}
                if filled:
                    cache = os.path.join(work, "copy")
                    # (the other models' kernels, not their kept executables -- models/, their
                    # packed weights, 2-3 GB: copying those before each measurement made the
                    # page cache churn, and a big model's import 0.3 -> 1.4 s)
                    shutil.copytree(filled[k], cache, ignore=shutil.ignore_patterns("models"))
                    row["others"] = _child("first", path, feeds[name], cache)
                    shutil.rmtree(cache)
                for mode, key in (("first", "empty"), ("time", "timed"), ("wait", "wait")):
                    cache = tempfile.mkdtemp(dir=work)
                    row[key] = _child(mode, path, feeds[name], cache)
                    shutil.rmtree(cache)
                rows.append(row)
                e, t, w = row["empty"], row["timed"], row["wait"]
                oth = row.get("others", {}).get("first_s")
                ok = all(r["correct"] for r in (e, t, w, row.get("others", e)))
                print(f"{name:<22}{(f'{oth:.2f} s' if oth is not None else '-'):>14}{e['first_s']:>6.2f} s"
                      f"{e.get('tier1_s', e['first_s']):>8.2f} s{w['first_s']:>8.2f} s{e.get('groups', 0):>8}"
                      f"{t.get('tier0_run_s', float('nan')) * 1e3:>10.1f}{w['tier1_run_s'] * 1e3:>10.1f}  "
                      f"{'yes' if ok else 'NO'}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # where the slowest three first results go, for both figures with a target (the 'others
    # cached' one's 1 s is the harder)
    for figure, what in (("others", "others' kernels cached"), ("empty", "empty cache")):
        measured = [r for r in rows if figure in r]
        if measured:
            print(f"\nslowest first results ({what}), where the time goes:")
        for r in sorted(measured, key=lambda r: -r[figure]["first_s"])[:3]:
            print(f"  {r['model']}: {_where(r[figure])}")
    # tier-0 kernels are named by what they compute: those no other model here has are what a
    # cache of the others' kernels lacks (the 'others cached' figure builds them)
    users: dict = {}
    for r in rows:
        for k in r["empty"].get("tier0_kernels", ()):
            users[k] = users.get(k, 0) + 1
    print("\ntier-0 kernels at the first result (empty cache), and of them no other model's here:")
    print("  " + ", ".join(f"{r['model']} {len(r['empty'].get('tier0_kernels', ()))} "
                           f"({sum(users[k] == 1 for k in r['empty'].get('tier0_kernels', ()))})" for r in rows))
    print(f"  distinct: {len(users)}; no other model's: {sum(n == 1 for n in users.values())}")
    firsts = [r["empty"]["first_s"] for r in rows]
    print(f"\nempty cache: median {statistics.median(firsts):.2f} s, max {max(firsts):.2f} s; "
          f"wait=True median {statistics.median(r['wait']['first_s'] for r in rows):.2f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["empty"]["correct"] and r["wait"]["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
