"""Quantized models as ONNX Runtime's tools write them, Ember against ORT and OpenVINO, each
runtime alone in a process of its own.

Each zoo model (random weights, ``torch.onnx.export(dynamo=True)``, batch 1) is quantized once
(kept under ``~/.cache/ember/quant``): ``qdq`` with ``quantize_static`` (QDQ format, uint8
activations, int8 weights per channel, calibrated on a few random batches), ``emq`` with
``ember.quantize`` on the same batches, and, for the transformers, ``dyn`` with
``quantize_dynamic`` (MatMulInteger). Printed per file: the medians
of Ember, ORT, OpenVINO (f32 hint; and its default hint), Ember on the fp32 file, Ember's time
over the better peer's, its speed-up over its own fp32, and its largest difference from ORT's
outputs (optimized, and unoptimized) beside ORT's own optimized-vs-unoptimized difference,
and Ember's and ORT's from onnx's reference evaluator (the spec's integer arithmetic: where
ORT's kernels saturate, a CPU without VNNI, ORT's spread does not show it, the reference does);
and per model, the error against fp32 of ``ember.quantize``'s file and of
``quantize_static``'s (both run by ORT, on a batch neither calibrated on).

    python bench/quantized.py                          # resnet50 resnet18 mobilenet_v2 efficientnet_b0 bert distilbert
    python bench/quantized.py bert --kinds dyn --rounds 5 --json q.json
    python bench/quantized.py resnet50 --kinds qdq7 --avx2   # + Ember's AVX2 code (a Zen 3's), int8 and fp32
    python bench/quantized.py resnet50 bert --kinds qdq --saturating   # + Ember saturating as ORT (no VNNI)

``qdq7`` is ``quantize_static`` with ``reduce_range`` (7-bit weights), what ORT advises for CPUs
without VNNI: there Ember's integer kernels run AVX2's ``pmaddubsw``, exact only for such
weights. ``--saturating`` adds Ember with ``saturating_int8=True`` (``ember_saturating``): on a CPU
without VNNI, full-range weights on ``pmaddubsw`` too, saturating as ORT's MLAS and oneDNN do
there; its speed-up over Ember's fp32 and its difference from ORT's outputs are printed with
the rest. ``--avx2`` adds Ember's code for an AVX2 CPU without AVX-512 or VNNI (built for Zen 3,
run on this host) on the int8 and fp32 files: its int8 speed-up over its fp32 is what an AVX2
host would see (the peers still use this host's instructions).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

DEFAULT = ["resnet50", "resnet18", "mobilenet_v2", "efficientnet_b0", "bert", "distilbert"]
PEERS = ["onnxruntime", "openvino", "openvino_default"]
QUANT = os.path.join(os.path.expanduser("~"), ".cache", "ember", "quant")


def _feeds(path: str, seed: int = 0) -> dict:
    import onnx

    rng = np.random.default_rng(seed)
    out = {}
    for i in onnx.load(path, load_external_data=False).graph.input:
        t = i.type.tensor_type
        shape = [d.dim_value or 1 for d in t.shape.dim]
        if t.elem_type == onnx.TensorProto.INT64:  # token ids (a mask of ones; token types 0)
            out[i.name] = (np.ones(shape, np.int64) if "mask" in i.name else np.zeros(shape, np.int64)
                           if "type" in i.name else rng.integers(0, 1000, shape).astype(np.int64))
        else:
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def quantized(name: str, kind: str, fp32: str) -> str:
    """The ``kind`` (``qdq`` or ``dyn``) quantization of ``fp32``, made once."""
    path = os.path.join(QUANT, f"{name}_{kind}.onnx")
    if os.path.exists(path):
        return path
    os.makedirs(QUANT, exist_ok=True)
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)

    tmp = path + ".tmp.onnx"
    if kind == "dyn":
        quantize_dynamic(fp32, tmp, weight_type=QuantType.QInt8)
    elif kind == "emq":
        import ember

        ember.quantize(fp32, [_feeds(fp32, seed) for seed in range(4)], tmp)
    else:
        batches = iter([_feeds(fp32, seed) for seed in range(4)])

        class Reader(CalibrationDataReader):
            def get_next(self):
                return next(batches, None)
        quantize_static(fp32, tmp, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        reduce_range=kind == "qdq7")
    os.replace(tmp, path)
    return path


def _differences(path: str, feeds: dict, saturating: bool = False) -> dict:
    """Largest differences of first outputs: Ember from ORT optimized (``ort``) and unoptimized
    (``ort_unopt``), ORT optimized from unoptimized (``spread``), and Ember and ORT optimized
    from onnx's reference evaluator (``ref``, ``ort_ref``), which computes integer ops exactly
    as the spec says. (On a CPU without VNNI ORT's MLAS kernels saturate pmaddubsw's int16 pair
    sums with full-range weights: its optimized QDQ kernels, and MatMulInteger in both sessions,
    so there its spread misses the error; its unoptimized QDQ session computes in float.)"""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    import ember

    def sess(level):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    opt = sess(ort.GraphOptimizationLevel.ORT_ENABLE_ALL).run(None, feeds)[0]
    raw = sess(ort.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feeds)[0]
    spec = ReferenceEvaluator(path).run(None, feeds)[0]
    got = ember.compile(path, wait=True).run(**feeds)[0]
    d = lambda a, b: float(np.abs(np.asarray(a, np.float64) - b).max())  # noqa: E731
    out = {"ort": d(got, opt), "ort_unopt": d(got, raw), "spread": d(raw, opt), "ref": d(got, spec),
           "ort_ref": d(opt, spec)}
    if saturating:
        sat = ember.compile(path, saturating_int8=True, wait=True).run(**feeds)[0]
        out.update(sat_ort=d(sat, opt), sat_ref=d(sat, spec))
    return out


def _fp32_error(fp32: str, path: str) -> float:
    """The largest difference of ``path``'s first output from ``fp32``'s over the latter's
    largest magnitude, both run by ORT on a batch no quantizer calibrated on."""
    import onnxruntime as ort

    feeds = _feeds(fp32, seed=100)
    ref, got = (ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, feeds)[0] for p in (fp32, path))
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="*", default=DEFAULT, help=f"zoo models (default: {' '.join(DEFAULT)})")
    p.add_argument("--kinds", nargs="*", default=["qdq", "emq", "dyn"], choices=["qdq", "qdq7", "emq", "dyn"],
                   help="quantizations (dyn only for the transformers; qdq7: reduce_range, 7-bit weights)")
    p.add_argument("--saturating", action="store_true",
                   help="also Ember with saturating_int8=True (as ORT's and oneDNN's int8 on a CPU without VNNI)")
    p.add_argument("--avx2", action="store_true",
                   help="also Ember's AVX2 code (built for Zen 3, no AVX-512/VNNI) on the int8 and fp32 files")
    from ember.bench.isolated import timing_arguments

    timing_arguments(p)
    args = p.parse_args(argv)
    from ember.bench.isolated import EMBER_TARGETS, time_isolated
    from ember.bench.zoo import ZOO, export
    from ember.runtime.pool import host_cores
    from ember.target import Target

    host = Target.host()
    threads = args.threads or host_cores()
    print(f"host: {host.cpu}, {threads} threads; integer features: "
          f"{', '.join(sorted(f for f in host.feature_set if 'vnni' in f)) or 'none (no VNNI)'}")
    rows = []
    for name in args.models:
        fp32 = export(name, os.path.join(os.path.expanduser("~"), ".cache", "ember", "zoo"))
        feeds = _feeds(fp32)
        own = ["ember"] + (["ember_avx2"] if args.avx2 else [])
        if args.avx2:
            import ember

            ember.compile(fp32, target=EMBER_TARGETS["ember_avx2"], wait=True)  # (once, for the children's cache)
        base = time_isolated(fp32, feeds, own, threads, rounds=args.rounds, repeat=args.repeat)
        for kind in args.kinds:
            if kind == "dyn" and ZOO[name].kind != "text":
                continue
            path = quantized(name, kind, fp32)
            if args.avx2:
                ember.compile(path, target=EMBER_TARGETS["ember_avx2"], wait=True)
            sat = ["ember_saturating"] if args.saturating else []
            res = time_isolated(path, feeds, own + sat + PEERS, threads, rounds=args.rounds, repeat=args.repeat)
            ms = {r: v["median"] * 1e3 for r, v in res.items() if "median" in v}
            for r in own:
                if "median" in base.get(r, {}):
                    ms[r.replace("ember", "ember_fp32")] = base[r]["median"] * 1e3
            diff = _differences(path, feeds, args.saturating)
            best = min((ms[r] for r in PEERS if r in ms), default=None)
            row = {"model": f"{name}_{kind}", "median_ms": ms, "vs_best_peer": ms["ember"] / best if best else None,
                   "vs_ember_fp32": ms.get("ember_fp32", math.nan) / ms["ember"], "max_diff_vs_ort": diff["ort"],
                   "max_diff_vs_ort_unopt": diff["ort_unopt"], "ort_opt_vs_unopt": diff["spread"],
                   "max_diff_vs_reference": diff["ref"], "ort_vs_reference": diff["ort_ref"],
                   "fp32_error": _fp32_error(fp32, path)}
            if "ember_saturating" in ms:
                row.update(saturating_vs_best_peer=ms["ember_saturating"] / best if best else None,
                           saturating_vs_ember_fp32=ms.get("ember_fp32", math.nan) / ms["ember_saturating"],
                           saturating_diff_vs_ort=diff["sat_ort"], saturating_diff_vs_reference=diff["sat_ref"])
            rows.append(row)
            print(f"{row['model']}: " + "  ".join(f"{k} {v:.2f}" for k, v in ms.items()) + " ms")
    cols = (["ember"] + (["ember_saturating"] if args.saturating else []) + PEERS + ["ember_fp32"]
            + (["ember_avx2", "ember_fp32_avx2"] if args.avx2 else []))
    print(f"\n{'model':<22} " + " ".join(f"{c:>16}" for c in cols)
          + f" {'ember/best':>11} {'fp32/int8':>10} {'diff vs ORT':>12} {'vs ORT unopt':>12} {'ORT spread':>11}"
          f" {'vs onnx ref':>11} {'ORT vs ref':>11}")
    for r in rows:
        ms = r["median_ms"]
        print(f"{r['model']:<22} " + " ".join(f"{ms[c]:>13.2f} ms" if c in ms else f"{'-':>16}" for c in cols)
              + (f" {r['vs_best_peer']:>10.2f}x" if r["vs_best_peer"] else f" {'-':>11}")
              + f" {r['vs_ember_fp32']:>9.2f}x {r['max_diff_vs_ort']:>12.2e} {r['max_diff_vs_ort_unopt']:>12.2e}"
              f" {r['ort_opt_vs_unopt']:>11.2e} {r['max_diff_vs_reference']:>11.2e} {r['ort_vs_reference']:>11.2e}")
    print("\nerror against fp32 (ORT runs both files; a batch no quantizer saw), by quantizer:")
    for r in rows:
        print(f"  {r['model']:<22} {100 * r['fp32_error']:.2f}%")
    if args.avx2:
        print("\nEmber's AVX2 code (Zen 3; no AVX-512, no VNNI) on this host, int8 speed-up over its fp32:")
        for r in rows:
            ms = r["median_ms"]
            if "ember_avx2" in ms and "ember_fp32_avx2" in ms:
                print(f"  {r['model']:<22} {ms['ember_fp32_avx2'] / ms['ember_avx2']:.2f}x")
    if args.saturating:
        print("\nEmber saturating (saturating_int8=True): over the best peer, its fp32, its largest difference "
              "from ORT's outputs and from the onnx reference:")
        for r in rows:
            if r.get("saturating_vs_best_peer"):
                print(f"  {r['model']:<22} {r['saturating_vs_best_peer']:.2f}x  {r['saturating_vs_ember_fp32']:.2f}x"
                      f"  {r['saturating_diff_vs_ort']:.2e}  {r['saturating_diff_vs_reference']:.2e}")
        sat = [r["saturating_vs_best_peer"] for r in rows if r.get("saturating_vs_best_peer")]
        if sat:
            print(f"geomean Ember saturating / best peer: {math.exp(sum(map(math.log, sat)) / len(sat)):.2f}x")
    ratios = [r["vs_best_peer"] for r in rows if r["vs_best_peer"]]
    if ratios:
        print(f"geomean Ember / best peer: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x over "
              f"{len(ratios)} files (best peer: the fastest of ORT, OpenVINO f32 hint, OpenVINO default)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"host": host.cpu, "threads": threads, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
