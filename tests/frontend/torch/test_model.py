"""The compiled model as users call it: the module's output structure with torch tensors,
keyword arguments, numpy inputs, and no copies of inputs or outputs."""
import dataclasses

import numpy as np
import torch
from torch.utils import _pytree as pytree

import ember

from .helpers import assert_close


@dataclasses.dataclass
class Output:
    """An output class like Hugging Face's ModelOutput, registered with torch's pytree."""

    logits: torch.Tensor
    hidden: tuple


pytree.register_dataclass(Output)


class Structured(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, *, scale=None, mask=None):
        h = self.fc(x)
        if mask is not None:
            h = h * mask
        return {"out": Output(logits=h * scale, hidden=(h, h.relu())), "count": 3, "none": None,
                "list": [x.sum(), x]}


def test_outputs_keep_the_modules_structure():
    torch.manual_seed(0)
    m = Structured().eval()
    x, scale, mask = torch.randn(2, 4), torch.tensor(2.0), torch.ones(2, 3)
    compiled = ember.from_torch(m, (x,), example_kwargs={"scale": scale, "mask": mask})
    got = compiled(x, mask=mask, scale=scale)  # (keywords in another order)
    assert isinstance(got["out"], Output) and isinstance(got["out"].hidden, tuple)
    assert got["count"] == 3 and got["none"] is None
    with torch.no_grad():
        assert_close(got, m(x, scale=scale, mask=mask))


def test_numpy_inputs():
    m = Structured().eval()
    x, scale, mask = torch.randn(2, 4), torch.tensor(2.0), torch.ones(2, 3)
    compiled = ember.from_torch(m, (x,), example_kwargs={"scale": scale, "mask": mask})
    got = compiled(x.numpy(), scale=scale.numpy(), mask=mask.numpy())
    with torch.no_grad():
        assert_close(got, m(x, scale=scale, mask=mask))


class Two(torch.nn.Module):
    def forward(self, x):
        return x * 2, x.exp()


def test_no_copies_in_or_out():
    x = torch.randn(64, 64)
    compiled = ember.from_torch(Two(), (x,))
    seen = {}
    run_into = compiled.exe._run_into

    def spy(out, *arrays):
        seen["in"], seen["given"] = arrays, out
        seen["out"] = run_into(out, *arrays)
        return seen["out"]

    compiled.exe._run_into = spy
    a, b = compiled(x)
    assert seen["in"][0].ctypes.data == x.data_ptr()  # the executable reads the tensor's memory
    # and writes the output tensors' memory, made before the run (see TorchModel)
    assert seen["out"][0] is seen["given"][0] and seen["out"][1] is seen["given"][1]
    assert a.data_ptr() == seen["out"][0].ctypes.data and b.data_ptr() == seen["out"][1].ctypes.data
    np.testing.assert_allclose(a.numpy(), x.numpy() * 2)
    np.testing.assert_allclose(b.numpy(), np.exp(x.numpy()), rtol=1e-5)
    a2, _ = compiled(x)
    assert a2.data_ptr() != a.data_ptr()  # every call its own output tensors


def test_outputs_written_into_given_arrays_only_where_they_fit():
    from ember.runtime.ndarray import _aligned_empty

    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    exe = ember.from_torch(Two(), (torch.from_numpy(x),)).exe
    good = _aligned_empty((64, 64), np.dtype(np.float32), 64)
    wrong = np.empty((64, 65), np.float32)  # (another shape: a new array instead)
    a, b = exe._run_into([good, wrong], x)
    assert a is good and b is not wrong and b.shape == (64, 64)
    np.testing.assert_allclose(a, x * 2)
    np.testing.assert_allclose(b, np.exp(x), rtol=1e-5)
    unaligned = _aligned_empty((64 * 64 + 1,), np.dtype(np.float32), 64)[1:].reshape(64, 64)
    a, _ = exe._run_into([unaligned, None], x)
    assert a is not unaligned


class Copied(torch.nn.Module):
    """Outputs the program copies at the end: a reshape of an intermediate (GPT-2's logits),
    and the input itself."""

    def forward(self, x):
        return torch.relu(x @ x).reshape(1, 32, 32), x


