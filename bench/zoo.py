"""Ember vs ONNX Runtime and OpenVINO (f32) on the zoo of today's architectures, with Ember also
through ``ember.from_torch`` (no ONNX) and PyTorch's own compiler, ``torch.compile`` with
Inductor, each runtime alone in its own process (the same as ``ember bench --zoo NAME... --vs
onnxruntime --vs openvino --vs from_torch --vs inductor``):

    python bench/zoo.py                          # the whole zoo
    python bench/zoo.py vit_b_16 bert            # some of it
    python bench/zoo.py --json zoo.json --rounds 5
    python bench/zoo.py --no-torch               # the ONNX runtimes only
    python bench/zoo.py --no-torch --offload     # and Ember with offload="auto" (oneDNN, issue 50)

Models are built from torchvision and transformers classes with random weights and exported
with torch.onnx.export(dynamo=True) at batch 1 (sequence 128); from_torch and Inductor take the
same module and inputs. The closing note gives, per model, Ember through ONNX and through
from_torch against Inductor. Needs the ``zoo`` extra.
"""
import argparse
import json
import math
import os
import sys
import tempfile

from ember.bench.models import main


def closing_note(rows: list) -> None:
    """Per model: Ember (ONNX), Ember (from_torch) and Inductor, and their ratios."""
    print("\nEmber vs torch.compile (Inductor), per model (ms; ratio < 1: Ember is faster):")
    print(f"  {'model':<26} {'ember':>9} {'from_torch':>11} {'inductor':>9} {'ember/inductor':>15} "
          f"{'from_torch/ember':>17}")
    for r in rows:
        t = r.get("median_ms", {})
        if "ember" not in t:
            continue
        e, f, i = t.get("ember"), t.get("from_torch"), t.get("inductor")
        cells = [f"{e:9.2f}", f"{f:11.2f}" if f else f"{'-':>11}", f"{i:9.2f}" if i else f"{'-':>9}",
                 f"{e / i:14.2f}x" if i else f"{'-':>15}", f"{f / e:16.2f}x" if f else f"{'-':>17}"]
        print(f"  {r['model'].split('.')[0]:<26} " + " ".join(cells))


def against_best_peer(rows: list) -> None:
    """Per model: Ember and Ember with ``offload="auto"`` against the better of ONNX Runtime and
    OpenVINO, and the geomeans of both ratios."""
    print("\nEmber and Ember with offload='auto' against the better of ONNX Runtime and OpenVINO (ms):")
    print(f"  {'model':<26} {'ember':>9} {'auto':>9} {'best peer':>10} {'ember/best':>11} {'auto/best':>10}")
    ratios: dict = {"ember": [], "ember_auto": []}
    for r in rows:
        t = r.get("median_ms", {})
        peers = [t[k] for k in ("onnxruntime", "openvino") if k in t]
        if "ember" not in t or not peers:
            continue
        best = min(peers)
        auto = t.get("ember_auto")
        ratios["ember"].append(t["ember"] / best)
        if auto:
            ratios["ember_auto"].append(auto / best)
        print(f"  {r['model'].split('.')[0]:<26} {t['ember']:9.2f} " + (f"{auto:9.2f}" if auto else f"{'-':>9}")
              + f" {best:10.2f} {t['ember'] / best:10.2f}x " + (f"{auto / best:9.2f}x" if auto else f"{'-':>10}"))
    geo = {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in ratios.items() if v}
    print("  geomean: " + ", ".join(f"{k} / best peer {v:.2f}x ({len(ratios[k])} models)" for k, v in geo.items()))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="zoo models (default: all)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of processes (default 3)")
    p.add_argument("--repeat", type=int, default=10, help="timed runs per process (default 10)")
    p.add_argument("--no-torch", action="store_true", help="leave out from_torch and Inductor")
    p.add_argument("--offload", action="store_true",
                   help="also time Ember with offload='auto' (oneDNN's kernels where they measure faster; needs "
                        "libdnnl) and give both against the better of ORT and OpenVINO")
    a = p.parse_args()
    out = a.json or os.path.join(tempfile.mkdtemp(prefix="ember-zoo-"), "zoo.json")
    argv = ["--vs", "onnxruntime", "--vs", "openvino", "--rounds", str(a.rounds), "--repeat", str(a.repeat)]
    argv += [] if a.no_torch else ["--vs", "from_torch", "--vs", "inductor"]
    argv += ["--vs", "ember_auto"] if a.offload else []
    code = main(argv + ["--json", out, "--zoo", *a.models])
    with open(out) as f:
        rows = json.load(f)
    if not a.no_torch:
        closing_note(rows)
    against_best_peer(rows)
    sys.exit(code)
