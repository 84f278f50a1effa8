"""A model compiled for a GPU (issue 49): the graph pipeline without the CPU's layouts, each
fused group scheduled for the ``cuda`` kind and compiled to PTX, the CPU's static program
around them (:func:`compile_cuda`), run by :mod:`ember.runtime.gpu_executable`.

A group becomes one or more *device kernels*: each grid nest of its loop program (a root stage
of its schedule) is one launch, in order, and the values one writes for the next (the group's
intermediates) are workspace buffers the host allocates. Without a GPU, ``ptxas`` checks the
PTX and the same loop programs run on the CPU (:mod:`ember.loop.passes.threads_on_cpu`, the
runtime's ``EmulatedDevice``), which tests compare with the CPU's own kernels and numpy.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ..errors import LoweringError
from ..graph.ir import Function, Module
from ..loop.expr import IntImm, Var
from ..loop.stmt import Allocate, For, PrimFunc, SeqStmt
from ..loop.visit import walk
from ..runtime.gpu_executable import GpuExecutable
from ..target import CudaTarget, as_target

# graph passes that lay data out for a CPU's vectors and micro-kernels (a GPU's kernels read
# the plain layouts), or rewrite products for its integer dot instructions
CPU_ONLY_PASSES = ("integer_products", "activation_products", "block_layout", "fold_channel_scale", "bf16_activations", "pack_conv_weights",
                   "pack_matmul_weights")

__all__ = ["CPU_ONLY_PASSES", "CudaExecutable", "CudaPlan", "GpuGroup", "compile_cuda", "plan_cuda", "device_kernels", "gpu_groups", "gpu_module", "launch_table",
           "lower_for_gpu", "model_ptx"]


@dataclasses.dataclass
class GpuGroup:
    """A fused group as GPU code: its loop program (grid nests in order), its device kernels
    (one launch each) and the workspace buffers they pass values through."""

    name: str
    func: PrimFunc
    kernels: list
    workspace: list


def gpu_module(model, target=None, input_shapes: Optional[dict] = None, options=None) -> Module:
    """``model`` (an ONNX file, bytes, proto or a graph :class:`Module`) through the graph
    pipeline for a GPU target (:data:`CPU_ONLY_PASSES` off): ``main`` calling its fused groups.
    ``options`` (a :class:`~ember.options.CompileOptions`): what the passes read of it
    (``precision``)."""
    import ember.graph.ops.compute  # noqa: F401  (registers the op computes)

    from ..graph.passes import PassContext
    from .compile import _bind_shapes, _optimize
    from .fold import evaluate_constants

    target = as_target(target or "cuda")
    if isinstance(model, Module):
        mod = _bind_shapes(model, input_shapes) if input_shapes else model
    else:
        from ..frontend.onnx.importer import from_onnx

        mod = from_onnx(model, input_shapes=input_shapes)
    ctx = PassContext(opt_level=3, disabled=set(CPU_ONLY_PASSES),
                      config={"target": target, "evaluate": evaluate_constants, "options": options})
    mod, _ = _optimize(Module({"main": mod.main}), ctx)  # (the CPU compile's pipeline, these passes off)
    return mod


def gpu_groups(model, target=None, input_shapes: Optional[dict] = None) -> list:
    """``[(name, Function)]``: the fused groups of ``model`` after :func:`gpu_module`."""
    mod = gpu_module(model, target, input_shapes)
    return [(name, fn) for name, fn in mod.functions if name != "main" and isinstance(fn, Function)]


def lower_for_gpu(fn: Function, name: str, target=None) -> PrimFunc:
    """Group ``fn`` scheduled for the ``cuda`` kind (its op's cuda schedule, else the generic
    one: :mod:`ember.kernels.gpu`), lowered and through the loop passes."""
    from ..loop.passes import default_pipeline
    from .group import lower_group

    target = as_target(target or "cuda")
    if not isinstance(target, CudaTarget):
        raise LoweringError(f"{name}: lower_for_gpu needs a cuda target, got {target}")
    from ..kernels.common import plain_computes

    with plain_computes():  # (no CPU's packing or blocking in the computes a GPU schedule tiles)
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


def launch_table(group: GpuGroup) -> dict:
    """What the runtime needs to launch ``group``'s device kernels (see
    :class:`~ember.runtime.gpu_executable.GpuExecutable`): each kernel's parameters as the
    group's buffers (the call's slots, in the group's order), its workspace or a size, and its
    static grid and block."""
    from ..loop.passes.verify_threads import launch_shape
    from ..loop import dtype as dt

    position = {b: i for i, b in enumerate(group.func.buffers)}
    ws_index = {b: j for j, b in enumerate(group.workspace)}
    kernels = []
    for k in group.kernels:
        params = []
        for p in k.params:
            if p in position:
                params.append(["arg", position[p]])
            elif p in ws_index:
                params.append(["ws", ws_index[p]])
            else:
                raise LoweringError(f"kernel {k.name!r}: size parameter {p} -- the cuda target runs static shapes "
                                    f"only; give the model's symbolic dims with input_shapes={{...}}")
        shape = launch_shape(k)
        dims = []
        for which, kinds in (("grid", ("block_x", "block_y", "block_z")), ("block", ("thread_x", "thread_y", "thread_z"))):
            ext = [shape[which].get(kind, IntImm(1)) for kind in kinds]
            if not all(isinstance(e, IntImm) for e in ext):
                raise LoweringError(f"kernel {k.name!r}: its {which} {ext} is symbolic -- the cuda target runs static "
                                    f"shapes only; give the model's symbolic dims with input_shapes={{...}}")
            dims.append([e.value for e in ext])
        kernels.append({"name": k.name, "params": params, "grid": dims[0], "block": dims[1]})
    workspace = []
    for b in group.workspace:
        n = dt.nbytes(b.dtype)
        for d in b.shape:
            if not isinstance(d, IntImm):
                raise LoweringError(f"{group.name}: workspace {b.name} has the symbolic shape {b.shape}")
            n *= d.value
        workspace.append(n)
    return {"kernels": kernels, "workspace": workspace}


class CudaExecutable(GpuExecutable):
    """A model compiled for a GPU (:class:`~ember.runtime.gpu_executable.GpuExecutable`) that
    can also be exported."""

    def export(self, path, cubins: Optional[tuple] = None) -> str:
        """Write the model to ``path`` as one file (:mod:`ember.runtime.gpu_export`): PTX, and
        cubins for the architectures ``cubins`` (default: the target's, where ptxas is found).
        ``ember.load(path)`` runs it on a GPU of that architecture or newer."""
        from ..codegen.nvptx import assemble, ptx, ptxas_path
        from ..runtime.gpu_export import write_gpu_export
        from ..version import __version__

        text = self.ptx or ptx([k for g in self.groups for k in g.kernels], self.target)
        archs = cubins if cubins is not None else ((self.target.arch,) if ptxas_path() else ())
        blobs = {a: assemble(text, a, f"the kernels of {path}") for a in archs}
        manifest = {"ember": __version__, "target": str(self.target), "arch": self.target.arch,
                    "program": self.program, "launches": self.launches}
        return write_gpu_export(path, manifest, text, self.constants, blobs)


def _cpu_kernels(kernels: list) -> dict:
    """Device kernels compiled for the CPU (blocks and threads as loops) for the
    :class:`~ember.runtime.gpu_executable.EmulatedDevice`: name -> native function."""
    from ..driver import build
    from ..loop.passes.threads_on_cpu import threads_on_cpu

    module = build([threads_on_cpu(k) for k in kernels])
    return {k.name: module[k.name]._cfunc for k in kernels}


@dataclasses.dataclass
class CudaPlan:
    """A model compiled for a GPU up to what a device loads: the program, the launches, the
    constants and the PTX (or, for the CPU's emulation, the device kernels themselves). Made
    without a GPU and picklable without ``groups``, so other processes can compile models while
    one process runs them (``bench/gpu.py``)."""

    program: dict
    launches: dict
    constants: list
    ptx: str
    target: CudaTarget
    compile_times: dict
    groups: Optional[list] = None  # (the GpuGroups: their loop programs; None once sent to another process)

    def load(self, device=None) -> "CudaExecutable":
        """The executable on ``device`` (default: the process's GPU 0)."""
        import time

        if device is None:
            from ..runtime.cuda_driver import device as gpu

            device = gpu(0)
        t0 = time.perf_counter()
        if hasattr(device, "load_ptx"):
            ptx = self.ptx
            if not ptx:
                from ..codegen.nvptx import ptx as make_ptx

                ptx = make_ptx([k for g in self.groups for k in g.kernels], self.target)
            functions = device.load_ptx(ptx, [k["name"] for e in self.launches.values() for k in e["kernels"]])
        else:  # (the CPU's emulation: each device kernel compiled for the CPU, its grid as loops)
            if self.groups is None:
                raise LoweringError("an emulated GPU runs the plan's loop programs: make the plan in this process")
            ptx, functions = self.ptx, _cpu_kernels([k for g in self.groups for k in g.kernels])
        exe = CudaExecutable(self.program, self.launches, self.constants, device, functions, ptx=ptx,
                             target=self.target)
        exe.groups = self.groups
        exe.compile_times = {**self.compile_times, "load": time.perf_counter() - t0}
        exe.compile_times["total"] = sum(v for k, v in exe.compile_times.items() if k != "total")
        return exe

    def portable(self) -> "CudaPlan":
        """This plan without its loop programs (what another process needs: PTX and tables)."""
        return dataclasses.replace(self, groups=None)


def _cuda_options(options, kwargs):
    from ..errors import ArgumentError
    from ..options import CompileOptions

    if options is None:
        kwargs.setdefault("target", "cuda")
        options = CompileOptions.create(kwargs.pop("target"), kwargs.pop("opt_level", 3), **kwargs)
    target = options.target
    if not isinstance(target, CudaTarget):
        raise LoweringError(f"compiling for a GPU needs a cuda target, got {target}")
    if options.offload:
        raise ArgumentError(f"target {target}: offload={list(options.offload)} is a CPU option so far; the GPU runs "
                            f"Ember's kernels")
    return options


def plan_cuda(model, options=None, ptx: bool = True, **kwargs) -> CudaPlan:
    """``model`` compiled for a GPU up to what a device loads (:class:`CudaPlan`; no GPU needed).
    ``options`` (or ``kwargs``) as :func:`compile_cuda`'s; ``ptx=False`` leaves the PTX to be
    made at load (an emulated device needs none)."""
    import time

    from ..codegen.nvptx import ptx as make_ptx
    from .generic import generic_kernels
    from .program import Shared, make_program

    options = _cuda_options(options, kwargs)
    target = options.target
    times = {}
    t0 = time.perf_counter()
    mod = gpu_module(model, target, options.input_shape_map, options)
    output_names = None
    if not isinstance(model, Module):
        from ..frontend.onnx.checks import load_model

        output_names = [o.name for o in load_model(model)[0].graph.output]
    times["graph"] = time.perf_counter() - t0
    shared = Shared()
    with generic_kernels("none"):
        program = make_program(mod, shared, output_names=output_names)
    if program.get("symbols") or program.get("controls"):
        raise LoweringError(f"the cuda target runs static shapes without control flow; this model's shapes depend "
                            f"on {program.get('symbols')}: give them with input_shapes={{...}}")
    t1 = time.perf_counter()
    groups, launches = [], {}
    for name, fn in shared.groups:
        func = lower_for_gpu(fn, name, target)
        kernels, workspace = device_kernels(func)
        g = GpuGroup(name, func, kernels, workspace)
        groups.append(g)
        launches[name] = launch_table(g)
    times["lower"] = time.perf_counter() - t1
    text = ""
    if ptx:
        t2 = time.perf_counter()
        text = make_ptx([k for g in groups for k in g.kernels], target)
        times["ptx"] = time.perf_counter() - t2
    return CudaPlan(program, launches, shared.constants, text, target, times, groups)


def compile_cuda(model, options=None, device=None, **kwargs) -> CudaExecutable:
    """``model`` compiled for a GPU: a :class:`CudaExecutable` on ``device`` (default: the
    process's GPU 0; an :class:`~ember.runtime.gpu_executable.EmulatedDevice` runs it on the
    CPU). ``options`` (or ``kwargs``): a :class:`~ember.options.CompileOptions` with a cuda
    target; of its fields the target, ``input_shapes`` and ``name`` apply."""
    options = _cuda_options(options, kwargs)
    if device is None:
        from ..runtime.cuda_driver import device as gpu

        device = gpu(0)  # (before any work: a host without a GPU says so at once)
    return plan_cuda(model, options, ptx=hasattr(device, "load_ptx")).load(device)