def test_copied_outputs_go_into_the_given_arrays_too():
    x = np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32)
    compiled = ember.from_torch(Copied(), (torch.from_numpy(x),))
    exe = compiled.exe
    assert all(copy for _, copy in exe._out_take)  # (what this test is about)
    given = [np.empty((1, 32, 32), np.float32), np.empty((32, 32), np.float32)]
    a, b = exe._run_into(given, x)
    assert a is given[0] and b is given[1]  # copied into them, no new arrays
    np.testing.assert_allclose(a[0], np.maximum(x @ x, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(b, x)
    a, _ = exe._run_into([np.empty((32, 32), np.float32), None], x)  # another shape: a new array
    assert a.shape == (1, 32, 32)
    with torch.no_grad():
        assert_close(compiled(torch.from_numpy(x)), Copied()(torch.from_numpy(x)), rtol=1e-5, atol=1e-5)


def test_calls_take_numpy_and_tensors_that_need_grad_too():
    x = torch.randn(8, 8)
    compiled = ember.from_torch(Two(), (x,))
    for arg in (x, x.numpy(), x.clone().requires_grad_()):
        a, b = compiled(arg)
        assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
        np.testing.assert_allclose(a.numpy(), x.numpy() * 2)
        np.testing.assert_allclose(b.numpy(), np.exp(x.numpy()), rtol=1e-5)


def test_a_non_contiguous_input_is_read_correctly():
    class Id(torch.nn.Module):
        def forward(self, x):
            return x + 1

    compiled = ember.from_torch(Id(), (torch.randn(4, 6),))
    x = torch.randn(6, 4).t()  # (strides (1, 4))
    assert torch.equal(compiled(x), x + 1)


def test_repr_and_infos():
    compiled = ember.from_torch(Structured().eval(), (torch.randn(2, 4),),
                                example_kwargs={"scale": torch.tensor(1.0)})
    assert "Structured" in repr(compiled) and compiled.input_info[0].name == "x"
    assert [i.name for i in compiled.input_info] == ["x", "scale"]


def test_a_team_torch_left_on_the_calling_thread_is_freed_before_a_run():
    """torch's parallel ops leave a libgomp team on the calling thread (torch's libgomp serves the
    process); its threads would make libgomp throttle the lane that runs the model, so a run
    frees it first (ember.runtime.lanes)."""
    import os

    class Two(torch.nn.Module):
        def forward(self, x):
            return x * 2

    x = torch.randn(8, 8)
    compiled = ember.from_torch(Two(), (x,))
    compiled(x)  # (the lane exists)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        big = torch.randn(1 << 21)
        (big + 1).sum()  # a parallel region on this thread: a team with a worker
        before = len(os.listdir("/proc/self/task"))
        compiled(x)
        after = len(os.listdir("/proc/self/task"))
    finally:
        torch.set_num_threads(threads)
    assert after == before - 1


class Square(torch.nn.Module):
    def forward(self, x):
        return x @ torch.arange(16.0).reshape(4, 4) + x.sum()


def test_an_input_view_is_reused_only_while_it_is_the_same_memory_and_layout():
    """The view of the last tensor at a position serves the next call while address, shape,
    strides and dtype match: a tensor changed in place is read anew, one transposed in place
    (same address and shape, other strides) gets a new view, and no input is kept alive."""
    import gc
    import weakref

    m = Square().eval()
    x = torch.randn(4, 4)
    compiled = ember.from_torch(m, (x,))
    views = compiled._views
    with torch.no_grad():
        assert_close(compiled(x), m(x))
        first = views._last[0][1]
        x.mul_(3)  # (the same memory, new values)
        assert_close(compiled(x), m(x))
        assert views._last[0][1] is first
        x.t_()  # (the same address and shape, strides swapped)
        assert_close(compiled(x), m(x))
        assert views._last[0][1] is not first and views._last[0][1].strides == (4, 16)
        y = torch.randn(4, 4)
        assert_close(compiled(y), m(y))
        ref = weakref.ref(y)
        del y
        gc.collect()
        assert ref() is None  # (the model holds no reference to its last input)
        z = torch.randn(4, 4, dtype=torch.float64).to(torch.float32).requires_grad_()
        assert_close(compiled(z), m(z.detach()))  # (requires grad: read through a detached view)


def test_outputs_made_ahead_are_new_tensors_every_call():
    """Output tensors are made several calls' worth at a time: each call's are its own."""
    m = Square().eval()
    x = torch.randn(4, 4)
    compiled = ember.from_torch(m, (x,))
    with torch.no_grad():
        outs = [(compiled(x * k), m(x * k)) for k in range(20)]
    assert len({got.data_ptr() for got, _ in outs}) == 20
    for got, want in outs:
        assert_close(got, want)
