"""``ember compile --torch MODULE:FACTORY``: a PyTorch model to one shared library."""
import numpy as np
import pytest
import torch

import ember
from ember.cli import main

_NETS = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def small():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(2, 3, 8, 8),), {"x": {0: torch.export.Dim("batch", min=1, max=8)}}
'''


def test_compile_a_torch_factory_to_a_library(tmp_path, monkeypatch, capsys):
    (tmp_path / "nets_for_cli.py").write_text(_NETS)
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "small.so")
    assert main(["compile", "--torch", "nets_for_cli:small", "-o", out]) == 0
    assert "wrote" in capsys.readouterr().out
    exe = ember.load(out)
    assert exe.input_info[0].shape == ("batch", 3, 8, 8)
    import nets_for_cli

    model, _, _ = nets_for_cli.small()
    x = torch.randn(3, 3, 8, 8)
    with torch.no_grad():
        ref = model(x).numpy()
    np.testing.assert_allclose(exe.run(x.numpy())[0], ref, rtol=1e-4, atol=1e-5)


def test_a_bad_factory_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["compile", "--torch", "no_such_module:f"]) == 2
    assert "--torch no_such_module:f" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compile", "--torch"])
