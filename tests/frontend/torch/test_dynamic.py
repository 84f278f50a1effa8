"""Symbolic sizes: torch.export.Dim names become Ember dims, one compile runs every size, and
sizes the user did not name get names of their own."""
import pytest
import torch

import ember
from ember.errors import ShapeError

from .helpers import assert_close


class Mix(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x, y):
        h = self.fc(x).relu()  # (batch, seq, 3)
        return h.mean(1) + y, h.reshape(h.shape[0], -1).sum(-1) * h.shape[1]


def test_named_dims_one_executable_many_sizes():
    torch.manual_seed(0)
    m = Mix().eval()
    batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=64)
    compiled = ember.from_torch(m, (torch.randn(2, 5, 6), torch.randn(2, 3)),
                                dynamic_shapes={"x": {0: batch, 1: seq}, "y": {0: batch}})
    assert [i.shape for i in compiled.input_info] == [("batch", "seq", 6), ("batch", 3)]
    exe = compiled.exe
    for b, s in ((1, 2), (4, 9), (7, 33)):
        x, y = torch.randn(b, s, 6), torch.randn(b, 3)
        with torch.no_grad():
            assert_close(compiled(x, y), m(x, y), what=f"batch {b}, seq {s}")
    assert compiled.exe is exe


def test_unnamed_dynamic_sizes_are_named_after_their_input():
    m = Mix().eval()
    compiled = ember.from_torch(m, (torch.randn(2, 5, 6), torch.randn(2, 3)),
                                dynamic_shapes=({0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO},
                                                {0: torch.export.Dim.AUTO}))
    shape = compiled.input_info[0].shape
    assert shape[2] == 6 and all(isinstance(d, str) for d in shape[:2])
    assert shape[0] == compiled.input_info[1].shape[0]  # (one batch: torch related them)
    x, y = torch.randn(3, 4, 6), torch.randn(3, 3)
    with torch.no_grad():
        assert_close(compiled(x, y), m(x, y))


def test_sizes_outside_what_the_graph_assumes_are_a_shape_error():
    class Pos(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(16, 4))

        def forward(self, x):
            return x + self.table[: x.shape[0]]

    seq = torch.export.Dim("seq", min=2, max=16)
    compiled = ember.from_torch(Pos(), (torch.randn(5, 4),), dynamic_shapes=({0: seq},))
    assert compiled(torch.randn(16, 4)).shape == (16, 4)
    with pytest.raises(ShapeError):
        compiled(torch.randn(20, 4))  # (past the table: the program's checks say so)


class TwoIsSpecial(torch.nn.Module):
    """A branch on a size: torch.export guards ``seq != 2``, which Dim("seq", min=2) violates
    (BART and MobileBERT do this)."""

    def forward(self, x):
        return x * 2 if x.shape[1] == 2 else x.cumsum(1)


def test_a_dim_the_model_guards_is_exported_as_dynamic_with_a_warning():
    seq = torch.export.Dim("seq", min=2, max=64)
    with pytest.warns(UserWarning, match="Dim.DYNAMIC"):
        compiled = ember.from_torch(TwoIsSpecial(), (torch.randn(3, 5),), dynamic_shapes=({1: seq},))
    assert compiled.input_info[0].shape == (3, "seq")  # still the user's name
    for s in (3, 5, 17):
        x = torch.randn(3, s)
        assert_close(compiled(x), x.cumsum(1), what=f"seq {s}")
