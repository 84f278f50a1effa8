"""Helpers of the PyTorch frontend tests: compile a module with from_torch and compare it with
eager PyTorch (the reference) on inputs of one or more shapes."""
import numpy as np
import torch
from torch.utils import _pytree as pytree

import ember


def leaves(out) -> list:
    return [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]


def assert_close(got, ref, rtol=1e-4, atol=1e-5, what="") -> None:
    """Every tensor of ``got`` against ``ref`` (same structure, shapes, dtypes and values)."""
    g, r = pytree.tree_flatten(got), pytree.tree_flatten(ref)
    assert g[1] == r[1], f"{what}: output structure {g[1]} != {r[1]}"
    for k, (a, b) in enumerate(zip(g[0], r[0])):
        if not isinstance(b, torch.Tensor):
            assert a == b, f"{what} output {k}: {a!r} != {b!r}"
            continue
        assert isinstance(a, torch.Tensor), f"{what} output {k} is a {type(a).__name__}"
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), \
            f"{what} output {k}: {a.dtype} {tuple(a.shape)} != {b.dtype} {tuple(b.shape)}"
        if a.dtype == torch.bfloat16:
            a, b = a.float(), b.float()
        a, b = a.detach().numpy(), b.detach().numpy()
        if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer):
            np.testing.assert_array_equal(a, b, err_msg=f"{what} output {k}")
        else:
            scale = max(1.0, float(np.abs(b[np.isfinite(b)]).max()) if np.isfinite(b).any() else 1.0)
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale, err_msg=f"{what} output {k}")


def check(module, *inputs, dynamic_shapes=None, more=(), rtol=1e-4, atol=1e-5, kwargs=None):
    """Compile ``module`` (eval mode) from ``inputs`` and compare it with eager on ``inputs`` and on
    each argument tuple in ``more`` (other shapes, when dynamic). Returns the compiled model."""
    module = module.eval()
    compiled = ember.from_torch(module, inputs, dynamic_shapes, example_kwargs=kwargs)
    for args in (inputs, *more):
        with torch.no_grad():
            ref = module(*args, **(kwargs or {}))
        assert_close(compiled(*args, **(kwargs or {})), ref, rtol, atol,
                     what=f"{type(module).__name__} on {[tuple(a.shape) for a in args if hasattr(a, 'shape')]}")
    return compiled


class Fn(torch.nn.Module):
    """A module whose forward is ``fn`` (one per test case); ``modules`` it calls are registered
    as its submodules (their weights are its parameters, ``eval()`` reaches them)."""

    def __init__(self, fn, *modules):
        super().__init__()
        self.fn = fn
        self.mods = torch.nn.ModuleList(modules)

    def forward(self, *args):
        return self.fn(*args)


def ops_of(compiled) -> list:
    """The graph ops of a compiled model's imported graph."""
    from ember.graph import Call, post_order

    return [n.op for n in post_order(compiled.graph) if isinstance(n, Call)]
