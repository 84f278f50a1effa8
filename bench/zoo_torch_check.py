"""Do Ember's outputs on the zoo match PyTorch eager? (rtol 1e-3; the zoo extra)

Each zoo model is built from its class with the seeded random weights its export used, run in
torch eager mode and compiled by Ember from the export, on the benchmark's inputs:

    python bench/zoo_torch_check.py                 # the whole zoo
    python bench/zoo_torch_check.py vit_b_16 gpt2

Exits 1 if any model differs by more than rtol 1e-3 (atol 1e-4 of the output's scale).
"""
import argparse
import os
import sys

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="zoo models (default: all)")
    a = p.parse_args(argv)
    import torch

    import ember
    from ember.bench.zoo import ZOO, build_model, export

    out_dir = os.path.join(os.path.expanduser("~"), ".cache", "ember", "zoo")
    failed = []
    for name in a.models or list(ZOO):
        model = build_model(name, seed=0)
        feeds = ZOO[name].example(batch=1, seq=128, seed=1)
        with torch.no_grad():
            ref = model(*[torch.from_numpy(v) for v in feeds.values()]).numpy()
        got = ember.compile(export(name, out_dir, model=model), wait=True).run(**feeds)[0]
        err, scale = float(np.abs(got - ref).max()), float(np.abs(ref).max())
        ok = got.shape == ref.shape and np.allclose(got, ref, rtol=1e-3, atol=1e-4 * max(1.0, scale))
        print(f"{name:24s} max abs difference {err:.2e} (outputs up to {scale:.2e}): {'ok' if ok else 'MISMATCH'}",
              flush=True)
        failed += [] if ok else [name]
    print("all match torch at rtol 1e-3" if not failed else f"mismatch: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
