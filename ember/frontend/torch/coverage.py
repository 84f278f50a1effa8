"""Which core ATen operators Ember converts, of the set torch documents as core ATen (the
operators tagged ``torch.Tag.core``: what ``torch.export``'s core decompositions lower every
program to). ``python bench/torch_ops.py`` prints it."""
from __future__ import annotations

from .importer import TRAINING_OPS
from .table import supported_targets

RANDOM = ("aten.rand.", "aten.randn.", "aten.randperm.", "aten.bernoulli.", "aten.normal.", "aten.uniform.")


def core_aten_ops() -> list:
    """Every core ATen overload of this torch, by name (``aten.add.Tensor``), sorted."""
    import torch

    out = []
    for name in dir(torch.ops.aten):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        for overload in getattr(packet, "overloads", lambda: [])():
            op = getattr(packet, overload)
            if torch.Tag.core in op.tags:
                out.append(str(op))
    return sorted(out)


def kind(op: str) -> str:
    """Why an op has no converter, for the ones that are out of scope by design."""
    if "_backward" in op or op in TRAINING_OPS:
        return "training"
    if op.startswith(RANDOM):
        return "random"
    if op.endswith(".out"):
        return "out="
    return "missing"


def coverage() -> dict:
    """``{"core": [...], "converted": [...], "training": [...], "random": [...], "out=": [...],
    "missing": [...]}``: the core ops and how each stands."""
    supported = set(supported_targets())
    core = core_aten_ops()
    out = {"core": core, "converted": [op for op in core if op in supported]}
    for k in ("training", "random", "out=", "missing"):
        out[k] = [op for op in core if op not in supported and kind(op) == k]
    return out


__all__ = ["core_aten_ops", "coverage", "kind"]
