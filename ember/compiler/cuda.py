"""A model's fused groups as GPU kernels (issue 49): the graph pipeline without the CPU's
layouts, each group scheduled for the ``cuda`` kind and compiled to PTX.

There is no GPU runtime yet, so this stops at PTX (``ptxas`` checks it in CI) and at the CPU
execution of the same loop programs (:mod:`ember.loop.passes.threads_on_cpu`), which tests
compare with the CPU's kernels. A group becomes one or more *device kernels*: each grid nest
of its loop program (a root stage of its schedule) is one launch, in order, and the values
one writes for the next (the group's intermediates) are workspace buffers the host allocates.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ..errors import LoweringError
from ..graph.ir import Function, Module
from ..loop.expr import IntImm, Var
from ..loop.stmt import Allocate, For, PrimFunc, SeqStmt
from ..loop.visit import walk
from ..target import CudaTarget, as_target

# graph passes that lay data out for a CPU's vectors and micro-kernels (a GPU's kernels read
# the plain layouts), or rewrite products for its integer dot instructions
CPU_ONLY_PASSES = ("integer_products", "block_layout", "fold_channel_scale", "pack_conv_weights", "pack_matmul_weights")

__all__ = ["CPU_ONLY_PASSES", "GpuGroup", "device_kernels", "gpu_groups", "lower_for_gpu", "model_ptx"]


@dataclasses.dataclass
class GpuGroup:
    """A fused group as GPU code: its loop program (grid nests in order), its device kernels
    (one launch each) and the workspace buffers they pass values through."""

    name: str
    func: PrimFunc
    kernels: list
    workspace: list


def gpu_groups(model, target=None, input_shapes: Optional[dict] = None) -> list:
    """``[(name, Function)]``: the fused groups of ``model`` (an ONNX file, bytes or proto)
    after the graph pipeline for a GPU target (:data:`CPU_ONLY_PASSES` off)."""
    import ember.graph.ops.compute  # noqa: F401  (registers the op computes)

    from ..frontend.onnx.importer import from_onnx
    from ..graph.passes import PassContext
    from .compile import _optimize
    from .fold import evaluate_constants

    target = as_target(target or "cuda")
    mod = from_onnx(model, input_shapes=input_shapes)
    ctx = PassContext(opt_level=3, disabled=set(CPU_ONLY_PASSES),
                      config={"target": target, "evaluate": evaluate_constants})
    mod, _ = _optimize(Module({"main": mod.main}), ctx)  # (the CPU compile's pipeline, these passes off)
    return [(name, fn) for name, fn in mod.functions if name != "main" and isinstance(fn, Function)]


def lower_for_gpu(fn: Function, name: str, target=None) -> PrimFunc:
    """Group ``fn`` scheduled for the ``cuda`` kind (its op's cuda schedule, else the generic
    one: :mod:`ember.kernels.gpu`), lowered and through the loop passes."""
    from ..loop.passes import default_pipeline
    from .group import lower_group

    target = as_target(target or "cuda")
    if not isinstance(target, CudaTarget):
        raise LoweringError(f"{name}: lower_for_gpu needs a cuda target, got {target}")
    return default_pipeline(lower_group(fn, name, target).lowered())


def device_kernels(func: PrimFunc) -> tuple:
    """``(kernels, workspace)``: ``func`` split into one PrimFunc per grid nest (in order; a
    part with no grid loops runs on one thread of one block), each taking the buffers and
    sizes it uses, and the intermediates they share, which the host allocates."""
    body, workspace = func.body, []
    while isinstance(body, Allocate) and body.buffer.scope == "global":
        workspace.append(body.buffer)
        body = body.body
    parts = list(body.stmts) if isinstance(body, SeqStmt) else [body]
    kernels = []
    for k, part in enumerate(parts):
        if not (isinstance(part, For) and part.kind.startswith("block_")):
            # a grid of one block: of the part's own threads, or of one thread
            if not any(isinstance(n, For) and n.kind.startswith("thread_") for n in walk(part)):
                part = For(Var("tx", "int64"), IntImm(0), IntImm(1), "thread_x", part)
            part = For(Var("bx", "int64"), IntImm(0), IntImm(1), "block_x", part)
        seen = set(walk(part))
        bufs = [b for b in list(func.buffers) + workspace if b in seen]
        names = {n.name for n in seen if isinstance(n, Var)}
        for b in bufs:
            names |= {n.name for d in b.shape for n in walk(d) if isinstance(n, Var)}
        sizes = [v for v in func.scalars if v.name in names]
        kname = func.name if len(parts) == 1 else f"{func.name}_{k}"
        kernels.append(PrimFunc(kname, tuple(bufs) + tuple(sizes), part, func.attrs))
    return kernels, workspace


def model_ptx(model, target=None, input_shapes: Optional[dict] = None) -> tuple:
    """``(groups, ptx)``: every fused group of ``model`` as a :class:`GpuGroup`, and the PTX
    of all their device kernels for ``target`` (``"cuda -arch=sm_90"``)."""
    from ..codegen.nvptx import ptx

    target = as_target(target or "cuda")
    groups = []
    for name, fn in gpu_groups(model, target, input_shapes):
        func = lower_for_gpu(fn, name, target)
        kernels, workspace = device_kernels(func)
        groups.append(GpuGroup(name, func, kernels, workspace))
    return groups, ptx([k for g in groups for k in g.kernels], target)
