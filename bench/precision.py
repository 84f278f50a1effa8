"""Ember's bf16 mode against Ember in fp32 and the peers' defaults, each runtime alone in a
process of its own.

On a CPU with AVX512-BF16, OpenVINO runs float32 files in bf16 out of the box; a user
comparing defaults sees that. This benchmark times, per zoo model (random weights, exported
with ``torch.onnx.export(dynamo=True)`` at batch 1):

- ``ember``: fp32; ``ember_bf16``: ``ember.compile(path, precision="bf16")``;
- ``onnxruntime`` (fp32), ``openvino`` (the f32 precision hint) and ``openvino_default`` (its
  default hint: bf16 on this CPU);

and prints medians, Ember bf16 against Ember fp32 and against OpenVINO's default, and the bf16
outputs' error against fp32 (largest difference over the largest fp32 output; OpenVINO's own
default-hint error beside it).

    python bench/precision.py                      # resnet50 bert vit_b_16
    python bench/precision.py resnet18 convnext_tiny --rounds 5 --json prec.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

DEFAULT = ["resnet50", "bert", "vit_b_16"]
RUNTIMES = ["ember", "ember_bf16", "onnxruntime", "openvino", "openvino_default"]


def _feeds(exe, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for i in exe.input_info:
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "int" in str(i.dtype):  # token ids (and a mask of ones)
            out[i.name] = (np.ones(shape, i.dtype) if "mask" in i.name
                           else rng.integers(0, 100, shape).astype(i.dtype))
        else:
            out[i.name] = rng.standard_normal(shape).astype(i.dtype)
    return out


def _error(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30))


def _openvino_default_error(path: str, feeds: dict, ref) -> float | None:
    from ember.bench.peers import openvino_default

    run = openvino_default(path, os.cpu_count() or 1, None)
    return None if run is None else _error(ref, run(feeds)[0])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="*", default=DEFAULT, help=f"zoo models (default: {' '.join(DEFAULT)})")
    from ember.bench.isolated import timing_arguments

    timing_arguments(p)
    args = p.parse_args(argv)
    import ember
    from ember.bench.isolated import paired_ratio, time_isolated
    from ember.bench.zoo import export
    from ember.runtime.pool import host_cores
    from ember.target import Target

    host = Target.host()
    if not host.has_feature("avx512bf16"):
        print(f"this CPU ({host.cpu}) has no AVX512-BF16: Ember's bf16 mode needs it", file=sys.stderr)
        return 2
    threads = args.threads or host_cores()
    out_dir = os.path.join(os.path.expanduser("~"), ".cache", "ember", "zoo")
    print(f"host: {host.cpu}, {threads} threads; features: "
          f"{', '.join(sorted(f for f in host.feature_set if 'bf16' in f or 'vnni' in f or f == 'avx512f'))}")
    rows = []
    for name in args.models:
        path = export(name, out_dir)
        fp32 = ember.compile(path, wait=True)
        bf16 = ember.compile(path, precision="bf16", wait=True)  # (both compiled here once: the children load them)
        feeds = _feeds(fp32)
        ref = fp32.run(**feeds)[0]
        err = _error(ref, bf16.run(**feeds)[0])
        ov_err = _openvino_default_error(path, feeds, ref)
        res = time_isolated(path, feeds, RUNTIMES, threads, rounds=args.rounds, repeat=args.repeat)
        ms = {r: v["median"] * 1e3 for r, v in res.items() if "median" in v}
        row = {"model": name, "median_ms": ms, "bf16_error": err, "openvino_default_error": ov_err,
               "bf16_vs_fp32": paired_ratio(res, "ember_bf16", "ember"),
               "bf16_vs_openvino_default": paired_ratio(res, "ember_bf16", "openvino_default"),
               "notes": {r: v.get("error") or v.get("skipped") for r, v in res.items() if "median" not in v}}
        rows.append(row)
        cells = "  ".join(f"{r} {ms[r]:.2f}" for r in RUNTIMES if r in ms)
        print(f"{name}: {cells} ms")
    print(f"\n{'model':<14} " + " ".join(f"{r:>16}" for r in RUNTIMES)
          + f" {'fp32/bf16':>10} {'bf16/ov-def':>12} {'bf16 err':>9} {'ov-def err':>10}")
    for row in rows:
        ms = row["median_ms"]
        speed = 1 / row["bf16_vs_fp32"] if row["bf16_vs_fp32"] else None
        vs = row["bf16_vs_openvino_default"]
        print(f"{row['model']:<14} " + " ".join(f"{ms[r]:>13.2f} ms" if r in ms else f"{'-':>16}" for r in RUNTIMES)
              + (f" {speed:>9.2f}x" if speed else f" {'-':>10}") + (f" {vs:>11.2f}x" if vs else f" {'-':>12}")
              + f" {row['bf16_error']:>9.1e}"
              + (f" {row['openvino_default_error']:>10.1e}" if row["openvino_default_error"] is not None else ""))
    print("(fp32/bf16: Ember fp32's time over Ember bf16's, paired by round; bf16/ov-def: Ember bf16's time over "
          "OpenVINO's with its default hint; errors: largest difference from Ember fp32 over its largest output)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"host": host.cpu, "threads": threads, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
