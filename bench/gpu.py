#!/usr/bin/env python
"""Ember on an NVIDIA GPU against PyTorch on the same GPU (issue 49): one command for a lent GPU.

    python bench/gpu.py OUT_DIR [--models resnet50,bert] [--batches 1,32] [--budget 420]

In order, each step within the time budget (later steps are skipped, and say so, once it is
spent): the GPU tests (``pytest -m`` on the tests that need a GPU); the zoo models
(:mod:`ember.bench.zoo`: built from their classes with random weights, exported to ONNX with a
dynamic batch, and compiled for the GPU by worker processes while the first rows run) at each
batch size and precision, Ember (``ember.compile(path, target="cuda")``) against PyTorch eager
and, at the rows ``--torch-compile-at`` names, ``torch.compile``; and a bf16
matrix product (``--gemm 8192``: 8192^3) against ``torch.matmul``. Times are medians of CUDA
event timings of whole forward passes with the inputs already on the device (Ember replays its
CUDA graph; torch runs ``model(x)`` under ``no_grad``), TF32 off for torch so that both compute
in float32. Each output is checked against torch's (``err``: max |ember - torch| / max |torch|).

Writes ``OUT_DIR/gpu.json`` and ``OUT_DIR/gpu.md`` after every step, so a run cut short still
leaves what it measured. Needs torch with CUDA, torchvision, transformers, onnx, onnxscript and
cuda-bindings (the GPU machines' image has them) and llvmlite.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEFAULT_MODELS = ("resnet50,bert,vit_b_16,mobilenet_v2,efficientnet_b0,gpt2,convnext_tiny,swin_t,mobilenet_v3_small,"
                  "regnet_y_400mf,distilbert,deeplabv3_mobilenet_v3,resnet18")


class Report:
    """The results so far, written out after each step."""

    def __init__(self, out: str):
        self.out = out
        self.data = {"env": {}, "tests": None, "models": [], "gemm": None, "skipped": []}
        os.makedirs(out, exist_ok=True)

    def write(self) -> None:
        with open(os.path.join(self.out, "gpu.json"), "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        with open(os.path.join(self.out, "gpu.md"), "w") as f:
            f.write(self.markdown())

    def markdown(self) -> str:
        d = self.data
        lines = [f"# Ember on {d['env'].get('gpu', '?')}", "", "```", json.dumps(d["env"], indent=1), "```", ""]
        if d["tests"]:
            lines += [f"GPU tests: {d['tests'].get('summary')}", ""]
        lines += ["| model | prec | batch | Ember ms | torch eager ms | torch.compile ms | Ember / eager | Ember / compile "
                  "| err | torch half err | Ember compile s | launches | tensor-core groups |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

        def f(v, fmt="{:.3f}"):
            return "" if v is None else fmt.format(v)
        for r in d["models"]:
            if "error" in r:
                lines.append(f"| {r['model']} | {r.get('precision', '')} | {r.get('batch', '')} | error: "
                             f"{r['error'][:120]} ||||||||||")
                continue
            e, t, c = r.get("ember_ms"), r.get("eager_ms"), r.get("compile_ms")
            lines.append(f"| {r['model']} | {r.get('precision', '')} | {r['batch']} | {f(e)} | {f(t)} | {f(c)} "
                         f"| {f(e / t if e and t else None, '{:.2f}x')} | {f(e / c if e and c else None, '{:.2f}x')} "
                         f"| {f(r.get('err'), '{:.1e}')} | {f(r.get('torch_err'), '{:.1e}')} "
                         f"| {f(r.get('ember_compile_s'), '{:.1f}')} | {r.get('launches', '')} "
                         f"| {r.get('tensor_core_groups', '')} |")
        g = d["gemm"]
        if g:
            lines += ["", f"bf16 GEMM {g.get('n')}^3: " + (f"error: {g['error']}" if "error" in g else
                      f"Ember {g.get('ember_ms', 0):.2f} ms ({g.get('ember_tflops', 0):.1f} TFLOP/s), torch.matmul "
                      f"{g.get('torch_ms', 0):.2f} ms ({g.get('torch_tflops', 0):.1f} TFLOP/s), err {g.get('err', 0):.1e}")]
        if d["skipped"]:
            lines += ["", "Skipped (time budget): " + ", ".join(d["skipped"])]
        return "\n".join(lines) + "\n"


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


EMULATE = False  # (--emulate: the script's own check on a host without a GPU)


def _compile(path, **kw):
    import ember

    if EMULATE:
        from ember.compiler.cuda import compile_cuda
        from ember.runtime.gpu_executable import EmulatedDevice

        return compile_cuda(path, device=EmulatedDevice(), **kw)
    return ember.compile(path, target="cuda", **kw)


def _dev() -> str:
    return "cpu" if EMULATE else "cuda"


def _time_torch(torch, fn, number):
    for _ in range(2):
        fn()
    if EMULATE:
        times = []
        for _ in range(number):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return _median(times)
    torch.cuda.synchronize()
    times = []
    for _ in range(number):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return _median(times)


def _number(first_ms: float) -> int:
    """Runs to time: about a second's worth, 3 to 20."""
    return int(min(20, max(3, 1000.0 / max(first_ms, 1e-3))))


