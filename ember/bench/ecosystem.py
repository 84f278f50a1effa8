"""Models as the ecosystem's tools make them (``bench/ecosystem.py``): optimum, timm's
``onnx_export``, ultralytics, ONNX Runtime's quantizer and transformer optimizer,
onnxconverter-common's fp16 conversion, and the TorchScript exporter (``dynamo=False``).

Each :class:`Case` builds its file once (random weights, kept under the cache), gives the
inputs of two shapes, and the reference outputs for them: PyTorch eager where the model comes
from PyTorch and the file computes what the module does (timm, the TorchScript exports of the
zoo); ONNX Runtime on the same file where the tool changed the computation (a quantized or
fp16 file, the optimizer's fused ops) or wraps the module in its own pre- and post-processing
(optimum's decoders with their cache, ultralytics' heads and NMS).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, List, Optional

import numpy as np

CACHE = os.path.join(os.environ.get("EMBER_CACHE_DIR", os.path.expanduser("~/.cache/ember")), "ecosystem")


@dataclasses.dataclass
class Case:
    name: str
    tool: str
    build: Callable[[str], str]  # out dir -> the ONNX file
    feeds: Callable[[str], List[dict]]  # the file -> inputs of two shapes
    # or "torch", or "onnxruntime-unoptimized": ORT's reference kernels, for quantized files (on a
    # CPU without VNNI its optimized ones saturate pmaddubsw's pair sums: 2-5% off its own
    # reference kernels on ResNet-18, MobileNetV2 and EfficientNet-B0 QDQ on a Zen 3)
    reference: str = "onnxruntime"
    torch_model: Optional[Callable] = None  # () -> the module, for a torch reference
    rtol: float = 1e-3  # of the reference's largest magnitude

    def path(self) -> str:
        return self.build(os.path.join(CACHE, self.tool))


# -- inputs ------------------------------------------------------------------------------------------

def _declared(path: str) -> list:
    import onnx

    m = onnx.load(path, load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in init:
            continue
        tt = i.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
        out.append((i.name, dims, onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)))
    return out


def text_feeds(batch_seq=((1, 16), (2, 7)), past=(0, 6), vocab=100) -> Callable:
    """Feeds of a text model (ids, masks, positions, a KV cache) at two (batch, seq, past)."""
    def feeds(path: str) -> List[dict]:
        rng = np.random.default_rng(0)
        out = []
        for (b, s), p in zip(batch_seq, past):
            f = {}
            for name, dims, dtype in _declared(path):
                def size(d):
                    if isinstance(d, int):
                        return d
                    if "+" in d:
                        return p + s
                    if "past" in d:
                        return p
                    if "batch" in d:
                        return b
                    if "encoder" in d:
                        return 9
                    return s
                shape = [b if k == 0 and not isinstance(d, int) else size(d) for k, d in enumerate(dims)]
                if dtype == np.bool_:
                    f[name] = np.full(shape, p > 0)
                elif dtype.kind in "iu":
                    if "mask" in name:
                        f[name] = np.ones(shape, dtype)
                    elif "position" in name:
                        f[name] = np.broadcast_to(np.arange(p, p + shape[-1]), shape).astype(dtype)
                    elif "token_type" in name:
                        f[name] = np.zeros(shape, dtype)
                    else:
                        f[name] = rng.integers(0, vocab, shape).astype(dtype)
                else:
                    f[name] = rng.standard_normal(shape).astype(dtype)
            out.append(f)
        return out
    return feeds


def image_feeds(shapes=((1, 3, 224, 224), (2, 3, 224, 224))) -> Callable:
    def feeds(path: str) -> List[dict]:
        (name, dims, dtype), = _declared(path)
        rng = np.random.default_rng(0)
        out = []
        for s in shapes:
            shape = [d if isinstance(d, int) else w for d, w in zip(dims, s)]
            out.append({name: rng.random(shape).astype(dtype)})
        return out
    return feeds


# -- optimum -------------------------------------------------------------------------------------------

_HF = {  # name: (config class, model class, config, optimum task)
    "bert": ("BertConfig", "BertModel", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                             intermediate_size=128, vocab_size=1000), "feature-extraction"),
    "roberta": ("RobertaConfig", "RobertaModel", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                      intermediate_size=128, vocab_size=1000), "feature-extraction"),
    "distilbert": ("DistilBertConfig", "DistilBertModel", dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                                               vocab_size=1000), "feature-extraction"),
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                      num_key_value_heads=2, intermediate_size=128, vocab_size=1000),
              "text-generation-with-past"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                      num_key_value_heads=2, intermediate_size=128, vocab_size=1000),
              "text-generation-with-past"),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                            num_key_value_heads=2, intermediate_size=128,
                                                            vocab_size=1000), "text-generation-with-past"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                   num_key_value_heads=4, intermediate_size=128, vocab_size=1000,
                                                   pad_token_id=0), "text-generation-with-past"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=1000),
             "text-generation-with-past"),
    "t5": ("T5Config", "T5ForConditionalGeneration", dict(d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16,
                                                          vocab_size=1000), "text2text-generation-with-past"),
    "bart": ("BartConfig", "BartForConditionalGeneration", dict(d_model=64, encoder_layers=2, decoder_layers=2,
                                                                encoder_attention_heads=4, decoder_attention_heads=4,
                                                                encoder_ffn_dim=128, decoder_ffn_dim=128,
                                                                vocab_size=1000), "text2text-generation-with-past"),
}


def _optimum_export(name: str, out: str) -> str:
    folder = os.path.join(out, name)
    onnx_dir = os.path.join(folder, "onnx")
    if not os.path.isdir(onnx_dir):
        import torch
        import transformers
        from optimum.exporters.onnx import main_export

        config_cls, model_cls, cfg, task = _HF[name]
        torch.manual_seed(0)
        model = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**cfg)).eval()
        model.save_pretrained(os.path.join(folder, "src"))
        main_export(os.path.join(folder, "src"), output=onnx_dir + ".tmp", task=task, do_validation=False)
        os.replace(onnx_dir + ".tmp", onnx_dir)
    return onnx_dir


def _optimum(name: str, file: str = "model.onnx") -> Callable[[str], str]:
    return lambda out: os.path.join(_optimum_export(name, out), file)


# -- timm ------------------------------------------------------------------------------------------------

TIMM = ["fastvit_t8", "efficientformerv2_s0", "edgenext_xx_small", "ghostnetv2_100", "repvgg_a0", "rexnet_100",
        "convnext_atto", "mobilevitv2_050", "levit_128s", "poolformer_s12", "regnetx_002", "resnest14d", "dla34",
        "mixnet_s", "tinynet_a", "lcnet_050", "efficientvit_b0", "mobilenetv4_conv_small", "hgnetv2_b0",
        "fbnetv3_b", "inception_next_atto", "tiny_vit_5m_224", "pvt_v2_b0", "mobileone_s0", "hrnet_w18_small"]


def timm_model(name: str):
    import timm
    import torch

    from .zoo import _no_constant_weights

    torch.manual_seed(0)
    m = timm.create_model(name, pretrained=False).eval()
    _no_constant_weights(m)
    return m


def _built(out: str, file: str, make: Callable[[str], None]) -> str:
    """``out/file``, made first by ``make(path)`` where it is not there (into a temporary name,
    renamed whole: an export killed halfway leaves no file behind)."""
    path = os.path.join(out, file)
    if not os.path.exists(path):
        os.makedirs(out, exist_ok=True)
        make(path + ".tmp.onnx")
        os.replace(path + ".tmp.onnx", path)
    return path


def _timm(name: str) -> Callable[[str], str]:
    def make(path: str) -> None:
        import torch
        from timm.utils.onnx import onnx_export

        with torch.no_grad():
            onnx_export(timm_model(name), path, example_input=torch.randn(2, 3, 224, 224),
                        check=False, batch_size=2, input_size=(3, 224, 224), opset=17)
    return lambda out: _built(out, f"{name}.onnx", make)


# -- ultralytics --------------------------------------------------------------------------------------

def _yolo(cfg: str, dynamic: bool = False, nms: bool = False, size: int = 320) -> Callable[[str], str]:
    def build(out: str) -> str:
        tag = f"{cfg.replace('.yaml', '')}{'_dyn' if dynamic else ''}{'_nms' if nms else ''}"
        path = os.path.join(out, f"{tag}.onnx")
        if not os.path.exists(path):
            import shutil
            import tempfile

            import torch
            from ultralytics import YOLO

            torch.manual_seed(0)
            with tempfile.TemporaryDirectory() as tmp:
                cwd = os.getcwd()
                os.chdir(tmp)
                try:
                    made = YOLO(cfg).export(format="onnx", imgsz=size, dynamic=dynamic, nms=nms, verbose=False)
                finally:
                    os.chdir(cwd)
                os.makedirs(out, exist_ok=True)
                shutil.move(os.path.join(tmp, made) if not os.path.isabs(made) else made, path)
        return path
    return build


# -- ONNX Runtime's tools, onnxconverter-common -------------------------------------------------------------

def _zoo_file(name: str, dynamic: bool = True) -> str:
    from .zoo import export

    return export(name, os.path.join(CACHE, "zoo"), dynamic=dynamic)


def _quantized(base: Callable[[], str], how: str, tag: str, calib: Optional[Callable] = None) -> Callable[[str], str]:
    def build(out: str) -> str:
        path = os.path.join(out, f"{tag}.onnx")
        if os.path.exists(path):
            return path
        os.makedirs(out, exist_ok=True)
        src = base()
        if how == "dynamic":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(src, path, weight_type=QuantType.QInt8)
        elif how == "static":
            from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

            class Reader(CalibrationDataReader):
                def __init__(self):
                    self.it = iter(calib(src))

                def get_next(self):
                    return next(self.it, None)

            quantize_static(src, path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
        elif how == "fp16":
            import onnx
            from onnxconverter_common import float16

            onnx.save(float16.convert_float_to_float16(onnx.load(src), keep_io_types=True), path)
        elif how in ("bert", "gpt2"):
            from onnxruntime.transformers import optimizer

            opt = optimizer.optimize_model(src, model_type=how, num_heads=4, hidden_size=64)
            opt.save_model_to_file(path)
        return path
    return build


def _calibration(path: str):
    rng = np.random.default_rng(1)
    (name, dims, dtype), = _declared(path)
    return [{name: rng.random([2 if not isinstance(d, int) else d for d in dims]).astype(dtype)} for _ in range(4)]


# -- the TorchScript exporter -------------------------------------------------------------------------------

def _torchscript(name: str) -> Callable[[str], str]:
    def make(path: str) -> None:
        import torch

        from .zoo import ZOO, build_model

        spec = ZOO[name]
        ex = spec.example(batch=2)
        names = list(ex) if spec.kind != "text" or spec.mask else ["input_ids"]
        axes = {n: ({0: "batch"} if spec.kind == "vision" else {0: "batch", 1: "seq"}) for n in names}
        with torch.no_grad():
            torch.onnx.export(build_model(name), tuple(torch.from_numpy(ex[n]) for n in names), path,
                              dynamo=False, input_names=names, output_names=["y"], dynamic_axes=axes, opset_version=17)
    return lambda out: _built(out, f"{name}.onnx", make)


def _rnn_model(kind: str):
    """A recurrent model as speech and time-series models use them: a 2-layer LSTM or a
    bidirectional GRU over 64 features, then a classifier per step (seeded weights)."""
    import torch

    torch.manual_seed(0)
    rnn = torch.nn.LSTM(64, 128, num_layers=2, batch_first=True) if kind == "lstm" else \
        torch.nn.GRU(64, 96, bidirectional=True, batch_first=True)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.fc = rnn, torch.nn.Linear(rnn.hidden_size * (2 if rnn.bidirectional else 1), 10)

        def forward(self, x):
            return self.fc(self.rnn(x)[0])
    return Model().eval()


def _torchscript_rnn(kind: str) -> Callable[[str], str]:
    def make(path: str) -> None:
        import torch

        with torch.no_grad():
            torch.onnx.export(_rnn_model(kind), (torch.zeros(2, 50, 64),), path, dynamo=False, input_names=["x"],
                              output_names=["y"], dynamic_axes={"x": {0: "batch", 1: "seq"}}, opset_version=17)
    return lambda out: _built(out, f"{kind}.onnx", make)


def _zoo_torch(name: str):
    def model():
        from .zoo import build_model

        return build_model(name)
    return model


_QUANTIZED = {"rtol": 2e-2, "reference": "onnxruntime-unoptimized"}


def cases() -> Dict[str, Case]:
    out: List[Case] = []
    for name in ("bert", "roberta", "distilbert"):
        out.append(Case(f"optimum/{name}", "optimum", _optimum(name), text_feeds(vocab=1000)))
    for name in ("llama", "qwen2", "mistral", "phi3", "gpt2"):
        out.append(Case(f"optimum/{name}-with-past", "optimum", _optimum(name), text_feeds(vocab=1000)))
    for name in ("t5", "bart"):
        out.append(Case(f"optimum/{name}-encoder", "optimum", _optimum(name, "encoder_model.onnx"), text_feeds(vocab=1000)))
        out.append(Case(f"optimum/{name}-decoder-merged", "optimum", _optimum(name, "decoder_model_merged.onnx"),
                        text_feeds(vocab=1000)))
    for name in TIMM:
        out.append(Case(f"timm/{name}", "timm", _timm(name), image_feeds(), reference="torch",
                        torch_model=lambda name=name: timm_model(name)))
    for cfg, dyn, nms in [("yolo11n.yaml", False, False), ("yolov8n.yaml", True, False), ("yolo11n-seg.yaml", False, False),
                          ("yolo11n-pose.yaml", False, False), ("yolo11n.yaml", False, True)]:
        shapes = ((1, 3, 320, 320), (2, 3, 256, 384)) if dyn else ((1, 3, 320, 320), (1, 3, 320, 320))
        tag = cfg.replace(".yaml", "") + ("-dynamic" if dyn else "") + ("-nms" if nms else "")
        out.append(Case(f"ultralytics/{tag}", "ultralytics", _yolo(cfg, dyn, nms), image_feeds(shapes)))
    out += [
        Case("ortq/resnet18-qdq", "ortq", _quantized(lambda: _zoo_file("resnet18"), "static", "resnet18_qdq", _calibration),
             image_feeds(), **_QUANTIZED),
        Case("ortq/mobilenet_v2-qdq", "ortq", _quantized(lambda: _zoo_file("mobilenet_v2"), "static",
                                                         "mobilenet_v2_qdq", _calibration), image_feeds(), **_QUANTIZED),
        # (SiLU between quantizers in every block: tables of codes, ``code_tables``)
        Case("ortq/efficientnet_b0-qdq", "ortq", _quantized(lambda: _zoo_file("efficientnet_b0"), "static",
                                                            "efficientnet_b0_qdq", _calibration), image_feeds(), **_QUANTIZED),
        Case("ortq/yolo11n-qdq", "ortq", _quantized(lambda: _yolo("yolo11n.yaml")(os.path.join(CACHE, "ultralytics")),
                                                    "static", "yolo11n_qdq", _calibration),
             image_feeds(((1, 3, 320, 320), (1, 3, 320, 320))), **_QUANTIZED),
        Case("ortq/bert-dynamic", "ortq", _quantized(lambda: _optimum("bert")(os.path.join(CACHE, "optimum")),
                                                     "dynamic", "bert_dynamic"), text_feeds(vocab=1000), **_QUANTIZED),
        Case("ortopt/bert", "ortopt", _quantized(lambda: _optimum("bert")(os.path.join(CACHE, "optimum")), "bert",
                                                 "bert_opt"), text_feeds(vocab=1000)),
        Case("ortopt/gpt2-with-past", "ortopt", _quantized(lambda: _optimum("gpt2")(os.path.join(CACHE, "optimum")),
                                                           "gpt2", "gpt2_opt"), text_feeds(vocab=1000)),
        Case("fp16/resnet18", "fp16", _quantized(lambda: _zoo_file("resnet18"), "fp16", "resnet18_fp16"), image_feeds(),
             rtol=1e-2),
        # (the zoo's BERT: onnxconverter-common turns optimum's BERT into a file ONNX Runtime refuses too,
        # a Cast to float32 feeding a float16 Sub)
        Case("fp16/bert", "fp16", _quantized(lambda: _zoo_file("bert"), "fp16", "bert_zoo_fp16"),
             text_feeds(vocab=1000), rtol=1e-2),
    ]
    for name in ("resnet50", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "swin_t", "vit_b_16",
                 "bert", "gpt2"):
        from .zoo import ZOO

        feeds = image_feeds() if ZOO[name].kind == "vision" else text_feeds(vocab=1000)
        out.append(Case(f"torchscript/{name}", "torchscript", _torchscript(name), feeds, reference="torch",
                        torch_model=_zoo_torch(name)))
    for kind in ("lstm", "gru_bidirectional"):  # (a dynamic batch and length: ONNX's LSTM and GRU)
        out.append(Case(f"torchscript/{kind}", "torchscript", _torchscript_rnn(kind), image_feeds(((1, 200, 64), (3, 57, 64))),
                        reference="torch", torch_model=lambda kind=kind: _rnn_model(kind)))
    return {c.name: c for c in out}


def torch_reference(model, feeds: dict) -> list:
    import torch

    with torch.no_grad():
        y = model(*[torch.from_numpy(v) for v in feeds.values()])
    ys = y if isinstance(y, (tuple, list)) else [y]
    return [t.numpy() if hasattr(t, "numpy") else np.asarray(t) for t in ys]


def onnxruntime_reference(path: str, feeds: dict, optimized: bool = True) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def compare(got: list, want: list, rtol: float) -> float:
    """The largest difference over the outputs, relative to each reference's largest magnitude;
    inf where shapes differ."""
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return float("inf")
        if w.size == 0:
            continue
        if w.dtype.kind in "iub":
            worst = max(worst, float(np.mean(g != w)))  # (the share of integer outputs that differ)
            continue
        scale = float(np.max(np.abs(w.astype(np.float64)))) or 1.0
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) / scale)
    return worst


__all__ = ["CACHE", "Case", "TIMM", "cases", "compare", "image_feeds", "onnxruntime_reference", "text_feeds",
           "timm_model", "torch_reference"]
