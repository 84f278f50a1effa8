"""Two more peers for the zoo, both from the model's PyTorch source rather than its ONNX file:

- ``from_torch``: Ember through ``ember.from_torch`` (torch.export, no ONNX);
- ``inductor``: ``torch.compile(model)`` with its default CPU backend (Inductor), under
  ``torch.no_grad()`` on ``threads`` threads, as PyTorch users run it.

Each is a peer function of :mod:`ember.bench.peers` (``(path, threads, input infos) -> run``);
the model is the zoo model the ONNX path was exported from (``<name>.onnx``), rebuilt with the
same seeded random weights; None (skipped with a note) for a path that is not a zoo export or
without torch.
"""
from __future__ import annotations

import os
from typing import Callable, Optional


def zoo_name(path: str) -> Optional[str]:
    """The zoo model a path of :func:`ember.bench.zoo.export` holds, or None."""
    from .zoo import ZOO

    name = os.path.basename(path).split(".")[0]
    return name if name in ZOO else None


def _model_and_example(path: str, inputs):
    import torch

    from .zoo import ZOO, build_model

    name = zoo_name(path)
    spec = ZOO[name]
    shape = tuple(inputs[0].shape)
    ex = spec.example(batch=shape[0], seq=shape[1] if spec.kind == "text" else None, seed=1)
    names = [i.name for i in inputs]
    return build_model(name), tuple(torch.from_numpy(ex[n]) for n in names), names


def _outputs(out) -> list:
    import torch

    outs = out if isinstance(out, (list, tuple)) else [out]
    return [o.detach().numpy() for o in outs if isinstance(o, torch.Tensor)]


def from_torch(path: str, threads: int, inputs) -> Optional[Callable]:
    try:
        import torch
    except ImportError:
        return None
    if zoo_name(path) is None:
        return None
    import ember

    model, example, names = _model_and_example(path, inputs)
    compiled = ember.from_torch(model, example)
    compiled.exe.threads_per_run = threads

    def run(feeds):
        return _outputs(compiled(*[torch.from_numpy(feeds[n]) for n in names]))

    return run


def inductor(path: str, threads: int, inputs) -> Optional[Callable]:
    try:
        import torch
    except ImportError:
        return None
    if zoo_name(path) is None:
        return None
    torch.set_num_threads(threads)
    model, _, names = _model_and_example(path, inputs)
    fn = torch.compile(model)

    def run(feeds):
        with torch.no_grad():
            return _outputs(fn(*[torch.from_numpy(feeds[n]) for n in names]))

    return run


__all__ = ["from_torch", "inductor", "zoo_name"]
