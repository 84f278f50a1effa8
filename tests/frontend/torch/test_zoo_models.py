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
