"""The runtime's own cost per run: an ONNX model of many tiny kernels, run through Ember's
native program runner (one call into native code per run), through one checked Python call per
kernel, and through ONNX Runtime, in one process, alternating.

    python bench/overhead.py [--kernels 64] [--size 256]
    python bench/overhead.py --profiler [--model resnet50]   # the profiler's own overhead
    python bench/overhead.py --loops [--model resnet50]      # the loop profiler's, at depth 1

The second form profiles one of onnx's light models (``exe.profile``) several times and prints
the sum of kernel times against an unprofiled run's: what timing each kernel costs (a test
cannot assert it: on a loaded machine it moves). The third instruments each kernel's outermost
loops with cycle counters (``ember profile --loops``, depth 1) and prints the instrumented
run's time over the plain one's (asserted under 10% by a test, until that test failed CI on a
loaded machine: +12% and +27%).
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

import ember
from ember.bench.peers import onnxruntime as ort_peer
from ember.profile.timing import interleaved


def tiny_chain(path: str, n: int, size: int) -> str:
    """``n`` Softmax nodes over a ``size`` vector (a reduction each, so nothing fuses)."""
    nodes = [helper.make_node("Softmax", [f"t{i}"], [f"t{i + 1}"], axis=-1) for i in range(n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, size])],
                              [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [1, size])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def profiler_overhead(model: str, times: int = 3) -> int:
    """Profile a light model ``times`` times: each profile's overhead (best runs) and summary."""
    from ember.bench.models import light_path

    exe = ember.compile(light_path(model), wait=True)
    x = np.random.default_rng(0).random(exe.input_info[0].shape, dtype=np.float32)
    figures = []
    for _ in range(times):
        prof = exe.profile(x, warmup=3, repeat=20)
        figures.append(prof.overhead)
        print(prof.summary())
    print(f"{model}: profiler overhead (sum of kernel times / unprofiled run - 1, best runs): "
          + ", ".join(f"{100 * f:+.1f}%" for f in figures) + f"; median {100 * float(np.median(figures)):+.1f}%")
    return 0


def loop_profiler_overhead(model: str, times: int = 3) -> int:
    """Profile a light model's loops (depth 1, the default) ``times`` times: each profile's
    overhead, the instrumented run's median time over the plain one's."""
    from ember.bench.models import light_path
    from ember.profile.loops import profile_loops

    exe = ember.compile(light_path(model), wait=True)
    x = np.random.default_rng(0).random(exe.input_info[0].shape, dtype=np.float32)
    figures = []
    for _ in range(times):
        p = profile_loops(exe, [x], warmup=2, repeat=10)
        figures.append(p.overhead)
        print(f"plain {1e3 * p.plain_seconds:.2f} ms, instrumented {1e3 * p.instrumented_seconds:.2f} ms")
    print(f"{model}: loop profiler overhead at depth 1 (instrumented run / plain run - 1): "
          + ", ".join(f"{100 * f:+.1f}%" for f in figures) + f"; median {100 * float(np.median(figures)):+.1f}%")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", type=int, default=64, help="kernels in the chain (default 64)")
    p.add_argument("--size", type=int, default=256, help="elements per tensor (default 256)")
    p.add_argument("--repeat", type=int, default=30, help="timed turns (default 30)")
    p.add_argument("--profiler", action="store_true", help="measure the profiler's overhead instead")
    p.add_argument("--loops", action="store_true", help="measure the loop profiler's overhead (depth 1) instead")
    p.add_argument("--model", default="resnet50",
                   help="the light model --profiler or --loops profiles (default resnet50)")
    a = p.parse_args(argv)
    if a.profiler:
        return profiler_overhead(a.model)
    if a.loops:
        return loop_profiler_overhead(a.model)
    with tempfile.TemporaryDirectory() as d:
        path = tiny_chain(os.path.join(d, "chain.onnx"), a.kernels, a.size)
        native, python = ember.compile(path, wait=True), ember.compile(path, wait=True)
        python.native = False
        assert native.native and len(native.program["calls"]) == a.kernels
        x = np.random.default_rng(0).standard_normal((1, a.size)).astype(np.float32)
        np.testing.assert_array_equal(native.run(x)[0], python.run(x)[0])
        fns = {"ember, native runner": lambda: native.run(x), "ember, Python calls": lambda: python.run(x)}
        ort = ort_peer(path, native.target.cores, native.input_info)  # as `ember bench` sets it up
        if ort is not None:
            fns["onnxruntime"] = lambda: ort({"t0": x})
        else:
            print("onnxruntime is not installed: skipped")
        t = interleaved(fns, repeat=a.repeat)
    print(f"{a.kernels} kernels (Softmax of {a.size} elements each); median per run of {a.repeat} turns:")
    base = t["ember, native runner"]
    for k, v in t.items():
        print(f"  {k:22s} {v * 1e6:9.1f} us  {v / base:5.2f}x  {v / a.kernels * 1e6:6.2f} us per kernel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
