"""Ember vs ONNX Runtime and OpenVINO (f32) on the zoo of today's architectures, each runtime
alone in its own process (the same as ``ember bench --zoo NAME... --vs onnxruntime --vs openvino``):

    python bench/zoo.py                          # the whole zoo
    python bench/zoo.py vit_b_16 bert            # some of it
    python bench/zoo.py --json zoo.json --rounds 5

Models are built from torchvision and transformers classes with random weights and exported
with torch.onnx.export(dynamo=True) at batch 1 (sequence 128); needs the ``zoo`` extra.
"""
import argparse
import sys

from ember.bench.models import main

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="zoo models (default: all)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of processes (default 3)")
    p.add_argument("--repeat", type=int, default=10, help="timed runs per process (default 10)")
    a = p.parse_args()
    argv = ["--vs", "onnxruntime", "--vs", "openvino", "--rounds", str(a.rounds), "--repeat", str(a.repeat)]
    argv += ["--json", a.json] if a.json else []
    sys.exit(main(argv + ["--zoo", *a.models]))
