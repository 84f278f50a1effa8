"""How long a model takes to compile: Ember cold and warm against ONNX Runtime and OpenVINO.

Every figure comes from a fresh Python process, as a user meets it:

  * ``ember cold``: ``import ember; ember.compile(model, wait=True)`` with an empty kernel cache
    (``EMBER_CACHE_DIR`` a new folder): every kernel is lowered and compiled by LLVM;
  * ``ember warm``: the same again, the cache now filled (importing Ember included);
  * ``onnxruntime``: creating an ``InferenceSession`` (its import not counted);
  * ``openvino``: ``core.compile_model(model, "CPU")`` with the f32 hint (import not counted).

Medians of ``--rounds`` processes per figure, with Python's bytecode cache on (as users run;
``PYTHONDONTWRITEBYTECODE`` is dropped for the children). The cold compile's phases (import, constant
folding, the other graph passes, code generation) and its kernel count are printed beside it.

    python bench/compile_times.py                        # the light nine (random weights) and the zoo
    python bench/compile_times.py resnet50 densenet121 swin_t --rounds 3
    python bench/compile_times.py --light-only --json compile.json

Light models are the onnx package's (weights made random, as ``ember bench --random-weights``);
zoo models are exported once to ``~/.cache/ember/zoo`` (the ``zoo`` extra).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

LIGHT = ["resnet50", "densenet121", "inception_v1", "inception_v2", "squeezenet", "shufflenet",
         "vgg19", "bvlc_alexnet", "zfnet512"]

_EMBER = """
import json, sys, time
t0 = time.perf_counter()
import ember
exe = ember.compile(sys.argv[1], wait=True)
total = time.perf_counter() - t0
t = exe.compile_times
phases = {"model import": t.get("import", 0.0),
          "fold_constant": t.get("pass fold_constant", 0.0),
          "other passes": sum(v for k, v in t.items() if k.startswith("pass ") and k != "pass fold_constant"),
          "codegen": t.get("codegen", 0.0) + t.get("lower groups", 0.0)}
print(json.dumps({"seconds": total, "kernels": len({k for k, _ in exe.kernel_calls}), "phases": phases}))
"""
_ORT = """
import json, sys, time
import onnxruntime as ort
ort.set_default_logger_severity(3)
t0 = time.perf_counter()
ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""
_OPENVINO = """
import json, sys, time
import openvino as ov
t0 = time.perf_counter()
ov.Core().compile_model(sys.argv[1], "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def _run(code: str, path: str, env: dict) -> dict:
    # as a user's Python runs: bytecode cached (an environment that forbids writing it makes
    # every process compile Ember's sources again, ~0.3 s)
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-1500:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _peer(code: str, path: str, rounds: int):
    try:
        return statistics.median(_run(code, path, dict(os.environ))["seconds"] for _ in range(rounds))
    except (RuntimeError, json.JSONDecodeError, IndexError):
        return None  # not installed, or it cannot take the model


def model_paths(names: list) -> list:
    """(name, path) of each model: light models with random weights, zoo models exported."""
    from ember.bench.models import light_path, random_weights

    out, tmp = [], os.path.join(tempfile.gettempdir(), "ember-compile-times")
    os.makedirs(tmp, exist_ok=True)
    for name in names:
        if name in LIGHT:
            path = os.path.join(tmp, f"light_{name}_random.onnx")
            out.append((name, path if os.path.exists(path) else random_weights(light_path(name), tmp)))
        else:
            from ember.bench import zoo

            name = name[4:] if name.startswith("zoo/") else name  # (zoo/resnet50: the zoo's, not the light one)
            if name not in zoo.ZOO:
                raise SystemExit(f"no model {name!r}: the light models are {', '.join(LIGHT)}; the zoo has "
                                 f"{', '.join(zoo.ZOO)}")
            out.append((f"zoo/{name}" if name in LIGHT else name,
                        zoo.export(name, os.path.join(os.path.expanduser("~"), ".cache", "ember", "zoo"))))
    return out


def measure(name: str, path: str, rounds: int) -> dict:
    colds, warms, cold_info = [], [], None
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="ember-cold-") as cache:
            env = dict(os.environ, EMBER_CACHE_DIR=cache)
            info = _run(_EMBER, path, env)
            colds.append(info["seconds"])
            cold_info = cold_info or info
            warms.append(_run(_EMBER, path, env)["seconds"])
    return {"model": name, "ember_cold_s": statistics.median(colds), "ember_warm_s": statistics.median(warms),
            "kernels": cold_info["kernels"], "phases": cold_info["phases"],
            "onnxruntime_s": _peer(_ORT, path, rounds), "openvino_s": _peer(_OPENVINO, path, rounds)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="light or zoo model names, zoo/NAME for the zoo's where a light model has the "
                   "name (default: the light nine and the zoo)")
    p.add_argument("--light-only", action="store_true", help="only the nine light models")
    p.add_argument("--rounds", type=int, default=1, help="fresh processes per figure (median; default 1)")
    p.add_argument("--json", help="also write the rows here")
    a = p.parse_args(argv)
    names = a.models
    if not names:
        names = list(LIGHT)
        if not a.light_only:
            try:
                from ember.bench import zoo

                names += [f"zoo/{n}" if n in LIGHT else n for n in zoo.ZOO]
            except ImportError:
                print("(the zoo needs torch, torchvision and transformers: light models only)", file=sys.stderr)
    rows = []
    head = (f"{'model':<24}{'ember cold':>11}{'warm':>7}{'kernels':>9}{'ORT':>7}{'OpenVINO':>10}   "
            f"cold phases: fold / passes / codegen")
    print(head)
    for name, path in model_paths(names):
        r = measure(name, path, a.rounds)
        rows.append(r)
        ph = r["phases"]
        peer = lambda v: f"{v:7.2f}" if v is not None else "      -"  # noqa: E731
        print(f"{name:<24}{r['ember_cold_s']:10.2f}s{r['ember_warm_s']:6.2f}s{r['kernels']:9d}"
              f"{peer(r['onnxruntime_s'])}{peer(r['openvino_s'])}   "
              f"{ph['fold_constant']:.2f} / {ph['other passes']:.2f} / {ph['codegen']:.2f}", flush=True)
    worst = max(rows, key=lambda r: r["ember_cold_s"])
    print(f"slowest cold compile: {worst['model']} {worst['ember_cold_s']:.2f} s; slowest warm: "
          f"{max(r['ember_warm_s'] for r in rows):.2f} s (fresh processes, Ember's import included)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
