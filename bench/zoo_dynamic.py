"""Every zoo model exported with dynamic axes, compiled once without input_shapes, run at two
batch (and sequence) sizes and compared with torch (rtol 1e-3, atol 1e-4 on the output's scale).

    python bench/zoo_dynamic.py                       # the whole zoo
    python bench/zoo_dynamic.py --model bert --model resnet18

Needs the zoo extra (torch, torchvision, transformers, onnxscript). Exports are cached in
--dir. Prints one row per model: the input signature Ember sees, compile seconds, and the
largest error relative to the output's magnitude at each size.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

SIZES = ((1, 16), (3, 40))  # (batch, sequence) pairs; vision models use the batch only


def check(name: str, out_dir: str) -> dict:
    import ember
    from ember.bench import zoo

    path = zoo.export(name, out_dir, dynamic=True)
    model = zoo.build_model(name)
    t0 = time.perf_counter()
    exe = ember.compile(path, wait=True)
    row = {"model": name, "inputs": ", ".join(f"{i.name}{tuple(i.shape)}" for i in exe.input_info),
           "compile_s": time.perf_counter() - t0, "errors": []}
    for batch, seq in SIZES:
        ex = zoo.ZOO[name].example(batch=batch, seq=seq)
        got = exe.run(*ex.values())[0]
        want = zoo.reference(name, ex, model=model)
        scale = max(float(np.abs(want).max()), 1e-6)
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-4 * scale)
        err = float(np.abs(got - want).max() / scale) if got.shape == want.shape else float("inf")
        row["errors"].append((batch, seq, err, ok))
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--model", action="append", help="a zoo model (repeatable; default: all)")
    p.add_argument("--dir", default=os.path.join(os.path.expanduser("~"), ".cache", "ember", "zoo"),
                   help="where the exports are kept")
    args = p.parse_args(argv)
    from ember.bench import zoo

    names = args.model or list(zoo.ZOO)
    failed = 0
    print(f"{'model':24} {'compile s':>9}  errors (batch x seq: max |err| / max |y|)")
    for name in names:
        try:
            row = check(name, args.dir)
        except Exception as e:  # noqa: BLE001 - report and go on to the next model
            print(f"{name:24} FAILED: {type(e).__name__}: {str(e)[:300]}")
            failed += 1
            continue
        errs = "  ".join(f"{b}x{s}: {e:.1e}{'' if ok else ' MISMATCH'}" for b, s, e, ok in row["errors"])
        failed += not all(ok for *_, ok in row["errors"])
        print(f"{name:24} {row['compile_s']:9.1f}  {errs}   [{row['inputs']}]", flush=True)
    print(f"{len(names) - failed} of {len(names)} models compile once and match torch at {len(SIZES)} sizes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
