"""A zoo of real architectures, built from their classes with random weights and exported to ONNX
the way PyTorch users export today (``torch.onnx.export(..., dynamo=True)``), with a static or a
dynamic batch (and sequence) dimension.

    from ember.bench.zoo import ZOO, export
    path = export("resnet50", "/tmp/zoo", dynamic=True)     # /tmp/zoo/resnet50.dyn.onnx

Nothing is downloaded: torchvision models come from their constructors, transformers models
from their config classes (``weights=None``). Needs torch, torchvision and transformers (the
``zoo`` extra). torchvision's wheel on the package index is built against CUDA torch; beside
the CPU build its C operators (nms, roi_align) do not load, and importing torchvision fails
registering their fake kernels. The model classes never use them, so :func:`torchvision`
imports it without that registration.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import types
from typing import Callable, Dict, Optional, Tuple


def torchvision():
    """``torchvision``, importable beside a CPU build of torch (see the module docstring)."""
    if "torchvision" not in sys.modules:
        import torch  # noqa: F401

        sys.modules.setdefault("torchvision._meta_registrations",
                               types.ModuleType("torchvision._meta_registrations"))
    import torchvision as tv

    return tv


@dataclasses.dataclass(frozen=True)
class ZooModel:
    """How to build one model and its example inputs."""

    name: str
    kind: str  # "vision" or "text"
    build: Callable  # () -> torch.nn.Module (eval mode, random weights)
    image: int = 224  # vision: the input's height and width
    seq: int = 128  # text: the sequence length of the static export and the timing
    mask: bool = False  # text: whether the model takes an attention mask
    vocab: int = 1000

    def example(self, batch: int = 1, seq: Optional[int] = None, seed: int = 0) -> Dict[str, "object"]:
        """Named example inputs (numpy) at ``batch`` (and ``seq``)."""
        import numpy as np

        rng = np.random.default_rng(seed)
        if self.kind == "vision":
            return {"x": rng.standard_normal((batch, 3, self.image, self.image)).astype(np.float32)}
        s = seq or self.seq
        out = {"input_ids": rng.integers(0, self.vocab, (batch, s)).astype(np.int64)}
        if self.mask:
            m = np.ones((batch, s), np.int64)
            m[:, s - s // 4:] = 0 if batch > 1 else 1  # padded tails on all but a single row
            m[0] = 1
            out["attention_mask"] = m
        return out


def _tv(fn_name: str, **kw) -> Callable:
    def build():
        tv = torchvision()
        return getattr(tv.models, fn_name)(weights=None, **kw)
    return build


def _seg(fn_name: str) -> Callable:
    def build():
        import torch

        tv = torchvision()
        m = getattr(tv.models.segmentation, fn_name)(weights=None, weights_backbone=None, aux_loss=False)

        class Out(torch.nn.Module):  # the dict's "out" tensor, as users export it
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]

        return Out(m)
    return build


def _hf(config_name: str, model_name: str, **cfg) -> Callable:
    def build():
        import torch

        try:
            torchvision()  # transformers imports it when installed: without the fix it fails
        except ImportError:
            pass
        import transformers

        config = getattr(transformers, config_name)(**cfg)
        model = getattr(transformers, model_name)(config)

        class Logits(torch.nn.Module):  # the last hidden state / logits, as a plain tensor
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids, attention_mask=None):
                kw = {"attention_mask": attention_mask} if attention_mask is not None else {}
                out = self.m(input_ids=input_ids, **kw)
                return out[0]

        return Logits(model)
    return build


ZOO: Dict[str, ZooModel] = {m.name: m for m in [
    ZooModel("resnet18", "vision", _tv("resnet18")),
    ZooModel("resnet50", "vision", _tv("resnet50")),
    ZooModel("mobilenet_v2", "vision", _tv("mobilenet_v2")),
    ZooModel("mobilenet_v3_small", "vision", _tv("mobilenet_v3_small")),
    ZooModel("efficientnet_b0", "vision", _tv("efficientnet_b0")),
    ZooModel("regnet_y_400mf", "vision", _tv("regnet_y_400mf")),
    ZooModel("convnext_tiny", "vision", _tv("convnext_tiny")),
    ZooModel("vit_b_16", "vision", _tv("vit_b_16")),
    ZooModel("swin_t", "vision", _tv("swin_t")),
    ZooModel("deeplabv3_mobilenet_v3", "vision", _seg("deeplabv3_mobilenet_v3_large"), image=256),
    ZooModel("bert", "text", _hf("BertConfig", "BertModel", hidden_size=256, num_hidden_layers=4,
                                 num_attention_heads=4, intermediate_size=1024, vocab_size=1000),
             mask=True),
    ZooModel("distilbert", "text", _hf("DistilBertConfig", "DistilBertModel", n_layers=3, vocab_size=1000),
             mask=True),
    ZooModel("gpt2", "text", _hf("GPT2Config", "GPT2LMHeadModel", n_layer=4, n_embd=256, n_head=4,
                                 vocab_size=1000, n_positions=512, bos_token_id=0, eos_token_id=0)),
]}


def build_model(name: str, seed: int = 0):
    """The zoo model ``name`` in eval mode with random weights (seeded)."""
    import torch

    if name not in ZOO:
        raise KeyError(f"no zoo model {name!r}; the zoo has: {', '.join(ZOO)}")
    torch.manual_seed(seed)
    model = ZOO[name].build().eval()
    _no_constant_weights(model)
    return model


def _no_constant_weights(model) -> None:
    """Replace parameters and buffers that initialize to one value (ViT's zero head, norm
    scales of one, zero biases) by random values around it: a model whose head is zero gives
    zeros whatever a compiler does, and splat weights hide wrong indexing."""
    import torch

    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if not p.is_floating_point() or p.numel() < 2 or "running_var" in name:
                continue
            if torch.all(p == p.reshape(-1)[0]):
                base = float(p.reshape(-1)[0])
                p.copy_(base + torch.randn_like(p) * (0.1 if base else 0.02))


def export(name: str, out_dir: str, dynamic: bool = False, seed: int = 0, model=None, half: bool = False,
           torchscript: bool = False) -> str:
    """Export zoo model ``name`` to ``out_dir`` with ``torch.onnx.export(..., dynamo=True)``;
    returns the path (kept and reused when it exists). ``dynamic``: the batch (and for text
    models the sequence) dimension is symbolic; the example has batch 2, as a batch of 1 would
    make the exporter specialize it. ``half``: the model in float16 (``model.half()``, float
    inputs too), as a user exports a half-precision model. ``torchscript``: with the
    TorchScript exporter instead (``dynamo=False``, opset 17; static shapes only), 5-8x faster
    where it can write the model (not ViT's fused attention: its error is raised)."""
    import numpy as np
    import torch

    if torchscript and dynamic:
        raise ValueError("export(torchscript=True) writes static shapes only")
    spec = ZOO[name]
    path = os.path.join(out_dir, f"{name}{'.fp16' if half else ''}{'.dyn' if dynamic else ''}"
                                 f"{'.ts' if torchscript else ''}.onnx")
    if os.path.exists(path):
        return path
    os.makedirs(out_dir, exist_ok=True)
    model = model if model is not None else build_model(name, seed)
    if half:
        model = model.half()
    ex = spec.example(batch=2 if dynamic else 1)
    if half:
        ex = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in ex.items()}
    args = tuple(torch.from_numpy(v) for v in ex.values())
    dyn = None
    if dynamic:
        batch = torch.export.Dim("batch", min=1, max=1024)
        if spec.kind == "vision":
            dyn = {"x": {0: batch}}
        else:
            seq = torch.export.Dim("seq", min=2, max=512)
            dyn = {k: {0: batch, 1: seq} for k in ex}
        if spec.kind == "text" and not spec.mask:
            dyn = {"input_ids": dyn["input_ids"]}
    names = list(ex)
    if spec.kind == "text" and not spec.mask:
        names = ["input_ids"]
    tmp = path + ".tmp"
    with torch.no_grad():
        if torchscript:
            torch.onnx.export(model, args, tmp, dynamo=False, input_names=names, output_names=["y"],
                              opset_version=17)
        else:
            torch.onnx.export(model, args, tmp, dynamo=True, input_names=names, output_names=["y"],
                              dynamic_shapes=_by_position(dyn, names) if dyn else None, verbose=False,
                              external_data=False)
    os.replace(tmp, path)
    return path


def _by_position(dyn: dict, names: list) -> Tuple:
    return tuple(dyn.get(n) for n in names)


def reference(name: str, inputs: Dict[str, "object"], seed: int = 0, model=None):
    """The eager torch output of zoo model ``name`` on ``inputs`` (numpy)."""
    import torch

    model = model if model is not None else build_model(name, seed)
    with torch.no_grad():
        out = model(*[torch.from_numpy(v) for v in inputs.values()])
    return out.numpy()


__all__ = ["ZOO", "ZooModel", "build_model", "export", "reference", "torchvision"]