def run_tests(report: Report, timeout: float) -> None:
    # in one process (-o addopts= drops pyproject's -n: the device may lack pytest-xdist, and
    # the tests share one GPU)
    cmd = [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "-k", "gpu or cuda",
           "tests/runtime/test_gpu_executable.py", "tests/test_options.py"]
    t0 = time.time()
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        tail = (done.stdout + done.stderr).strip().splitlines()
        report.data["tests"] = {"rc": done.returncode, "summary": tail[-1] if tail else "", "seconds": time.time() - t0,
                                "tail": tail[-40:]}
    except subprocess.TimeoutExpired:
        report.data["tests"] = {"rc": None, "summary": f"timed out after {timeout:.0f} s"}
    print("tests:", report.data["tests"]["summary"], flush=True)


def prepare_job(name: str, precision: str, out_dir: str, batches: list, plan: bool) -> tuple:
    """Export zoo model ``name`` (its weights seeded as every process builds them) in
    ``precision`` to ``out_dir`` and, with ``plan``, compile it for the GPU at each batch up to
    what the device loads (``ember.compiler.cuda.plan_cuda``: no GPU needed). Run in worker
    processes, all at once: (path, export seconds, {batch: plan or the error's text})."""
    from ember.bench import zoo
    from ember.compiler.cuda import plan_cuda

    t0 = time.time()
    # (bf16: the float32 file compiled with precision="bf16", exported apart from fp32's so two
    # workers never write one file)
    where = os.path.join(out_dir, "bf16") if precision == "bf16" else out_dir
    path = zoo.export(name, where, dynamic=True, model=zoo.build_model(name), half=precision == "fp16")
    export_s = time.time() - t0
    plans = {}
    for batch in batches if plan else ():
        ex = zoo.ZOO[name].example(batch=batch)
        t0 = time.time()
        try:
            p = plan_cuda(path, input_shapes={k: v.shape for k, v in ex.items()},
                          precision="bf16" if precision == "bf16" else "fp32").portable()
            p.compile_times["wall"] = time.time() - t0
            plans[batch] = p
        except Exception as e:  # (reported on the row; the other batches still run)
            plans[batch] = f"{type(e).__name__}: {e}"
    return path, export_s, plans


def start_prepare(models: list, precisions: list, out_dir: str, batches: list, workers: int) -> dict:
    """(model, precision) -> a future of :func:`prepare_job`, spread over worker processes (the
    emulation compiles in this process: its kernels are loop programs, not PTX)."""
    import concurrent.futures as cf
    import multiprocessing as mp

    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    return {(m, p): pool.submit(prepare_job, m, p, out_dir, batches, not EMULATE) for m in models for p in precisions}


