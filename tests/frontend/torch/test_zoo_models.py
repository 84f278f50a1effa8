"""Whole models of the zoo's libraries through from_torch (slow; they need torchvision and
transformers, the `zoo` extra): a torchvision ResNet with a dynamic batch, and a Hugging Face
BERT whose ModelOutput comes back as itself. bench/zoo_from_torch_check.py runs the whole zoo."""
import pytest
import torch

import ember

from .helpers import assert_close

pytestmark = pytest.mark.slow


def test_torchvision_resnet18_dynamic_batch():
    pytest.importorskip("torchvision")
    from ember.bench.zoo import build_model

    model = build_model("resnet18", seed=0)
    batch = torch.export.Dim("batch", min=1, max=32)
    compiled = ember.from_torch(model, (torch.randn(2, 3, 64, 64),), dynamic_shapes={"x": {0: batch}})
    for b in (1, 3):
        x = torch.randn(b, 3, 64, 64)
        with torch.no_grad():
            assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-4, what=f"batch {b}")


def test_hugging_face_model_output():
    pytest.importorskip("transformers")
    from ember.bench.zoo import torchvision

    try:
        torchvision()  # (transformers imports it when installed: see ember.bench.zoo)
    except ImportError:
        pass
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                                  vocab_size=100)
    model = transformers.BertModel(cfg).eval()
    dims = {0: torch.export.Dim("batch", min=1, max=8), 1: torch.export.Dim("seq", min=2, max=64)}
    ids, mask = torch.randint(0, 100, (2, 12)), torch.ones(2, 12, dtype=torch.long)
    compiled = ember.from_torch(model, (), example_kwargs={"input_ids": ids, "attention_mask": mask},
                                dynamic_shapes={"input_ids": dims, "attention_mask": dims})
    ids, mask = torch.randint(0, 100, (3, 20)), torch.ones(3, 20, dtype=torch.long)
    mask[0, 15:] = 0
    got = compiled(input_ids=ids, attention_mask=mask)
    assert type(got).__name__ == "BaseModelOutputWithPoolingAndCrossAttentions"
    with torch.no_grad():
        assert_close(got, model(input_ids=ids, attention_mask=mask), rtol=1e-3, atol=1e-4)


# Today's decoder LLMs and encoders, each with what sets it apart: LLaMA (rotary positions,
# RMSNorm, SwiGLU, grouped-query attention), BLOOM (ALiBi biases), T5's encoder (relative
# position buckets), Phi (partial rotary, parallel attention and MLP). Tiny configs, random
# weights, a dynamic batch and sequence; through from_torch and through the ONNX file that
# torch.onnx.export(dynamo=True) writes.
LLMS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(hidden_size=64, intermediate_size=160, num_attention_heads=4,
                                                       num_key_value_heads=2)),
    "bloom": ("BloomConfig", "BloomForCausalLM", dict(hidden_size=64, n_head=4)),
    "t5_encoder": ("T5Config", "T5EncoderModel", dict(d_model=64, d_ff=160, num_heads=4, d_kv=16)),
    "phi": ("PhiConfig", "PhiForCausalLM", dict(hidden_size=64, intermediate_size=160, num_attention_heads=4)),
}


def _llm(name):
    pytest.importorskip("transformers")
    from ember.bench.zoo import torchvision

    try:
        torchvision()  # (see test_hugging_face_model_output)
    except ImportError:
        pass
    import transformers

    cfg_name, cls_name, kw = LLMS[name]
    torch.manual_seed(0)
    layers = {"BloomConfig": "n_layer", "T5Config": "num_layers"}.get(cfg_name, "num_hidden_layers")
    cfg = getattr(transformers, cfg_name)(vocab_size=128, **{layers: 2}, **kw)
    model = getattr(transformers, cls_name)(cfg).eval()

    class Logits(torch.nn.Module):  # the first output: logits or the last hidden state
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids):
            return self.m(input_ids=input_ids)[0]

    return Logits().eval()


@pytest.mark.parametrize("frontend", ["from_torch", "onnx"])
@pytest.mark.parametrize("name", sorted(LLMS))
def test_language_model_architectures(name, frontend, tmp_path):
    model = _llm(name)
    dims = {0: torch.export.Dim("batch", min=1, max=8), 1: torch.export.Dim("seq", min=2, max=64)}
    example = (torch.randint(0, 128, (2, 12)),)
    if frontend == "from_torch":
        run = ember.from_torch(model, example, dynamic_shapes=({0: dims[0], 1: dims[1]},))
    else:
        pytest.importorskip("onnxscript")
        path = str(tmp_path / f"{name}.onnx")
        with torch.no_grad():
            torch.onnx.export(model, example, path, dynamo=True, dynamic_shapes=({0: dims[0], 1: dims[1]},),
                              input_names=["input_ids"], output_names=["out"])
        exe = ember.compile(path)

        def run(ids):
            return torch.from_numpy(exe.run(ids.numpy())[0])
    for batch, seq in ((1, 7), (3, 20)):
        ids = torch.randint(0, 128, (batch, seq), generator=torch.Generator().manual_seed(batch * 100 + seq))
        with torch.no_grad():
            assert_close(run(ids), model(ids), rtol=1e-3, atol=1e-4, what=f"{name} {frontend} {batch}x{seq}")
