"""Which core ATen operators Ember's PyTorch frontend converts, of the ~190 torch documents as
core ATen (tagged ``torch.Tag.core``: what ``ember.from_torch``'s decompositions lower every
program to). Needs torch.

    python bench/torch_ops.py              # counts, then the ops not converted
    python bench/torch_ops.py --all        # every core op with its status
    python bench/torch_ops.py --json ops.json
"""
import argparse
import json
import sys

_WHY = {"training": "backward passes and training-only ops (Ember compiles inference graphs)",
        "random": "random numbers (not in inference graphs)",
        "out=": "out= overloads (the functional overload is what exported programs use)",
        "missing": "not converted yet"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--all", action="store_true", help="list every core op with its status")
    p.add_argument("--json", help="write the lists here")
    a = p.parse_args(argv)
    import torch

    from ember.frontend.torch.coverage import coverage

    cov = coverage()
    core, done = cov["core"], cov["converted"]
    inference = [op for op in core if op not in cov["training"] + cov["random"] + cov["out="]]
    print(f"torch {torch.__version__}: {len(core)} core ATen operators; Ember converts {len(done)} "
          f"({100 * len(done) / len(core):.0f}%), {len(done)} of the {len(inference)} an inference graph can use "
          f"({100 * len(done) / max(1, len(inference)):.0f}%)")
    for k in ("training", "random", "out=", "missing"):
        if cov[k]:
            print(f"\n{len(cov[k])} {_WHY[k]}:")
            print("  " + "\n  ".join(cov[k]))
    if a.all:
        print("\nconverted:")
        print("  " + "\n  ".join(done))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cov, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