def bench_model(report: Report, name: str, precision: str, batches: list, compiled: set, prepared,
                deadline: float) -> None:
    import numpy as np
    import torch

    from ember.bench import zoo

    spec = zoo.ZOO[name]
    path, export_s, plans = prepared.result()
    ref_model = zoo.build_model(name).to(_dev())  # (float32: every row's reference)
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    model = ref_model if half is None else zoo.build_model(name).to(half).to(_dev())
    compiled_model = torch.compile(model) if compiled else None  # (timed at the rows in compiled)
    for batch in batches:
        if time.time() > deadline:
            report.data["skipped"].append(f"{name} {precision} batch {batch}")
            continue
        row = {"model": name, "precision": precision, "batch": batch, "export_s": export_s}
        report.data["models"].append(row)
        try:
            ex = spec.example(batch=batch)
            if precision == "fp16":
                ex = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in ex.items()}
            tin = [torch.from_numpy(v).to(_dev()) for v in ex.values()]
            if EMULATE:
                tin = [t.numpy() for t in tin]
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            with torch.no_grad():
                targs = [torch.from_numpy(t) for t in tin] if EMULATE else tin
                wide = [t.float() if t.is_floating_point() else t for t in targs]
                if precision == "bf16":  # (Ember takes the float32 inputs; torch's bf16 model bf16 ones)
                    targs = [t.to(torch.bfloat16) if t.is_floating_point() else t for t in targs]
                ref = ref_model(*wide).float().cpu().numpy()
                scale = max(float(np.abs(ref).max()), 1e-30)
                if precision != "fp32":  # (the tolerance: torch's own half run against its float32)
                    row["torch_err"] = float(np.abs(model(*targs).float().cpu().numpy() - ref).max() / scale)
                t0 = time.time()
                plan = plans.get(batch)
                if isinstance(plan, str):
                    raise RuntimeError(f"compiling for the GPU failed: {plan}")
                exe = plan.load() if plan is not None else _compile(
                    path, input_shapes={k: v.shape for k, v in ex.items()}, precision="bf16" if precision == "bf16" else "fp32")
                row["ember_compile_s"] = plan.compile_times["wall"] if plan is not None else time.time() - t0
                row["ember_load_s"] = time.time() - t0
                row["compile_phases"] = {k: round(v, 3) for k, v in exe.compile_times.items()}
                row["launches"] = exe.num_launches
                row["tensor_core_groups"] = sum("matmul_mma" in kernel for kernel in exe.launches)
                got = exe.run(*tin)[0].astype(np.float32)
                row["err"] = float(np.abs(got - ref).max() / scale)
                first = exe.time(*tin, number=1, warmup=1)[0]
                row["ember_ms"] = _median(exe.time(*tin, number=_number(first), warmup=0))
                first_t = _time_torch(torch, lambda: model(*targs), 1)
                row["eager_ms"] = _time_torch(torch, lambda: model(*targs), _number(first_t))
                if compiled_model is not None and (precision, batch) in compiled and time.time() < deadline:
                    t0 = time.time()
                    compiled_model(*targs)
                    if not EMULATE:
                        torch.cuda.synchronize()
                    row["torch_compile_s"] = time.time() - t0
                    row["compile_ms"] = _time_torch(torch, lambda: compiled_model(*targs), _number(first_t))
                if time.time() < deadline:
                    prof = exe.profile(*tin, number=3)
                    total = sum(ms for _, ms in prof) or 1.0
                    row["top_kernels"] = [(k, round(ms, 4), round(ms / total, 3))
                                          for k, ms in sorted(prof, key=lambda r: -r[1])[:8]]
            del exe
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
            row["trace"] = traceback.format_exc()[-3000:]
        print(name, precision, batch, {k: v for k, v in row.items() if k not in ("trace", "top_kernels", "compile_phases")},
              flush=True)
        report.write()


