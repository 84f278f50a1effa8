"""Models as the ecosystem's tools make them, compiled as exported (no shape hints), each in a
process of its own: optimum (encoders, decoders with their KV cache, merged seq2seq decoders),
timm's ``onnx_export``, ultralytics (detect, segment, pose; fixed and dynamic; NMS inside), ONNX
Runtime's quantizer (QDQ static per channel, dynamic) and transformer optimizer (contrib ops),
onnxconverter-common's fp16, and the zoo through the TorchScript exporter (``dynamo=False``).

Each model runs at two shapes (or two inputs, for a fixed export) against its reference
(``ember.bench.ecosystem``: PyTorch eager, or ONNX Runtime on the same file where the tool
changed the computation -- its reference kernels for quantized files, whose optimized AVX2
kernels saturate without VNNI), then Ember, ONNX Runtime and OpenVINO (f32 hint) are timed at the
first shape, each alone in its process. ``--torch`` also runs the timm models through
``ember.from_torch`` and ``torch.compile(backend="ember")``, a graph left to eager counting as a
failure. Needs the tools: ``pip install optimum-onnx timm ultralytics onnxconverter-common openvino``.

    python bench/ecosystem.py                    # all, timed (long: ~1 h on 2 cores)
    python bench/ecosystem.py --no-time --only timm/ --torch
    python bench/ecosystem.py --list
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback


def child(name: str, timed: bool, rounds: int, torch_too: bool) -> dict:
    import ember
    from ember.bench.ecosystem import cases, compare, onnxruntime_reference, torch_reference
    from ember.errors import EmberError

    case = cases()[name]
    out = {"name": name, "tool": case.tool}
    stage = "build"
    try:
        path = case.path()
        feeds = case.feeds(path)
        stage = "compile"
        t0 = time.perf_counter()
        try:
            exe = ember.compile(path, wait=True)
        except EmberError:
            try:  # a file the tool made invalid: ONNX Runtime refuses to load it too
                onnxruntime_reference(path, feeds[0])
            except Exception:  # noqa: BLE001
                out["tool_made_invalid"] = True
            raise
        out["compile_s"] = time.perf_counter() - t0
        stage = "run"
        model = case.torch_model() if case.reference == "torch" else None
        errs = []
        for f in feeds:
            try:
                got = exe.run(**f)
            except EmberError:
                try:  # a size the export fixed: ONNX Runtime refuses the file at this shape too
                    onnxruntime_reference(path, f)
                except Exception:  # noqa: BLE001
                    out["export_fixed_shape"] = True
                raise
            want = torch_reference(model, f) if model is not None else \
                onnxruntime_reference(path, f, optimized=case.reference != "onnxruntime-unoptimized")
            errs.append(compare(got, want, case.rtol))
        out["errors"] = errs
        out["ok"] = all(e <= case.rtol for e in errs)
        if torch_too and model is not None:
            out.update(_through_torch(model, feeds, case.rtol))
        if timed and out["ok"]:
            stage = "time"
            from ember.bench.isolated import paired_ratio, time_isolated

            res = time_isolated(path, feeds[0], ["ember", "onnxruntime", "openvino"], threads=os.cpu_count(),
                                rounds=rounds)
            out["times"] = {k: v.get("median") for k, v in res.items()}
            out["paired"] = {k: paired_ratio(res, "ember", k) for k in ("onnxruntime", "openvino")}
    except Exception as e:  # noqa: BLE001 - the sweep reports every failure, by kind
        out["ok"] = False
        out["stage"] = stage
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        out["ember_error"] = isinstance(e, EmberError) or stage == "build"
        if out.get("export_fixed_shape"):
            out["stage"] = "EXPORT (ONNX Runtime refuses this shape too)"
        if out.get("tool_made_invalid"):
            out["stage"] = "TOOL (ONNX Runtime refuses the file too)"
        if not out["ember_error"]:
            out["traceback"] = traceback.format_exc()[-2000:]
    return out


def _through_torch(model, feeds: list, rtol: float) -> dict:
    """timm's module through from_torch (dynamic batch) and torch.compile, both shapes."""
    import warnings

    import torch

    import ember
    from ember.bench.ecosystem import compare

    out = {}
    args = [tuple(torch.from_numpy(v) for v in f.values()) for f in feeds]
    try:
        batch = torch.export.Dim("batch", min=1, max=64)
        seq = torch.export.Dim("seq", min=2, max=512)
        # (token ids and masks: a batch and a sequence; images: a batch)
        dyn = tuple({0: batch, 1: seq} if not t.is_floating_point() else {0: batch} for t in args[-1])
        m = ember.from_torch(model, args[-1], dynamic_shapes=dyn)
        with torch.no_grad():
            errs = [compare([m(*a).numpy()], [model(*a).numpy()], rtol) for a in args]
        out["from_torch"] = "ok" if max(errs) <= rtol else f"differs ({max(errs):.2g})"
    except Exception as e:  # noqa: BLE001
        out["from_torch"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="ember", dynamic=False)
        with warnings.catch_warnings(record=True) as w, torch.no_grad():
            warnings.simplefilter("always")
            errs = [compare([compiled(*a).numpy()], [model(*a).numpy()], rtol) for a in args]
        eager = [str(x.message) for x in w if "runs in eager PyTorch" in str(x.message)]
        out["torch_compile"] = ("left to eager: " + eager[0][:200]) if eager else (
            "ok" if max(errs) <= rtol else f"differs ({max(errs):.2g})")
    except Exception as e:  # noqa: BLE001
        out["torch_compile"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--only", action="append", metavar="TEXT", help="only models whose name contains TEXT")
    p.add_argument("--no-time", action="store_true", help="check outputs only, no timing")
    p.add_argument("--rounds", type=int, default=3, help="timing rounds per runtime (default 3)")
    p.add_argument("--torch", action="store_true", help="also timm through from_torch and torch.compile")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per model (default 1800)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--list", action="store_true", help="list the models and stop")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, not a.no_time, a.rounds, a.torch)))
        return 0
    from ember.bench.ecosystem import cases

    names = [n for n in cases() if not a.only or any(t in n for t in a.only)]
    if a.list:
        print("\n".join(names))
        return 0
    results = []
    for name in names:
        cmd = [sys.executable, __file__, "--child", name, "--rounds", str(a.rounds)]
        cmd += ["--no-time"] if a.no_time else []
        cmd += ["--torch"] if a.torch else []
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            lines = r.stdout.strip().splitlines()
            res = json.loads(lines[-1]) if r.returncode == 0 and lines else {
                "name": name, "ok": False, "ember_error": False,
                "error": f"the process died (exit {r.returncode}): {(r.stderr.strip().splitlines() or [''])[-1][:300]}"}
        except subprocess.TimeoutExpired:
            res = {"name": name, "ok": False, "ember_error": False, "error": f"timeout after {a.timeout} s"}
        res["wall_s"] = time.perf_counter() - t0
        results.append(res)
        print(_row(res), flush=True)
    _summary(results, a.torch)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["ok"] for r in results) else 1


