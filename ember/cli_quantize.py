"""``ember quantize``: a float32 ONNX model to QDQ int8 from calibration data."""
from __future__ import annotations

import argparse
import os


def quantize_main(argv) -> int:
    p = argparse.ArgumentParser(
        prog="ember quantize",
        description="Quantize a float32 ONNX model to int8 (QDQ: QuantizeLinear/DequantizeLinear pairs any runtime "
                    "reads; Ember runs it on its integer kernels). Activations feeding Conv, MatMul and Gemm get "
                    "uint8 ranges from calibration data; weights become int8, per output channel. Prints the "
                    "quantized model's error against the float one.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  ember quantize resnet50.onnx -o resnet50.int8.onnx --calibration images.npz\n"
               "      (images.npz: one array per model input, samples along the first axis)\n"
               "  ember quantize bert.onnx --random 8 --method entropy   random inputs: try the flow, not the accuracy\n"
               "  ember compile resnet50.int8.onnx && ember bench resnet50.int8.onnx --vs onnxruntime")
    p.add_argument("model", help="the float32 ONNX model")
    p.add_argument("-o", "--output", help="where to write it (default: MODEL with .int8.onnx)")
    p.add_argument("--calibration", metavar="FILE.npz",
                   help="calibration samples: an .npz with an array per input, samples along the first axis")
    p.add_argument("--random", type=int, metavar="N", default=None,
                   help="calibrate on N random batches instead (normal floats, token ids below 100)")
    p.add_argument("--method", default="minmax", choices=("minmax", "percentile", "entropy"),
                   help="how a range is chosen: the extremes seen (default), a percentile of |x|, or the "
                        "least KL divergence (entropy)")
    p.add_argument("--percentile", type=float, default=99.99, help="with --method percentile (default 99.99)")
    p.add_argument("--per-tensor", action="store_true", help="one scale per weight tensor (default: per channel)")
    p.add_argument("--exclude", action="append", default=[], metavar="NODE", help="a node name to keep in float")
    p.add_argument("--residuals", choices=("auto", "codes", "float"), default="auto",
                   help="what a quantized activation's other readers (a residual add) read: 'codes' dequantized "
                        "(it is stored once, as 8-bit codes: faster), 'float', or 'auto' (default): codes unless "
                        "that raises the error against fp32 by more than a quarter")
    p.add_argument("--attention", choices=("auto", "int8", "float"), default="auto",
                   help="the products of two activations (attention's Q @ K^T and P @ V): 'int8' (QDQ on both "
                        "inputs, as ORT's quantizer writes them; on a CPU with AVX512-BF16 Ember runs them as exact "
                        "bf16 dots of the codes), 'float', or 'auto' (default): int8 unless that raises the error "
                        "against fp32 by more than a quarter")
    p.add_argument("--activations", choices=("auto", "int8", "float"), default="auto",
                   help="the input of a SiLU's sigmoid, a GELU's erf, a tanh... that ends in quantized products: "
                        "'int8' (a QDQ pair every reader reads, as ORT's quantizer writes it; Ember then looks the "
                        "activation up in a table of the 256 codes), 'float', or 'auto' (default): int8 unless "
                        "that raises the error against fp32 by more than a quarter")
    args = p.parse_args(argv)
    import numpy as np

    from .errors import ArgumentError
    from .quantizer import quantize

    if (args.calibration is None) == (args.random is None):
        raise ArgumentError("give calibration data (--calibration FILE.npz) or --random N")
    if args.calibration is not None:
        with np.load(args.calibration) as z:
            data = {k: z[k] for k in z.files}
    else:
        data = _random(args.model, args.random)
    out = args.output or os.path.splitext(args.model)[0] + ".int8.onnx"
    report = quantize(args.model, data, out, per_channel=not args.per_tensor, method=args.method,
                      percentile=args.percentile, exclude=args.exclude,
                      share_codes={"auto": None, "codes": True, "float": False}[args.residuals],
                      activation_products={"auto": None, "int8": True, "float": False}[args.attention],
                      activation_tables={"auto": None, "int8": True, "float": False}[args.activations])
    print(report)
    return 0


def _random(path: str, n: int) -> list:
    import numpy as np
    import onnx

    from .errors import ArgumentError

    if n < 1:
        raise ArgumentError(f"--random takes a number of batches >= 1, got {n}")
    m = onnx.load(path, load_external_data=False)
    weights = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        feeds = {}
        for i in m.graph.input:
            if i.name in weights:
                continue
            t = i.type.tensor_type
            shape = [d.dim_value or 1 for d in t.shape.dim]
            if t.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
                dtype = np.int64 if t.elem_type == onnx.TensorProto.INT64 else np.int32
                feeds[i.name] = (np.ones(shape, dtype) if "mask" in i.name else rng.integers(0, 100, shape).astype(dtype))
            else:
                feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        out.append(feeds)
    return out
