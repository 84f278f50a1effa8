"""Ember vs ONNX Runtime and OpenVINO (f32) on the zoo of today's architectures, with Ember also
through ``ember.from_torch`` (no ONNX) and PyTorch's own compiler, ``torch.compile`` with
Inductor, each runtime alone in its own process (the same as ``ember bench --zoo NAME... --vs
onnxruntime --vs openvino --vs from_torch --vs inductor``):

    python bench/zoo.py                          # the whole zoo
    python bench/zoo.py vit_b_16 bert            # some of it
    python bench/zoo.py --json zoo.json --rounds 5
    python bench/zoo.py --no-torch               # the ONNX runtimes only

Models are built from torchvision and transformers classes with random weights and exported
with torch.onnx.export(dynamo=True) at batch 1 (sequence 128); from_torch and Inductor take the
same module and inputs. The closing note gives, per model, Ember through ONNX and through
from_torch against Inductor. Needs the ``zoo`` extra.
"""
import argparse
import json
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


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="zoo models (default: all)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of processes (default 3)")
    p.add_argument("--repeat", type=int, default=10, help="timed runs per process (default 10)")
    p.add_argument("--no-torch", action="store_true", help="leave out from_torch and Inductor")
    a = p.parse_args()
    out = a.json or os.path.join(tempfile.mkdtemp(prefix="ember-zoo-"), "zoo.json")
    argv = ["--vs", "onnxruntime", "--vs", "openvino", "--rounds", str(a.rounds), "--repeat", str(a.repeat)]
    argv += [] if a.no_torch else ["--vs", "from_torch", "--vs", "inductor"]
    code = main(argv + ["--json", out, "--zoo", *a.models])
    if not a.no_torch:
        with open(out) as f:
            closing_note(json.load(f))
    sys.exit(code)
