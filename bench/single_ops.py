"""Single ONNX operators that models lean on, each compiled by Ember and run against ONNX
Runtime in one process, alternating: the layers of shufflenet (grouped 1x1 and depthwise
convolutions), AlexNet/GoogLeNet's LRN, a ReduceMean, squeezenet's last conv (1000 filters,
not whole blocks of 16), and a transformer's softmax and layer norm.

    python bench/single_ops.py [--only lrn] [--repeat 20]

Kernels of tens of microseconds are at the mercy of the machine: on a shared 2-core VM one
busy core stalls every parallel region of either runtime, and the same case can move 2-5x
between runs. Compare ratios over several runs, and trust the larger cases more.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.bench.peers import onnxruntime as ort_peer
from ember.profile.timing import interleaved

RNG = np.random.default_rng(0)


def _conv(c_in, c_out, hw, k, groups=1, stride=1):
    w = numpy_helper.from_array((RNG.standard_normal((c_out, c_in // groups, k, k)) * 0.1).astype("float32"), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=groups, strides=[stride, stride],
                            pads=[k // 2] * 4)
    return [node], [1, c_in, hw, hw], [w]


CASES = {  # name: (nodes, input shape, initializers)
    "grouped 1x1, 272 ch, g=4, 14x14": lambda: _conv(272, 272, 14, 1, groups=4),
    "grouped 1x1, 136 ch, g=4, 28x28": lambda: _conv(136, 136, 28, 1, groups=4),
    "depthwise 3x3, 272 ch, 14x14": lambda: _conv(272, 272, 14, 3, groups=272),
    "depthwise 3x3 s2, 112 ch, 56x56": lambda: _conv(112, 112, 56, 3, groups=112, stride=2),
    "conv 1x1, 512 -> 1000, 13x13": lambda: _conv(512, 1000, 13, 1),
    "lrn 5, 96 ch, 55x55": lambda: ([helper.make_node("LRN", ["x"], ["y"], size=5, alpha=1e-4, beta=0.75, bias=1.0)],
                                    [1, 96, 55, 55], []),
    "reduce_mean hw, 256 ch, 56x56": lambda: ([helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=1)],
                                               [1, 256, 56, 56], []),
    # a transformer's attention probabilities and norms (BERT-small's and ViT-B/16's shapes)
    "softmax, 4 heads, 128x128": lambda: ([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [1, 4, 128, 128], []),
    "softmax, 12 heads, 197x197": lambda: ([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [1, 12, 197, 197], []),
    "layer_norm, 128 x 256": lambda: _layer_norm(128, 256),
}


def _layer_norm(rows, width):
    g = numpy_helper.from_array(RNG.standard_normal(width).astype("float32"), "g")
    b = numpy_helper.from_array(RNG.standard_normal(width).astype("float32"), "b")
    return [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)], [1, rows, width], [g, b]


def _model(path, nodes, shape, inits):
    graph = helper.make_graph(nodes, "op", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="run the cases whose name contains this")
    p.add_argument("--repeat", type=int, default=20, help="timed turns (default 20)")
    a = p.parse_args(argv)
    ratios, threads = [], 0
    with tempfile.TemporaryDirectory() as d:
        for name, make in CASES.items():
            if a.only and a.only not in name:
                continue
            path = _model(os.path.join(d, "op.onnx"), *make())
            exe = ember.compile(path, wait=True)
            x = RNG.standard_normal(exe.input_info[0].shape).astype(np.float32)
            threads = exe.target.cores
            ort = ort_peer(path, threads, exe.input_info)
            if ort is None:
                print("onnxruntime is not installed: pip install onnxruntime")
                return 1
            np.testing.assert_allclose(exe.run(x)[0], ort({"x": x})[0], rtol=1e-3, atol=1e-4)
            t = interleaved({"ember": lambda: exe.run(x), "onnxruntime": lambda: ort({"x": x})}, repeat=a.repeat)
            r = t["ember"] / t["onnxruntime"]
            ratios.append(r)
            print(f"{name:34s} ember {t['ember'] * 1e6:9.1f} us   onnxruntime {t['onnxruntime'] * 1e6:9.1f} us"
                  f"   ember/onnxruntime {r:5.2f}x")
    if ratios:
        print(f"geometric mean ember/onnxruntime: {float(np.exp(np.mean(np.log(ratios)))):.2f}x "
              f"(medians of {a.repeat} alternating turns, {threads} threads each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
