"""The ``ember`` command line."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "compile": ("compile an ONNX model to one shared library (kernels, program, weights)",
                    "ember.cli_model:compile_main"),
        "run": ("run an ONNX model or a compiled .so on .npy inputs", "ember.cli_model:run_main"),
        "bench": ("compile models and time them against ONNX Runtime (default: onnx's resnet50)",
                  "ember.bench.models"),
        "profile": ("profile a compiled model: time, FLOPs and GFLOP/s per kernel, cycles per loop",
                    "ember.cli_profile:profile_main"),
        "tune": ("tune a model's kernels into a records database (SQLite or PostgreSQL, Dask workers)",
                 "ember.cli_tune:tune_main"),
        "quantize": ("quantize a float32 ONNX model to int8 (QDQ) from calibration data, with its error",
                     "ember.cli_quantize:quantize_main"),
        "cache": ("show the compile cache's size by kind and its bound (EMBER_CACHE_SIZE); prune or clear it",
                  "ember.cli_cache:cache_main"),
        "bench-ops": ("benchmark Ember's default kernels against numpy (and measure the FMA peak)",
                      "ember.bench.ops"),
    }
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        p = argparse.ArgumentParser(
            prog="ember",
            description="Ember, a deep-learning compiler: tensor programs to native code through LLVM.",
            epilog="Run 'ember COMMAND --help' for a command's options. Environment: EMBER_CACHE_DIR "
                   "(compiled-kernel cache, default ~/.cache/ember), EMBER_CACHE_SIZE (its bound, default 5G; "
                   "0: none), EMBER_DEBUG=1..4 (print loop "
                   "programs, LLVM IR, assembly).")
        p.add_argument("command", choices=sorted(commands),
                       help="; ".join(f"{k}: {v[0]}" for k, v in commands.items()))
        if not argv or argv[0] in ("-h", "--help"):
            p.print_help()
            return 0
        p.parse_args(argv[:1])
    import importlib

    from .errors import EmberError
    from .extras import missing_extra_message

    modname, _, fn = commands[argv[0]][1].partition(":")
    try:
        entry = getattr(importlib.import_module(modname), fn or "main")
        return entry(argv[1:])
    except EmberError as e:
        print(f"ember {argv[0]}: error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        msg = missing_extra_message(e, f"ember {argv[0]}")
        if msg is None:
            raise
        print(f"ember {argv[0]}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
