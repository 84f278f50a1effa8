"""What a tuning record is for: a workload (one fused group, as canonical text) on a target.

The key is a digest of the group's printed function -- its ops, attributes, shapes and dtypes,
parameters named by position -- and of the target's name, so the same layer in two models
(ResNet-18's and ResNet-50's first conv) is one workload and shares its records.
"""
from __future__ import annotations

import hashlib

from ..graph.ir import Call, Function
from ..graph.types import TensorType
from ..graph.visit import post_order

__all__ = ["describe", "target_name", "workload_key", "workload_text"]


def target_name(target) -> str:
    """The target as records name it: triple, CPU and cores (a measurement on 2 cores is not
    one on 16)."""
    return f"llvm -mtriple={target.triple} -mcpu={target.cpu} -cores={target.cores}"


def workload_text(fn: Function) -> str:
    from ..graph.printer import astext

    return astext(fn)


def workload_key(fn: Function, target) -> str:
    h = hashlib.sha256(workload_text(fn).encode("utf-8"))
    h.update(b"\0" + target_name(target).encode("utf-8"))
    return h.hexdigest()[:32]


def describe(fn: Function) -> str:
    """``conv2d_nchwc+add+sigmoid+multiply 1x4x56x56x16``: the group's ops and result shape."""
    ops = []
    for n in post_order(fn.body):
        if isinstance(n, Call) and n.op not in ops:
            ops.append(n.op.split(".")[-1])
    t = fn.body.type if hasattr(fn.body, "type") else None
    shape = "x".join(str(d) for d in t.shape) if isinstance(t, TensorType) else ""
    return f"{'+'.join(dict.fromkeys(ops))} {shape}".strip()
