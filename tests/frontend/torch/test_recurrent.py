"""nn.LSTM, nn.GRU and nn.RNN through from_torch: one op each while exporting (ember::rnn), each
layer (both directions) one nn.recurrence over a static or a dynamic length, against eager."""
import pytest
import torch

from .helpers import check, ops_of

SEQ, BATCH = torch.export.Dim("seq", min=2, max=512), torch.export.Dim("batch", min=1, max=64)


class Layer(torch.nn.Module):
    """The layer's outputs and final states."""

    def __init__(self, cls, **kw):
        super().__init__()
        self.rnn = getattr(torch.nn, cls)(8, 12, **kw)

    def forward(self, x, state=None):
        y, h = self.rnn(x, state)
        return (y, *h) if isinstance(h, tuple) else (y, h)


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


CASES = [
    ("LSTM", dict(num_layers=2, batch_first=True)),
    ("LSTM", dict(bidirectional=True, bias=False, batch_first=True)),
    ("GRU", dict(bidirectional=True, batch_first=True)),
    ("GRU", dict(num_layers=3)),
    ("RNN", dict(nonlinearity="relu", bidirectional=True)),
    ("RNN", dict(batch_first=True)),
]


def _inputs(kw, batch, seq, seed=0):
    return _x(batch, seq, 8, seed=seed) if kw.get("batch_first") else _x(seq, batch, 8, seed=seed)


@pytest.mark.parametrize("cls, kw", CASES)
def test_over_a_dynamic_length_the_layer_is_one_op(cls, kw):
    axes = {0: BATCH, 1: SEQ} if kw.get("batch_first") else {0: SEQ, 1: BATCH}
    compiled = check(Layer(cls, **kw), _inputs(kw, 2, 5), dynamic_shapes={"x": axes},
                     more=[(_inputs(kw, 3, 17, seed=1),), (_inputs(kw, 1, 2, seed=2),)])
    assert "nn.recurrence" in ops_of(compiled) and "scan" not in ops_of(compiled)


@pytest.mark.parametrize("cls, kw", CASES[:3])
def test_over_a_static_length_the_layer_is_one_op(cls, kw):
    compiled = check(Layer(cls, **kw), _inputs(kw, 2, 6))
    assert ops_of(compiled).count("nn.recurrence") == kw.get("num_layers", 1) and "scan" not in ops_of(compiled)


def test_initial_states_and_a_projection():
    layer = Layer("LSTM", num_layers=2, batch_first=True)
    h0, c0 = _x(2, 3, 12, seed=3), _x(2, 3, 12, seed=4)
    check(layer, _x(3, 7, 8), (h0, c0), dynamic_shapes={"x": {1: SEQ}, "state": (None, None)},
          more=[(_x(3, 11, 8, seed=5), (h0, c0))])
    # LSTM's projections keep torch's decomposition: unrolled, at the example's length
    check(Layer("LSTM", proj_size=5, batch_first=True), _x(2, 4, 8))