def bench_gemm(report: Report, n: int) -> None:
    import ml_dtypes
    import numpy as np
    import torch
    from onnx import TensorProto, helper

    g = {"n": n}
    report.data["gemm"] = g
    try:
        graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "gemm",
                                  [helper.make_tensor_value_info("a", TensorProto.BFLOAT16, [n, n]),
                                   helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [n, n])],
                                  [helper.make_tensor_value_info("c", TensorProto.BFLOAT16, [n, n])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        a = torch.randn(n, n, device=_dev(), dtype=torch.bfloat16)
        b = torch.randn(n, n, device=_dev(), dtype=torch.bfloat16)
        t0 = time.time()
        exe = _compile(model)
        g["ember_compile_s"] = time.time() - t0
        ah = a.float().cpu().numpy().astype(ml_dtypes.bfloat16)
        bh = b.float().cpu().numpy().astype(ml_dtypes.bfloat16)
        got = exe.run(ah, bh)[0].astype(np.float32)
        ref = (a.float() @ b.float()).cpu().numpy()
        g["err"] = float(np.abs(got - ref).max() / np.abs(ref).max())
        flop = 2.0 * n ** 3
        first = exe.time(ah, bh, number=1, warmup=0)[0]
        g["ember_ms"] = _median(exe.time(ah, bh, number=3 if first < 2000 else 1, warmup=0))
        g["torch_ms"] = _time_torch(torch, lambda: torch.matmul(a, b), 10)
        g["ember_tflops"] = flop / g["ember_ms"] / 1e9
        g["torch_tflops"] = flop / g["torch_ms"] / 1e9
    except Exception as e:
        g["error"] = f"{type(e).__name__}: {e}"
        g["trace"] = traceback.format_exc()[-3000:]
    print("gemm", {k: v for k, v in g.items() if k != "trace"}, flush=True)
    report.write()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("out", help="folder for gpu.json and gpu.md")
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"zoo models, comma-separated (default {DEFAULT_MODELS})")
    ap.add_argument("--batches", default="1,32", help="batch sizes (default 1,32)")
    ap.add_argument("--precisions", default="fp32,fp16",
                    help="fp32, fp16 (the model exported from model.half(): Ember's half products on tensor cores), "
                         "bf16 (the float32 file compiled with precision='bf16' against torch's model.to(bfloat16)); "
                         "default fp32,fp16")
    ap.add_argument("--workers", type=int, default=8,
                    help="processes exporting the models and compiling them for the GPU (no GPU needed for either) "
                         "while the tests and the first models run (default 8)")
    ap.add_argument("--torch-compile", default="all",
                    help="models also timed under torch.compile (its compile takes 4-20 s a model and batch): 'all' "
                         "(the default), 'none', or names")
    ap.add_argument("--torch-compile-at", default="fp16:32,fp32:1",
                    help="the rows timed under torch.compile, PRECISION:BATCH comma-separated (default fp16:32,fp32:1: "
                         "the acceptance's comparisons)")
    ap.add_argument("--gemm", type=int, default=8192, help="the bf16 GEMM's size n (n^3; 0 skips it)")
    ap.add_argument("--budget", type=float, default=420, help="seconds for the whole run; steps past it are skipped")
    ap.add_argument("--no-tests", action="store_true", help="skip the GPU tests")
    ap.add_argument("--emulate", action="store_true",
                    help="no GPU: Ember's GPU kernels on the CPU's emulation, torch on the CPU (checks this script)")
    args = ap.parse_args(argv)
    global EMULATE
    EMULATE = args.emulate
    start = time.time()
    deadline = start + args.budget
    report = Report(args.out)
    import llvmlite
    import torch

    from ember.runtime.cuda_driver import device
    from ember.runtime.gpu_executable import EmulatedDevice

    dev = EmulatedDevice() if EMULATE else device(0)
    report.data["env"] = {"gpu": dev.name, "arch": getattr(dev, "arch", "cpu"),
                          "multiprocessors": getattr(dev, "multiprocessors", None),
                          "torch": torch.__version__, "llvmlite": llvmlite.__version__, "python": platform.python_version()}
    print(report.data["env"], flush=True)
    report.write()
    models = [m for m in args.models.split(",") if m]
    precisions = [p for p in args.precisions.split(",") if p]
    batches = [int(b) for b in args.batches.split(",")]
    compile_models = set(models) if args.torch_compile == "all" else set(args.torch_compile.split(",")) - {"none"}
    compile_at = {(pb.split(":")[0], int(pb.split(":")[1])) for pb in args.torch_compile_at.split(",") if pb}
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ember-gpu-zoo")
    prepared = start_prepare(models, precisions, tmp, batches, args.workers)
    if not args.no_tests:
        run_tests(report, timeout=min(150.0, args.budget / 4))
        report.write()
    gemm_reserve = 40 if args.gemm else 0
    for name in models:
        for precision in precisions:
            if time.time() > deadline - gemm_reserve:
                report.data["skipped"].append(f"{name} {precision}")
                continue
            try:
                bench_model(report, name, precision, batches, compile_at if name in compile_models else set(),
                            prepared[name, precision], deadline - gemm_reserve)
            except Exception as e:
                report.data["models"].append({"model": name, "precision": precision, "error": f"{type(e).__name__}: {e}",
                                              "trace": traceback.format_exc()[-3000:]})
                report.write()
    if args.gemm:
        bench_gemm(report, args.gemm)
    report.data["env"]["seconds"] = time.time() - start
    report.write()
    print(report.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
