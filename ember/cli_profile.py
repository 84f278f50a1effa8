"""``ember profile``: where a compiled model spends its time, per kernel and per loop."""
from __future__ import annotations

import argparse
import os
import sys

from .cli_model import _shapes, _target_help, add_model_arg, model_inputs, model_path

EPILOG = """\
examples:
  ember profile model.onnx                       top 20 kernels after 3 warm-up runs
  ember profile --light resnet50 --top 10        a model that ships with the onnx package
  ember profile model.onnx --group-by op         time per op type (conv2d, dense, ...)
  ember profile model.onnx --precision bf16      where the time goes in bf16
  ember profile model.onnx --offload onednn      the layers oneDNN runs, marked [onednn]
  ember profile model.onnx --trace t.json        open t.json in https://ui.perfetto.dev
  ember profile model.onnx --plot top.png        bar chart: time and GFLOP/s against the peak
  ember profile model.onnx --loops --loop-depth 2
                                                 cycle counts per loop of the slowest kernel

The first call of a compiled model pays for lazy initialization and cold caches, so warm-up
runs are never timed (--warmup 0 is allowed, and the report then says the figures are cold).
The summary compares the sum of kernel times with the end-to-end latency measured without
profiling, so you can see what profiling itself costs.
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ember profile", formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Compile a model and profile it: one row per kernel call "
                                            "(source nodes, time, FLOPs, bytes, GFLOP/s, % of peak), "
                                            "optionally per loop.", epilog=EPILOG)
    add_model_arg(p)
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input array (default: random inputs, seed 0)")
    p.add_argument("--input-shape", action="append", metavar="NAME=D1,D2,...",
                   help="fix a symbolic input shape, e.g. --input-shape data=1,3,224,224")
    p.add_argument("--target", default=None, help=_target_help())
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                   help="fp32 (default: as the model says), or bf16: products and convolutions on bfloat16 "
                        "operands, float32 sums (needs a CPU with AVX512-BF16), to see where a bf16 run's time goes")
    p.add_argument("--saturating-int8", action="store_true",
                   help="on a CPU without VNNI, quantized products by full-range int8 weights on AVX2's "
                        "pmaddubsw, whose pair sums saturate as ONNX Runtime's and oneDNN's do there: QDQ "
                        "ResNets 1.3-1.4x faster, results as ORT's on that CPU (default: exact)")
    p.add_argument("--offload", action="append", default=[], metavar="BACKEND",
                   help="run the groups a backend takes on its kernels (repeatable; onednn, reference, or auto: "
                        "each layer where it measured faster), their rows marked [backend]")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    p.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    p.add_argument("--top", type=int, default=20, help="rows to show (0: all; default 20)")
    p.add_argument("--sort", default="time", choices=("time", "order", "name", "gflops", "calls"),
                   help="row order (default: time, slowest first)")
    p.add_argument("--group-by", default="call", choices=("call", "kernel", "op"),
                   help="one row per program call (default), per distinct kernel, or per op type")
    p.add_argument("--csv", metavar="FILE", help="write every row as CSV")
    p.add_argument("--json", metavar="FILE", help="write the profile as JSON")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome trace (Perfetto, chrome://tracing)")
    p.add_argument("--plot", metavar="FILE.png", help="bar chart of the top kernels (needs matplotlib)")
    p.add_argument("--loops", action="store_true", help="also profile loops with cycle counters")
    p.add_argument("--loop-depth", type=int, default=1, metavar="N",
                   help="instrument loops down to nesting depth N (default 1: the outermost loops)")
    p.add_argument("--loop-kernel", metavar="NAME", help="the kernel whose loops to show, or a unique prefix of its name (default: the slowest)")
    return p


def profile_main(argv) -> int:
    args = _parser().parse_args(argv)
    path = model_path(args, "ember profile")
    import ember
    from ember.profile.kernels import profile_kernels

    name = os.path.splitext(os.path.basename(path))[0]
    print(f"compiling {path} ...", file=sys.stderr)
    exe = ember.compile(path, args.target, input_shapes=_shapes(args.input_shape), name=name, wait=True,
                        precision=args.precision, saturating_int8=args.saturating_int8, offload=args.offload)
    given = model_inputs(exe, args.input)
    print(f"profiling: {args.warmup} warm-up run(s), {args.repeat} timed run(s) ...", file=sys.stderr)
    prof = profile_kernels(exe, named=given, warmup=args.warmup, repeat=args.repeat, model=name)
    print(prof.table(sort=args.sort, top=args.top or None, group_by=args.group_by))
    for flag, write in (("csv", lambda f: prof.to_csv(f, args.group_by)), ("json", prof.to_json),
                        ("trace", prof.to_chrome_trace), ("plot", prof.plot)):
        f = getattr(args, flag)
        if f:
            write(f)
            print(f"wrote {f}", file=sys.stderr)
    if args.loops:
        from ember.profile.loops import profile_loops

        kernel = args.loop_kernel or prof.select(sort="time", group_by="kernel")[0].kernel
        names = sorted({r.kernel for r in prof.rows})
        if kernel not in names:  # (a unique prefix names it too: kernel names are long)
            like = [k for k in names if k.startswith(kernel)]
            if len(like) != 1:
                print(f"ember profile: --loop-kernel {kernel!r} " + ("names several kernels: " if like else
                      "is no kernel of this model; its kernels: ") + ", ".join(like or names), file=sys.stderr)
                return 2
            kernel = like[0]
        print(f"instrumenting loops to depth {args.loop_depth} ...", file=sys.stderr)
        lp = profile_loops(exe, [given[i.name] for i in exe.input_info], depth=args.loop_depth,
                           warmup=args.warmup, repeat=args.repeat)
        print(lp.table(kernel=kernel))
        print(lp.kernel_source(kernel))
        print(f"loop instrumentation overhead at depth {args.loop_depth}: {100 * lp.overhead:+.1f}% "
              f"of the end-to-end latency")
    return 0


__all__ = ["profile_main"]
