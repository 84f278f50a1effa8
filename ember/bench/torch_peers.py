"""Two more peers for the zoo, both from the model's PyTorch source rather than its ONNX file:

- ``from_torch``: Ember through ``ember.from_torch`` (torch.export, no ONNX);
- ``inductor``: ``torch.compile(model)`` with its default CPU backend (Inductor), under
  ``torch.no_grad()`` on ``threads`` threads, as PyTorch users run it.

Both are timed as PyTorch users call them: torch tensors in (made once from the benchmark's
numpy feeds), torch tensors out.

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
    """The output tensors, as they are: a PyTorch user takes torch tensors (the benchmark reads
    them through ``np.asarray`` outside the timed calls)."""
    import torch

    outs = out if isinstance(out, (list, tuple)) else [out]
    return [o for o in outs if isinstance(o, torch.Tensor)]


def _tensors(names: list):
    """``tensors(feeds)``: the feeds as torch tensors over the same memory, made once per feeds
    dict. A PyTorch user holds tensors already: converting numpy arrays in every timed call
    would time torch calls the user never makes (each ~15 us right after a run, its caches
    cold: 60-75 us a call with the outputs' conversions, 5% of MobileNetV3-small)."""
    import torch

    made: dict = {}

    def tensors(feeds: dict) -> list:
        key = id(feeds)
        if key not in made:
            made.clear()
            made[key] = (feeds, [torch.from_numpy(feeds[n]) for n in names])  # (feeds kept: its id stays its own)
        return made[key][1]

    return tensors


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
    tensors = _tensors(names)

    def run(feeds):
        return _outputs(compiled(*tensors(feeds)))

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
    tensors = _tensors(names)

    def run(feeds):
        with torch.no_grad():
            return _outputs(fn(*tensors(feeds)))

    return run


__all__ = ["from_torch", "inductor", "zoo_name"]
