"""Peak memory (max RSS) of running ResNet-50: Ember against ONNX Runtime and OpenVINO, each
runtime alone in a fresh process.

    python bench/memory.py                      # onnx's light ResNet-50 with random weights
    python bench/memory.py --light squeezenet   # another of onnx's light models
    python bench/memory.py --model model.onnx
    python bench/memory.py --phases             # also: where Ember's compile+run memory goes

Each row is one fresh child process that imports its runtime, sets the model up and runs it
``--runs`` times on one input; the number is that process's ``ru_maxrss`` (its peak resident
set), next to the RSS right after importing the runtime (what the bare import costs):

  * ``ember compile+run, warm``: ``ember.compile(path)`` with the kernel cache already holding
    this model's library (a warm compile: import, graph passes, constant folding, program), then
    the runs;
  * ``ember compile+run, cold``: the same with an empty ``EMBER_CACHE_DIR`` (kernels are
    generated; the model's kernels go through LLVM in worker processes, not counted here, small
    programs such as the constant-folding one in this process);
  * ``ember load+run``: ``ember.load`` of an export made beforehand (``exe.export``), then the runs
    (the weights stay in the library's mapped pages);
  * ``onnxruntime``: an ``InferenceSession`` (default graph optimizations), then the runs;
  * ``openvino``: ``core.compile_model`` with the f32 hint, then the runs (when installed).

``--phases`` reruns the Ember compile (warm, then cold) in a child that prints the RSS and the
peak after each phase (import, each graph pass, building the program, the runs, dropping the
executable): the peak is reset before each phase (``/proc/self/clear_refs``), so each line's
peak is that phase's.

This process imports neither numpy nor onnx: a child's ``ru_maxrss`` starts from the RSS of the
process that forked it (Linux keeps the high-water mark across ``execve``).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time


def _maxrss_mb(who=resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0  # kB on Linux


def _status_mb(key: str) -> float:
    """A VmRSS/VmHWM line of /proc/self/status in MB (0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _reset_peak() -> bool:
    """Reset the process's peak RSS (VmHWM) to its current RSS (Linux 4.0+)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _input(info):
    import numpy as np

    rng = np.random.default_rng(0)
    return {i[0]: rng.standard_normal([d if isinstance(d, int) else 1 for d in i[1]]).astype(i[2]) for i in info}


# -- children ----------------------------------------------------------------------------------

def child(kind: str, model: str, so: str, runs: int) -> dict:
    t0 = time.perf_counter()
    if kind == "weights":
        from ember.bench.models import light_path, random_weights
        return {"path": random_weights(light_path(model), so)}
    if kind == "bare":
        import numpy  # noqa: F401
        out = {"after_import": _status_mb("VmRSS")}
    elif kind == "runtime":
        import ember.runtime  # noqa: F401  (the runtime package alone: ctypes and numpy)
        import ember.runtime.load  # noqa: F401
        out = {"after_import": _status_mb("VmRSS")}
    elif kind.startswith("ember"):
        import ember
        import ember.runtime.load  # noqa: F401
        after = _status_mb("VmRSS")
        if kind == "ember load":
            exe = ember.load(so)
        else:
            exe = ember.compile(model, wait=True)
            if kind == "ember export":
                exe.export(so)
        feeds = _input([(i.name, i.shape, i.dtype) for i in exe.input_info])
        set_up = _status_mb("VmRSS")
        for _ in range(runs):
            exe.run(**feeds)
        out = {"after_import": after, "after_setup": set_up}
    elif kind == "onnxruntime":
        import onnxruntime as ort
        after = _status_mb("VmRSS")
        so_ = ort.SessionOptions()
        so_.log_severity_level = 3
        sess = ort.InferenceSession(model, so_, providers=["CPUExecutionProvider"])
        feeds = _input([(i.name, i.shape, "float32") for i in sess.get_inputs()])
        set_up = _status_mb("VmRSS")
        for _ in range(runs):
            sess.run(None, feeds)
        out = {"after_import": after, "after_setup": set_up}
    elif kind == "openvino":
        import openvino as ov
        after = _status_mb("VmRSS")
        core = ov.Core()
        compiled = core.compile_model(core.read_model(model), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        request = compiled.create_infer_request()
        feeds = _input([(p.get_any_name(), tuple(p.shape), "float32") for p in compiled.inputs])
        set_up = _status_mb("VmRSS")
        for _ in range(runs):
            request.infer(feeds)
        out = {"after_import": after, "after_setup": set_up}
    else:
        raise SystemExit(f"unknown child {kind!r}")
    out.update(maxrss=_maxrss_mb(), hwm=_status_mb("VmHWM"), seconds=time.perf_counter() - t0)
    return out


def phases(model: str, runs: int) -> list:
    """RSS and per-phase peak through one warm Ember compile and its runs."""
    import gc

    rows = []

    def mark(name):
        rows.append((name, _status_mb("VmRSS"), _status_mb("VmHWM")))
        _reset_peak()

    import ember
    import ember.compiler.compile as cc
    from ember.graph.passes import Instrument
    mark("import ember")

    class Checkpoints(Instrument):
        def after(self, p, mod):
            mark(f"pass {p.name}")

    import ember.frontend.onnx.importer as imp
    real_from_onnx, real_build = imp.from_onnx, cc.build_executable

    def from_onnx(*a, **k):
        mod = real_from_onnx(*a, **k)
        mark("import the ONNX model")
        return mod

    def build(*a, **k):
        exe = real_build(*a, **k)
        mark("build (program, library)")
        return exe

    imp.from_onnx, cc.build_executable = from_onnx, build
    mark("(start)")
    exe = ember.compile(model, instruments=[Checkpoints()], wait=True)
    mark("compile returns")
    feeds = _input([(i.name, i.shape, i.dtype) for i in exe.input_info])
    for _ in range(runs):
        exe.run(**feeds)
    mark(f"{runs} runs")
    del exe
    gc.collect()
    mark("executable dropped")
    return rows


# -- the table ---------------------------------------------------------------------------------

def _spawn(args: list, env: dict) -> dict:
    res = subprocess.run([sys.executable, os.path.abspath(__file__), *args], env=env,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--light", default="resnet50", help="one of onnx's light models (random weights)")
    src.add_argument("--model", help="an ONNX file")
    p.add_argument("--runs", type=int, default=10, help="runs after setting up (default 10)")
    p.add_argument("--phases", action="store_true", help="also print RSS per phase of Ember's compile")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--so", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child == "phases":
        print(json.dumps(phases(a.model, a.runs)))
        return 0
    if a.child:
        print(json.dumps(child(a.child, a.model, a.so, a.runs)))
        return 0

    with tempfile.TemporaryDirectory(prefix="ember-memory-") as tmp:
        # this process stays small (no numpy, no onnx): a child's ru_maxrss starts from the RSS
        # of the process that forked it
        if a.model:
            model, title = a.model, os.path.basename(a.model)
        else:
            model = _spawn(["--child", "weights", "--model", a.light, "--so", tmp], dict(os.environ))["path"]
            title = f"{a.light} (random weights)"
        so = os.path.join(tmp, "model.so")
        warm_cache = os.path.join(tmp, "cache-warm")
        env = dict(os.environ, EMBER_CACHE_DIR=warm_cache)
        args = ["--model", model, "--so", so, "--runs", str(a.runs)]
        _spawn(["--child", "ember export", *args], env)  # fills the warm cache and writes the export
        rows = {"python + numpy": _spawn(["--child", "bare", *args], env),
                "import ember.runtime": _spawn(["--child", "runtime", *args], env),
                "ember compile+run, warm": _spawn(["--child", "ember compile", *args], env)}
        cold = os.path.join(tmp, "cache-cold")
        rows["ember compile+run, cold"] = _spawn(["--child", "ember compile", *args],
                                                 dict(os.environ, EMBER_CACHE_DIR=cold))
        shutil.rmtree(cold, ignore_errors=True)
        rows["ember load+run"] = _spawn(["--child", "ember load", *args], env)
        try:
            import onnxruntime  # noqa: F401
            rows["onnxruntime"] = _spawn(["--child", "onnxruntime", *args], env)
        except ImportError:
            print("onnxruntime is not installed: skipped")
        try:
            import openvino  # noqa: F401
            rows["openvino"] = _spawn(["--child", "openvino", *args], env)
        except ImportError:
            print("openvino is not installed: skipped")
        ph = {}
        if a.phases:
            ph["warm"] = _spawn(["--child", "phases", *args], env)
            ph["cold"] = _spawn(["--child", "phases", *args], dict(os.environ, EMBER_CACHE_DIR=cold))

    ort = rows.get("onnxruntime", {}).get("maxrss")
    print(f"{title}: peak RSS (ru_maxrss) of a fresh process per row; {a.runs} runs after setting up")
    print(f"  {'':26s} {'peak MB':>8s} {'vs ORT':>7s} {'VmHWM MB':>8s} {'import MB':>9s} {'set up MB':>9s}")
    for name, r in rows.items():
        ratio = f"{r['maxrss'] / ort:6.2f}x" if ort else "      -"
        setup = f"{r['after_setup']:9.0f}" if "after_setup" in r else f"{'':9s}"
        print(f"  {name:26s} {r['maxrss']:8.0f} {ratio} {r['hwm']:8.0f} {r['after_import']:9.0f} {setup}")
    if ph:
        print("\nEmber compile+run, RSS after each phase and the peak within it (MB; a 'build' inside a "
              "pass is the constant-folding program's):")
        print(f"  {'':34s} {'warm rss':>9s} {'peak':>6s} {'cold rss':>9s} {'peak':>6s}")
        for (name, rss, peak), (_, crss, cpeak) in zip(ph["warm"], ph["cold"]):
            print(f"  {name:34s} {rss:9.0f} {peak:6.0f} {crss:9.0f} {cpeak:6.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