def _row(r: dict) -> str:
    if not r.get("ok") and "errors" not in r:
        return f"{r['name']:42s} FAIL  {r.get('stage', '')}: {r.get('error', '')}"
    errs = " ".join(f"{e:.1e}" for e in r.get("errors", []))
    s = f"{r['name']:42s} {'ok  ' if r['ok'] else 'DIFF'}  compile {r.get('compile_s', 0):5.1f} s  err {errs}"
    t = r.get("times") or {}
    if t.get("ember"):
        peers = [t[k] for k in ("onnxruntime", "openvino") if t.get(k)]
        best = min(peers) if peers else None
        s += f"  ember {t['ember'] * 1e3:8.2f} ms"
        for k, label in (("onnxruntime", "ORT"), ("openvino", "OV")):
            if t.get(k):
                s += f"  {label} {t[k] * 1e3:8.2f}"
        if best:
            s += f"  ember/best {t['ember'] / best:5.2f}x"
    for k in ("from_torch", "torch_compile"):
        if k in r:
            s += f"  {k}: {r[k]}"
    return s


def _summary(results: list, torch_too: bool) -> None:
    ok = [r for r in results if r["ok"]]
    print(f"\n{len(ok)} of {len(results)} compile as exported and match at both shapes")
    not_ember = [r for r in results if not r["ok"] and (r.get("stage") == "build" or str(r.get("stage", "")).startswith(
        ("EXPORT", "TOOL")))]
    if not_ember:
        print(f"{len(not_ember)} failed before Ember: the tool could not make the file, made an invalid one, or "
              "fixed a shape (ONNX Runtime refuses it too): " + ", ".join(r["name"] for r in not_ember))
    crashes = [r for r in results if not r["ok"] and not r.get("ember_error", True)]
    if crashes:
        print(f"{len(crashes)} failed with something other than an EmberError: "
              + ", ".join(r["name"] for r in crashes))
    ratios = []
    for r in ok:
        t = r.get("times") or {}
        peers = [t[k] for k in ("onnxruntime", "openvino") if t.get(k)]
        if t.get("ember") and peers:
            ratios.append((t["ember"] / min(peers), r["name"]))
    if ratios:
        geo = math.exp(sum(math.log(x) for x, _ in ratios) / len(ratios))
        worst = max(ratios)
        print(f"Ember / the better of ONNX Runtime and OpenVINO (each alone): geomean {geo:.2f}x over {len(ratios)} "
              f"models, worst {worst[0]:.2f}x ({worst[1]}); above 1.25x: "
              + (", ".join(f"{n} {x:.2f}x" for x, n in sorted(ratios, reverse=True) if x > 1.25) or "none"))
    if torch_too:
        for k in ("from_torch", "torch_compile"):
            rs = [r for r in results if k in r]
            print(f"{k}: {sum(r[k] == 'ok' for r in rs)} of {len(rs)} ok"
                  + "".join(f"\n  {r['name']}: {r[k]}" for r in rs if r[k] != "ok"))


if __name__ == "__main__":
    sys.exit(main())
