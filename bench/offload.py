"""Offload to oneDNN against Ember alone, each in its own process: per model the median run
time of Ember's kernels, of ``offload=["onednn"]`` (every convolution oneDNN takes on its
primitives, the model's blocked regions in oneDNN's block) and of ``offload="auto"`` (a
group offloaded only where its kernel measured faster, and only if the model then ran faster
than Ember alone), their ratios to Ember alone, and how many kernels went to oneDNN;
``--choices`` prints auto's per-kernel choices with both measured times, ``--kernels`` the
forced model's kernel profile (rows marked ``[onednn]``).

    python bench/offload.py                       # the zoo's CNNs and the light DenseNet-121
    python bench/offload.py resnet50 --choices
    python bench/offload.py bert vit_b_16          # products by weights on oneDNN's matmul
    python bench/offload.py resnet50 --precision bf16   # bf16 convolutions on oneDNN's
    python bench/offload.py --onnx ~/.cache/ember/ecosystem/timm/repvgg_a0.onnx
    python bench/offload.py --onnx ~/.cache/ember/quant/resnet50_qdq.onnx --saturating  # int8 on an AVX2 CPU
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, sys, time
import numpy as np
import ember
path, offload, repeat, kernels, precision = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
exe = ember.compile(path, wait=True, precision=precision, saturating_int8=sys.argv[6] == "1",
                    offload=(offload if offload == "auto" else [offload]) if offload else [])
from ember.profile.inputs import random_inputs
feeds = {i.name: a for i, a in zip(exe.input_info, random_inputs(exe.input_info))}  # (token ids: zeros)
for _ in range(5):
    out = exe.run(**feeds)
ts = []
for _ in range(repeat):
    t = time.perf_counter(); exe.run(**feeds); ts.append(time.perf_counter() - t)
n = sum(1 for e in exe.module.metadata["kernels"] if e.get("backend"))
res = {"median_ms": sorted(ts)[len(ts) // 2] * 1e3, "offloaded": n, "kernels": len(exe.module.metadata["kernels"]),
       "out": [float(np.asarray(o, np.float64).sum()) for o in out]}
if kernels:
    res["profile"] = exe.profile(**feeds, warmup=3, repeat=20).summary()
res["choices"] = getattr(exe, "offload_choices", None)
res["summary"] = getattr(exe, "offload_summary", None)
print(json.dumps(res))
"""


def _run(path: str, offload: str, repeat: int, kernels: bool, precision: str = "fp32",
         saturating: bool = False) -> dict:
    r = subprocess.run([sys.executable, "-c", _CHILD, path, offload, str(repeat), "1" if kernels else "0", precision,
                        "1" if saturating else "0"],
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("models", nargs="*", help="light or zoo model names (default, without --onnx: resnet50 "
                                             "resnet18 mobilenet_v2 efficientnet_b0 regnet_y_400mf densenet121)")
    p.add_argument("--onnx", action="append", default=[], help="an ONNX file to add (repeatable): timm's, "
                                                                  "ultralytics', a TorchScript export")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of processes (default 2)")
    p.add_argument("--repeat", type=int, default=50, help="timed runs per process (default 50)")
    p.add_argument("--kernels", action="store_true", help="print the forced model's kernel profile")
    p.add_argument("--choices", action="store_true", help="print auto's choice per kernel, with both times")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="compile every model at this precision (bf16: oneDNN's bf16 convolutions and products)")
    p.add_argument("--saturating", action="store_true",
                   help="compile every model with saturating_int8=True (a CPU without VNNI: full-range int8 "
                        "weights on pmaddubsw, saturating as ORT and oneDNN do there, which oneDNN then takes)")
    a = p.parse_args(argv)
    from compile_times import model_paths

    print(f"{'model':<18}{'ember':>10}{'onednn':>10}{'ratio':>8}{'auto':>10}{'ratio':>8}{'forced':>9}{'auto':>7}")
    names = a.models or ([] if a.onnx else ["resnet50", "resnet18", "mobilenet_v2", "efficientnet_b0",
                                             "regnet_y_400mf", "densenet121"])
    paths = model_paths(names) + [(os.path.splitext(os.path.basename(x))[0], x) for x in a.onnx]
    for name, path in paths:
        runs = {"": [], "onednn": [], "auto": []}
        info = {}
        for _ in range(a.rounds):
            for mode in runs:
                r = _run(path, mode, a.repeat, a.kernels and mode == "onednn" and not info.get(mode), a.precision,
                         a.saturating)
                runs[mode].append(r["median_ms"])
                info.setdefault(mode, r)
        e, o, u = (statistics.median(runs[k]) for k in ("", "onednn", "auto"))
        print(f"{name:<18}{e:>8.2f}ms{o:>8.2f}ms{o / e:>7.2f}x{u:>8.2f}ms{u / e:>7.2f}x"
              f"{info['onednn']['offloaded']:>5}/{info['onednn']['kernels']:<3}{info['auto']['offloaded']:>5}", flush=True)
        if a.choices and info["auto"].get("choices"):
            s = info["auto"]["summary"]
            print(f"  auto, in its process: Ember alone {s['ember_alone_s'] * 1e3:.2f} ms, the kernels chosen "
                  f"offloaded {s['chosen_s'] * 1e3:.2f} ms, all offloaded {s['forced_s'] * 1e3:.2f} ms -> {s['picked']}")
            for g, c in sorted(info["auto"]["choices"].items()):
                print(f"  {g:<44} oneDNN {c['backend_s'] * 1e6:8.1f} us  Ember {c['ember_s'] * 1e6:8.1f} us  "
                      f"{'-> oneDNN' if c['offloaded'] else ''}")
        if a.kernels and "profile" in info["onednn"]:
            print(info["onednn"]["profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
