"""A post-training quantizer: a float32 ONNX model and calibration batches in, a QDQ ONNX
model out, which any runtime reads and Ember runs on its integer kernels.

    report = ember.quantize("model.onnx", batches, "model.int8.onnx", method="entropy")
    print(report)                     # which ops, and the error against fp32

The activations feeding Conv, MatMul and Gemm (by constant weights) get uint8 QDQ pairs whose
ranges come from running the model on ``batches`` (:mod:`.calibrate`: min/max, percentile or
entropy); the weights become int8, symmetric, per output channel by default (:mod:`.qdq`).
The report compares the quantized model's outputs with the float model's on the calibration
batches (or ``check`` batches), both run by Ember.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from ..errors import ArgumentError, ModelError
from .calibrate import METHODS, collect, uint8_params

__all__ = ["QuantizeReport", "quantize"]

SHARE_TOLERANCE = 1.25  # shared codes may raise the worst relative error by this factor


@dataclasses.dataclass
class QuantizeReport:
    """What :func:`quantize` did: the ops quantized (``node name -> op type``), the
    activations' ``(scale, zero point)``, and per output the error against the float model on
    the checked batches (``max_abs``, ``max_rel``: over the float output's largest magnitude,
    ``mean_abs``)."""

    path: Optional[str]
    nodes: dict
    activations: dict
    errors: dict
    method: str
    model: object = dataclasses.field(default=None, repr=False)  # the quantized onnx.ModelProto
    shared: bool = True  # other readers of a quantized activation read it dequantized (share_codes)
    tables: bool = False  # the inputs of transcendental activations quantized (activation_tables)

    def __str__(self) -> str:
        lines = [f"quantized {len(self.nodes)} op(s) ({', '.join(sorted(set(self.nodes.values())))}) with "
                 f"{len(self.activations)} activation range(s) by {self.method}"
                 + (f" -> {self.path}" if self.path else "")
                 + ("" if self.shared else "; its other readers (residual adds) read the float activations")
                 + ("; activations (SiLU, GELU, ...) read codes: tables" if self.tables else "")]
        for name, e in self.errors.items():
            lines.append(f"  output {name}: max |int8 - fp32| {e['max_abs']:.4g} ({100 * e['max_rel']:.2f}% of the "
                         f"largest fp32 value), mean {e['mean_abs']:.4g}")
        return "\n".join(lines)


def _load(model):
    import onnx

    from ..frontend.onnx.checks import load_model

    proto, _ = load_model(model)
    if not isinstance(proto, onnx.ModelProto):
        raise ArgumentError(f"quantize takes an ONNX model (a path, bytes or ModelProto), got {type(model).__name__}")
    return proto


def _with_outputs(model, names: Sequence[str]):
    """``model`` with ``names`` added as outputs (float tensors of any shape)."""
    import onnx
    from onnx import helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
                          for n in names if n not in have)
    return m


def _batches(data, input_names: list) -> list:
    """Calibration data as a list of ``{input name: array}``: dicts, or arrays of a one-input
    model, or a mapping of stacked arrays (the first axis: samples)."""
    if isinstance(data, Mapping):
        arrays = {k: np.asarray(v) for k, v in data.items()}
        counts = {v.shape[0] for v in arrays.values() if v.ndim}
        if len(counts) != 1:
            raise ArgumentError("stacked calibration data must hold the same number of samples per input "
                                f"(first axis), got {sorted(counts)}")
        return [{k: v[i: i + 1] for k, v in arrays.items()} for i in range(counts.pop())]
    out = []
    for b in data:
        if isinstance(b, Mapping):
            out.append(dict(b))
        elif len(input_names) == 1:
            out.append({input_names[0]: np.asarray(b)})
        else:
            raise ArgumentError(f"calibration batches of a model with inputs {input_names} must be dicts")
    return out


def quantize(model, calibration: Union[Iterable, Mapping], output: Optional[Union[str, os.PathLike]] = None, *,
             per_channel: bool = True, method: str = "minmax", percentile: float = 99.99,
             ops: Sequence[str] = ("Conv", "MatMul", "Gemm"), check: Optional[Iterable] = None,
             exclude: Sequence[str] = (), share_codes: Optional[bool] = None,
             activation_products: Optional[bool] = None,
             activation_tables: Optional[bool] = None) -> QuantizeReport:
    """Quantize ``model`` (float32 ONNX: a path, bytes or ModelProto) to QDQ int8 from
    ``calibration`` (an iterable of ``{input: array}`` batches, arrays for a one-input model, or
    ``{input: stacked samples}``); write it to ``output`` (a path; None: not written) and
    return a :class:`QuantizeReport` (the quantized ``onnx.ModelProto`` is its ``model``).

    ``method``: ``minmax``, ``percentile`` (with ``percentile``) or ``entropy``;
    ``per_channel``: one weight scale per output channel; ``ops``: the op types whose products
    are quantized; ``exclude``: node names left in float; ``check``: batches the error is
    measured on (default: the calibration batches); ``share_codes``: every reader of a quantized
    activation reads it dequantized -- a residual add too, as ORT's quantizer does -- so that it
    is stored once, as 8-bit codes (faster: ResNet-50 1.1x); False: the other readers read the
    float; None (default): shared unless that makes the error on the checked batches more than
    ``SHARE_TOLERANCE`` times the error without (a transformer's residual stream: BERT's
    0.4% -> 2.9%). ``activation_products``: the MatMuls of two activations (attention's
    ``Q @ K^T`` and ``P @ V``, when ``ops`` has MatMul) get QDQ pairs on both inputs too, as
    ORT's quantizer writes them (Ember runs them as exact bf16 dots of the codes where the CPU
    has AVX512-BF16); None (default): quantized unless that makes the error more than
    ``SHARE_TOLERANCE`` times the error without. ``activation_tables``: the input of each
    transcendental activation (SiLU's sigmoid, GELU's erf, tanh: :data:`.qdq.TABLED`) gets a
    QDQ pair read by all its readers, as ORT's quantizer writes them: from that code to the
    next quantizer the activation is a table of 256 values in Ember (EfficientNet-B0's SiLUs,
    BERT's GELUs); None (default): measured like the others."""
    from ..compiler.compile import compile_model
    from .qdq import activation_inputs, activation_product, candidates, table_inputs, write

    if method not in METHODS:
        raise ArgumentError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if not 0 < percentile <= 100:
        raise ArgumentError(f"percentile must be in (0, 100], got {percentile}")
    proto = _load(model)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    if per_channel and opset < 13:  # (a per-axis DequantizeLinear needs opset 13)
        import onnx.version_converter

        proto = onnx.version_converter.convert_version(proto, 13)
    inits = {i.name: i for i in proto.graph.initializer}
    every = [n for n in candidates(proto, set(ops), activations=activation_products is not False)
             if n.name not in set(exclude)]
    products = [n for n in every if activation_product(n, inits)]
    nodes = [n for n in every if n not in products]
    if not nodes:
        raise ModelError(f"nothing to quantize: no {'/'.join(ops)} node with a float32 weight initializer")
    weights = set(inits)
    names = list(dict.fromkeys(n.input[i] for n in every for i in activation_inputs(n, inits)))
    tabled = table_inputs(proto, names) if activation_tables is not False else []
    names += [t for t in tabled if t not in names]
    graph_inputs = [i.name for i in proto.graph.input if i.name not in weights]
    batches = _batches(calibration, graph_inputs)
    probe = compile_model(_with_outputs(proto, names).SerializeToString(), cache=False, wait=True)
    ranges = collect(probe, names, batches)
    params = {n: uint8_params(*ranges.range(n, method, percentile)) for n in names}
    checked = _batches(check, graph_inputs) if check is not None else batches
    reference = compile_model(proto.SerializeToString(), cache=False, wait=True)
    shared = share_codes is not False

    def chosen(with_products: bool, with_tables: bool) -> tuple:
        """(the nodes, the activations' parameters) with or without the activation products
        and the tables' inputs"""
        ns = every if with_products else nodes
        used = {n.input[i] for n in ns for i in activation_inputs(n, inits)} | set(tabled if with_tables else ())
        return ns, {k: v for k, v in params.items() if k in used}

    def written(with_products: bool, share: bool, with_tables: bool):
        return write(proto, *chosen(with_products, with_tables), per_channel, share,
                     everywhere=set(tabled) if with_tables else ())
    with_products, with_tables = bool(products), bool(tabled)
    quantized = written(with_products, shared, with_tables)
    errors = _errors(reference, quantized, checked)
    # measured, like the shared codes below: each kept unless it costs more than the tolerance
    if activation_products is None and with_products:
        without = written(False, shared, with_tables)
        errors_without = _errors(reference, without, checked)
        if _worst(errors) > SHARE_TOLERANCE * _worst(errors_without) + 1e-6:
            quantized, errors, with_products = without, errors_without, False
    if activation_tables is None and with_tables:
        without = written(with_products, shared, False)
        errors_without = _errors(reference, without, checked)
        if _worst(errors) > SHARE_TOLERANCE * _worst(errors_without) + 1e-6:
            quantized, errors, with_tables = without, errors_without, False
    if share_codes is None:  # measured: shared codes where they cost little accuracy
        alone = written(with_products, False, with_tables)
        if alone != quantized:
            errors_alone = _errors(reference, alone, checked)
            if _worst(errors) > SHARE_TOLERANCE * _worst(errors_alone) + 1e-6:
                quantized, errors, shared = alone, errors_alone, False
    path = None
    if output is not None:
        import onnx

        path = os.fspath(output)
        onnx.save(quantized, path)
    picked, picked_params = chosen(with_products, with_tables)
    return QuantizeReport(path, {n.name or f"#{k}": n.op_type for k, n in enumerate(picked)},
                          {n: (float(s), int(z)) for n, (s, z) in picked_params.items()}, errors, method, quantized,
                          shared, with_tables)


def _worst(errors: dict) -> float:
    return max((e["max_rel"] for e in errors.values()), default=0.0)


def _errors(a, int8, batches: list) -> dict:
    """Per output of ``a`` (the float model, compiled) the error of ``int8`` on ``batches``."""
    from ..compiler.compile import compile_model

    b = compile_model(int8.SerializeToString(), cache=False, wait=True)
    names = [o.name for o in a.output_info]
    worst = {n: {"max_abs": 0.0, "max_rel": 0.0, "mean_abs": 0.0} for n in names}
    for feeds in batches:
        for n, x, y in zip(names, a.run(**feeds), b.run(**feeds)):
            x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
            d = np.abs(x - y)
            e = worst[n]
            e["max_abs"] = max(e["max_abs"], float(d.max(initial=0.0)))
            e["max_rel"] = max(e["max_rel"], float(d.max(initial=0.0) / max(np.abs(x).max(initial=0.0), 1e-30)))
            e["mean_abs"] += float(d.mean()) / len(batches) if d.size else 0.0
    return worst
