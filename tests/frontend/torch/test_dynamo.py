"""torch.compile(model, backend="ember"): compiled graphs, the fallback to eager with one
warning naming the ops, training graphs refused, weights that change, and the kernel cache
serving a second compile."""
import warnings

import pytest
import torch

import ember  # noqa: F401  (registers the backend where Dynamo is loaded)
from ember.frontend.torch import dynamo

from .helpers import assert_close


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Small(torch.nn.Module):
    def __init__(self, channels=5):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(channels)
        self.fc = torch.nn.Linear(channels, 7)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean((2, 3))), y.amax(1)


def test_the_backend_is_registered():
    assert "ember" in torch._dynamo.list_backends()


_FRESH = """
import torch
{before}
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()
x = torch.randn(3, 4)
with torch.no_grad():
    got, want = torch.compile(m, backend="ember")(x), m(x)
assert torch.allclose(got, want, atol=1e-6), (got, want)
from ember.frontend.torch.dynamo import STATS
assert STATS["compiled"] == 1, STATS
print("ok")
"""


@pytest.mark.parametrize("before", ["", "import ember", "import ember.frontend.torch",
                                    "torch._dynamo.list_backends(); import ember.frontend.torch"])
def test_a_fresh_process_compiles_with_the_name_alone(before):
    # Dynamo finds "ember" through the package's entry point and registers it itself after
    # importing Ember: a registration on import first made that fail ("duplicate name").
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", _FRESH.format(before=before)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-2000:]


def test_compiled_graphs_match_eager_at_several_sizes():
    torch.manual_seed(0)
    m = Small().eval()
    fn = torch.compile(m, backend="ember")
    before = dict(dynamo.STATS)
    with torch.no_grad():
        for batch in (2, 3, 5):  # (the second size makes Dynamo recompile with a dynamic batch)
            x = torch.randn(batch, 3, 10, 12)
            assert_close(fn(x), m(x), what=f"batch {batch}")
    assert dynamo.STATS["compiled"] - before["compiled"] == 2 and dynamo.STATS["fallbacks"] == before["fallbacks"]


def test_unsupported_graphs_run_eagerly_with_one_warning():
    class Spectral(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs() * 2

    fn = torch.compile(Spectral(), backend="ember")
    x = torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            assert torch.allclose(fn(x), torch.fft.rfft(x).abs() * 2)
            fn(x)
    ours = [str(w.message) for w in caught if "ember" in str(w.message)]
    assert len(ours) == 1 and "aten._fft_r2c.default" in ours[0] and "eager" in ours[0]


def test_training_graphs_are_refused():
    fn = torch.compile(Small().eval(), backend="ember")
    with pytest.raises(Exception) as info:
        fn(torch.randn(2, 3, 6, 6))  # (autograd on: the outputs require grad)
    assert "training graph" in str(info.value) and "torch.no_grad()" in str(info.value)


def test_new_weights_are_compiled_in():
    torch.manual_seed(0)
    m = Small().eval()
    fn = torch.compile(m, backend="ember")
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        fn(x)
        other = Small().eval()
        m.load_state_dict(other.state_dict())  # (written in place)
        before = dynamo.STATS["recompiles"]
        assert_close(fn(x), other(x))
    assert dynamo.STATS["recompiles"] == before + 1


def test_a_second_compile_takes_its_kernels_from_the_cache():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 13, 11)  # (sizes no other test compiles)
    with torch.no_grad():
        first = dict(dynamo.STATS)
        torch.compile(Small(channels=9).eval(), backend="ember")(x)
        built = dynamo.STATS["kernels_built"] - first["kernels_built"]
        assert built > 0
        torch._dynamo.reset()
        second = dict(dynamo.STATS)
        m = Small(channels=9).eval()  # (the same architecture, other weights)
        assert_close(torch.compile(m, backend="ember")(x), m(x))
    assert dynamo.STATS["kernels_built"] == second["kernels_built"]  # nothing compiled twice
    assert dynamo.STATS["kernels_cached"] - second["kernels_cached"] >= built
