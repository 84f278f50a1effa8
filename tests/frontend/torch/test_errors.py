"""What the frontend refuses, all at once and with the user's source lines: unsupported ATen ops,
training graphs, calls that do not match the export."""
import pytest
import torch

import ember
from ember.errors import ArgumentError, UnsupportedOpError
from ember.frontend.torch import TrainingGraphError


class Spectral(torch.nn.Module):
    def forward(self, x, y):
        z = torch.fft.rfft(x).abs()  # aten._fft_r2c
        d = torch.histc(y, bins=4)  # aten.histc
        return z.sum() + d.sum() + torch.fft.rfft(y).abs().sum()


def test_unsupported_ops_are_listed_once_with_source_lines():
    with pytest.raises(UnsupportedOpError) as info:
        ember.from_torch(Spectral(), (torch.randn(3, 8), torch.randn(4, 8)))
    text = str(info.value)
    assert "aten._fft_r2c.default (2 uses)" in text and "aten.histc.default (1 use)" in text
    assert f"{__file__}:" in text and "torch.fft.rfft(x)" in text and "torch.histc(" in text
    assert set(info.value.unsupported_ops) == {"aten._fft_r2c.default", "aten.histc.default"}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn, self.drop = torch.nn.BatchNorm1d(4), torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.bn(x))


def test_a_module_in_training_mode_is_a_training_graph_error():
    with pytest.raises(TrainingGraphError) as info:
        ember.from_torch(Net().train(), (torch.randn(3, 4),))
    assert "model.eval()" in str(info.value) and "running_mean" in str(info.value)


def test_dropout_in_training_mode_is_named():
    class Drop(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.dropout(x, 0.2, training=True)

    with pytest.raises(TrainingGraphError) as info:
        ember.from_torch(Drop(), (torch.randn(3, 4),))
    assert "training graph" in str(info.value) and "model.eval()" in str(info.value)


def test_not_a_module():
    with pytest.raises(TypeError):
        ember.from_torch(lambda x: x, (torch.randn(2),))


def test_calls_must_match_the_export():
    class Scale(torch.nn.Module):
        def forward(self, x, k: int):
            return x * k

    compiled = ember.from_torch(Scale(), (torch.randn(3), 4))
    assert torch.equal(compiled(torch.ones(3), 4), torch.full((3,), 4.0))
    with pytest.raises(ArgumentError, match="export again"):
        compiled(torch.ones(3), 5)  # (4 was compiled in)
    with pytest.raises(ArgumentError, match="structured"):
        compiled(torch.ones(3))
