"""``ember compile`` and ``ember run``: the model commands of the CLI."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def _target_help() -> str:
    return ("target: 'llvm' for the host CPU (the default), or 'llvm -mcpu=NAME' for another x86 CPU, "
            "e.g. 'llvm -mcpu=skylake-avx512'; 'cuda -arch=sm_90' (or 'cuda') names an NVIDIA GPU: `ember "
            "compile` writes its export (static shapes: give --input-shape; needs the GPU and the cuda extra); "
            "profiling and tuning are the CPU's")


def _shapes(items, flag: str = "--input-shape") -> dict:
    out = {}
    for item in items or ():
        name, _, dims = item.rpartition("=")
        if not name:
            raise SystemExit(f"{flag} takes NAME=D1,D2,..., got {item!r}")
        out[name] = tuple(int(d) for d in dims.split(","))
    return out


def _memory_size(text: str) -> int:
    from .graph.limits import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_model_arg(p: argparse.ArgumentParser, what: str = "the ONNX model file") -> None:
    """The model as a file, or ``--light NAME`` for one the onnx package ships."""
    p.add_argument("model", nargs="?", help=f"{what} (or use --light NAME)")
    p.add_argument("--light", metavar="NAME",
                   help="a light model of the onnx package instead of a file, e.g. resnet50 "
                        "(also densenet121, inception_v1, inception_v2, squeezenet, shufflenet, "
                        "vgg19, bvlc_alexnet, zfnet512)")


def model_path(args, prog: str) -> str:
    """The file ``add_model_arg``'s arguments name; exits with a usage hint unless exactly one
    of a file and ``--light`` is given."""
    if bool(args.model) == bool(args.light):
        raise SystemExit(f"{prog}: give a model file or --light NAME (one of them)")
    if args.light:
        from .bench.models import light_path

        return light_path(args.light)
    return args.model


def compile_main(argv) -> int:
    p = argparse.ArgumentParser(
        prog="ember compile",
        description="Compile an ONNX model to one shared library (kernels, program and weights).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  ember compile resnet50.onnx -o resnet50.so && ember run resnet50.so --input data=x.npy --output-dir out/\n"
               "  ember compile --light resnet50 --profile-compile   where compile time goes, slowest kernels\n"
               "  ember compile model.onnx --target 'llvm -mcpu=skylake-avx512'   for another x86 CPU\n"
               "  ember compile model.onnx --precision bf16   products in bfloat16 (AVX512-BF16 CPUs)\n"
               "  ember compile model.onnx --offload auto   layers on oneDNN where they measure faster\n"
               "  ember compile --torch nets:resnet -o resnet.so   a PyTorch model: nets.resnet() returns it "
               "and example inputs")
    add_model_arg(p)
    p.add_argument("-o", "--output", help="the shared library to write (default: MODEL with .so; "
                                          "for --light NAME, light_NAME.so here)")
    p.add_argument("--target", default=None, help=_target_help())
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"),
                   help="fp32 (default: as the model says), or bf16: matrix products by weights take bfloat16 "
                        "operands and sum in float32, about twice as fast; needs a CPU with AVX512-BF16 "
                        "(Intel Sapphire Rapids, AMD Zen 4 or later). With --target cuda, bf16 or fp16: the "
                        "products on the GPU's tensor cores")
    p.add_argument("--saturating-int8", action="store_true",
                   help="on a CPU without VNNI, quantized products by full-range int8 weights on AVX2's "
                        "pmaddubsw, whose pair sums saturate as ONNX Runtime's and oneDNN's do there: QDQ "
                        "ResNets 1.3-1.4x faster, results as ORT's on that CPU (default: exact)")
    p.add_argument("-O", "--opt-level", type=int, default=3, choices=(0, 1, 2, 3),
                   help="graph optimization level (0: one kernel per op, no folding; 3: all; default 3)")
    p.add_argument("--offload", action="append", default=[], metavar="BACKEND",
                   help="run the fused groups a backend takes on the kernels it writes (repeatable, first "
                        "that takes a group wins); backends: onednn (convolutions and products by weights on "
                        "oneDNN, needs "
                        "libdnnl-dev), reference (a direct convolution in plain C, the example backend of "
                        "docs/external_kernels.md); auto: every backend this host has, a group offloaded "
                        "only where its kernel measured faster (a few seconds of measuring)")
    p.add_argument("--input-shape", action="append", metavar="NAME=D1,D2,...",
                   help="fix a symbolic input shape, e.g. --input-shape data=1,3,224,224 (without it a "
                        "symbolic dimension stays symbolic: the library runs any size)")
    p.add_argument("--shape-hint", action="append", metavar="NAME=D1,D2,...",
                   help="the shape a symbolic input will mostly have, which the kernels are scheduled and "
                        "also compiled statically for (they still run any size), e.g. --shape-hint "
                        "x=1,3,512,512 (default: a batch of 1, images of 224x224, sequences of 128)")
    p.add_argument("--disable-pass", action="append", default=[], metavar="PASS",
                   help="skip a graph pass (fold_constant, simplify_inference, cse, dce)")
    p.add_argument("--memory-limit", type=_memory_size, default=None, metavar="SIZE",
                   help="the most memory the model's constants and intermediates may take, e.g. 4GiB, "
                        "512MB or bytes; beyond it the compile stops with the node at fault (default: "
                        "the memory available to this process)")
    p.add_argument("--profile-compile", action="store_true",
                   help="print where compile time went: per graph pass, per kernel phase (schedule, "
                        "lowering, loop passes, LLVM optimization and code generation), slowest kernels")
    p.add_argument("--compile-budget", type=float, default=2.0, metavar="SECONDS",
                   help="with --profile-compile: name each kernel whose LLVM time exceeds this, with its "
                        "schedule (default 2)")
    p.add_argument("--profile-json", metavar="FILE", help="with --profile-compile: also write it as JSON")
    p.add_argument("--torch", metavar="MODULE:FACTORY",
                   help="a PyTorch model instead of a file: FACTORY() in MODULE returns (model, example_args"
                        "[, dynamic_shapes]); compiled through torch.export, no ONNX (needs torch)")
    p.add_argument("--tuning-db", metavar="DB", default=None,
                   help="apply the best record per kernel of this tuning database (an SQLite file or a "
                        "postgresql:// URL that `ember tune` wrote; default: $EMBER_TUNING_DB if set)")
    args = p.parse_args(argv)
    import ember

    if args.torch:
        from .cli_torch import compile_torch

        return compile_torch(args)
    path = model_path(args, "ember compile")
    name = os.path.splitext(os.path.basename(path))[0]
    # a light model lives in site-packages: its library goes to the working directory instead
    ext = ".ember-gpu" if (args.target or "").split()[:1] == ["cuda"] else ".so"
    out = args.output or (name + ext if args.light else os.path.splitext(path)[0] + ext)
    t0 = time.perf_counter()
    exe = ember.compile(path, args.target, args.opt_level, input_shapes=_shapes(args.input_shape),
                        disabled_passes=args.disable_pass, name=name, memory_limit=args.memory_limit,
                        cache=not args.profile_compile,  # (a compile-time profile times a compile)
                        tuning_db=args.tuning_db, shape_hints=_shapes(args.shape_hint, "--shape-hint"),
                        precision=args.precision, saturating_int8=args.saturating_int8, offload=args.offload, wait=True)
    exe.export(out)
    if args.profile_compile:
        print(exe.compile_profile.table(budget=args.compile_budget))
        if args.profile_json:
            exe.compile_profile.to_json(args.profile_json)
    print_compiled(exe, f"compiled {path} in {time.perf_counter() - t0:.2f} s", out)
    return 0


def print_compiled(exe, headline: str, out: str) -> None:
    """What a compile made: kernels (and how many tuning records scheduled), memory, the
    inputs and outputs, and the file written."""
    tuned = getattr(exe, "tuned_kernels", None)
    print(f"{headline}: {len(exe.kernel_calls)} kernel calls, "
          f"{len(exe.module.kernel_names) if exe.module else 0} distinct kernels"
          + (f" ({len(tuned)} scheduled by tuning records)" if tuned else "") + f"; {exe.memory_summary()}")
    for i in exe.input_info:
        print(f"  input  {i.name}: {i.shape} {i.dtype}")
    for o in exe.output_info:
        print(f"  output {o.name}: {o.shape} {o.dtype}")
    likely = getattr(exe, "likely_sizes", None)
    if likely and any(not isinstance(d, int) for i in exe.input_info for d in i.shape):
        # (the size a dynamic model runs fastest at: its kernels' static twins, ember.compiler.twin)
        sizes = ", ".join(f"{k}={v}" for k, v in likely.items())
        print(f"  static kernels for {sizes} (other sizes run the symbolic ones; --shape-hint chooses)")
    print(f"wrote {out}")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def model_inputs(exe, items) -> dict:
    """Inputs from ``NAME=FILE.npy`` items; with none given, random ones (seed 0) for all, of
    size 1 along symbolic dimensions."""
    from ember.errors import ArgumentError

    given = {}
    for item in items or ():
        name, sep, path = item.partition("=")
        if not sep:
            raise ArgumentError(f"--input takes NAME=FILE.npy, got {item!r}")
        given[name] = np.load(path)
    rng = np.random.default_rng(0)
    chosen = bool(given)  # (the random inputs made below are not the user's)
    for i in exe.input_info:
        if i.name not in given:
            if chosen:
                raise ArgumentError(f"input {i.name!r} is not given (inputs: {', '.join(x.name for x in exe.input_info)})")
            # a symbolic size (batch) is 1 in the random inputs; give .npy inputs for others
            shape = tuple(d if isinstance(d, int) else 1 for d in i.shape)
            given[i.name] = (rng.standard_normal(shape).astype(i.dtype) if "float" in i.dtype
                             else np.zeros(shape, i.dtype))
    return given


def run_main(argv) -> int:
    p = argparse.ArgumentParser(
        prog="ember run",
        description="Run a model (an ONNX file, compiled first, or a library from 'ember compile') on "
                    "inputs from .npy files; write each output as OUTPUT_NAME.npy.",
        epilog="Inputs not given are filled with random values (seed 0), so 'ember run model.onnx' "
               "alone checks that a model compiles and runs.")
    add_model_arg(p, "model.onnx or model.so")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input array; repeat for each input")
    p.add_argument("--output-dir", default=None, help="where to write the outputs (default: print a summary only)")
    p.add_argument("--target", default=None, help=_target_help())
    p.add_argument("--input-shape", action="append", metavar="NAME=D1,D2,...",
                   help="fix a symbolic input shape (ONNX models only)")
    args = p.parse_args(argv)
    import ember

    path = model_path(args, "ember run")
    if path.endswith(".so"):
        exe = ember.load(path)
    else:
        exe = ember.compile(path, args.target, input_shapes=_shapes(args.input_shape))
    given = model_inputs(exe, args.input)
    t0 = time.perf_counter()
    outs = exe.run(**given)
    dt = time.perf_counter() - t0
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
    for info, o in zip(exe.output_info, outs):
        line = f"{info.name}: {o.shape} {o.dtype}"
        if o.size and o.dtype.kind in "fiu":
            line += f"  min {o.min():.6g} max {o.max():.6g} mean {o.astype(np.float64).mean():.6g}"
        if args.output_dir:
            path = os.path.join(args.output_dir, _safe(info.name) + ".npy")
            np.save(path, o)
            line += f"  -> {path}"
        print(line)
    print(f"ran in {dt * 1e3:.2f} ms (first call)", file=sys.stderr)
    return 0


__all__ = ["add_model_arg", "compile_main", "model_inputs", "model_path", "run_main"]
