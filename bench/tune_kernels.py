"""Tuned kernels against their default schedules: the 1024^3 matmul and ResNet-50's strided
1x1 projections (the issue's anchors), with trials per minute beside TVM MetaSchedule's ~14
(283 s for 64 trials on the same matmul).

    python bench/tune_kernels.py                       # 3 minutes each
    python bench/tune_kernels.py --minutes 5 --db kernels.db
    python bench/tune_kernels.py --any-partition       # also schedules that split the output otherwise

Times are the tuner's (each candidate built and timed alone in a child process, medians of
2 ms batches); numpy's matmul is timed in a process of its own.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile


def matmul_model(path: str, n: int = 1024) -> str:
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["C"])], "matmul",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT, [n, n]),
                           helper.make_tensor_value_info("B", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("C", TensorProto.FLOAT, [n, n])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def numpy_matmul(n: int = 1024) -> float:
    code = ("import numpy as np, time; a=np.random.rand(%d,%d).astype(np.float32); b=a.copy(); a@b; ts=[]\n"
            "for _ in range(20):\n t=time.perf_counter(); a@b; ts.append(time.perf_counter()-t)\n"
            "print(sorted(ts)[10])" % (n, n))
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=3.0, help="per benchmark (default 3)")
    p.add_argument("--db", help="records database (default: a fresh one)")
    p.add_argument("--cluster", default=None)
    p.add_argument("--any-partition", action="store_true",
                   help="also propose schedules that split a kernel's output between the cores otherwise than "
                        "its default (ember tune --any-partition; the rule is for kernels in a model)")
    a = p.parse_args(argv)
    keep = not a.any_partition
    from ember.bench.models import light_path
    from ember.tune.tuner import tune

    tmp = tempfile.mkdtemp(prefix="ember-tune-kernels-")
    db = a.db or os.path.join(tmp, "kernels.db")
    n = 1024
    flops = 2 * n ** 3
    rep = tune(matmul_model(os.path.join(tmp, "matmul.onnx")), db, minutes=a.minutes, cluster=a.cluster,
               progress=False, transfer=False, keep_partition=keep)
    t = rep.tasks[0]
    np_t = numpy_matmul(n)
    print(f"\n1024^3 matmul: default {t.default * 1e3:.2f} ms ({flops / t.default / 1e9:.0f} GFLOP/s), tuned "
          f"{t.best * 1e3:.2f} ms ({flops / t.best / 1e9:.0f} GFLOP/s), {t.speedup:.2f}x; numpy "
          f"{np_t * 1e3:.2f} ms ({flops / np_t / 1e9:.0f} GFLOP/s); {rep.trials} trials, "
          f"{rep.trials_per_minute:.0f} per minute (TVM MetaSchedule: ~14)")
    best = [h for h in t.history]
    print("  best over trials: " + ", ".join(f"#{k}: {flops / s / 1e9:.0f}" for k, s in best))

    def projection(task) -> bool:  # the 1x1 stride-2 convs beside each stage's first block
        d = task.description
        return d.startswith("conv2d_nchwc+add 1x") and any(d.endswith(f"x{s}x{s}x32") for s in (28, 14, 7))
    rep = tune(light_path("resnet50"), db, minutes=a.minutes, cluster=a.cluster, progress=False, only=projection,
               transfer=False, keep_partition=keep)
    print("\nResNet-50's strided 1x1 projections:")
    print(rep.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
