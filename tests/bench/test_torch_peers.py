"""The PyTorch peers are timed as PyTorch users call them: tensors in, tensors out."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def test_feeds_become_tensors_once_and_share_their_memory():
    from ember.bench.torch_peers import _outputs, _tensors

    tensors = _tensors(["x"])
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    first = tensors(feeds)
    assert tensors(feeds)[0] is first[0]  # (no conversion inside the timed calls)
    feeds["x"][0, 0] = 7.0
    assert float(first[0][0, 0]) == 7.0  # the same memory, no copy
    other = {"x": np.zeros((2, 3), np.float32)}
    assert float(tensors(other)[0].sum()) == 0.0  # another feeds dict: its own tensors
    out = _outputs((first[0], 3))
    assert len(out) == 1 and out[0] is first[0]  # tensors out as they are
