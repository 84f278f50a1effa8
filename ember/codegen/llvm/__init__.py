"""LLVM backend: compile loop-IR PrimFuncs into a shared library and load it.

``build(funcs)`` generates one LLVM module for all ``funcs``, optimizes it at O3, links it with
the system C compiler and loads it as an :class:`ember.runtime.Module`; results are cached on
disk (``EMBER_CACHE_DIR``, default ``~/.cache/ember``) so rebuilding the same kernels is a
dlopen. ``export_library`` writes the shared library somewhere; ``ember.runtime.load_module``
loads it again with nothing but ctypes and numpy.
"""
from __future__ import annotations

import os
import sys
from typing import Iterable, Union

from ...errors import CompileError
from ...loop.stmt import PrimFunc
from ...target import Target
from . import build as _build
from .codegen import emit_module

__all__ = ["build", "build_made", "export_library", "emit_llvm"]


def _as_list(funcs) -> list:
    if isinstance(funcs, PrimFunc):
        return [funcs]
    funcs = list(funcs)
    if not funcs:
        raise CompileError("build() needs at least one PrimFunc")
    return funcs


def _show(funcs: list) -> None:
    for f in funcs:
        try:
            text = f.script()
        except Exception:  # the printer is optional; fall back to repr
            text = repr(f)
        print(f"=== loop program {f.name} ===\n{text}", file=sys.stderr)


def emit_llvm(funcs: Union[PrimFunc, Iterable[PrimFunc]], target: Target | None = None,
              name: str = "module") -> str:
    """The unoptimized LLVM IR text for ``funcs`` (what the cache key hashes)."""
    target = target or Target.host()
    module, _ = emit_module(_as_list(funcs), target.triple, _build.data_layout(target), name,
                            target.feature_set)
    return str(module)


def build(funcs: Union[PrimFunc, Iterable[PrimFunc]], target: Target | None = None,
          name: str = "module", stats: dict | None = None, passes: bool = False):
    """Compile ``funcs`` into one shared library and load it.

    Each kernel is its own object, cached by content and compiled in parallel worker processes
    when several are new (``ember.codegen.llvm.objects``). ``stats`` (if given) gets per-kernel
    seconds of LLVM IR emission, optimization and code generation, and ``"(link)"``. With
    ``passes`` the funcs are as lowered: each kernel's job runs the loop passes first (in the
    compile workers, beside LLVM).
    Returns an :class:`ember.runtime.Module`; ``module["kernel_name"](*arrays)`` runs a kernel.
    Raises :class:`ember.errors.CompileError` when code generation, LLVM or the linker fails.
    """
    from .objects import compile_objects

    funcs = _as_list(funcs)
    target = target or Target.host()
    if _build.debug_level() >= 2:
        from ...loop.passes import default_pipeline

        _show([default_pipeline(f) for f in funcs] if passes else funcs)
    objs, key, metadata = compile_objects(funcs, target, stats, passes=passes)
    return _library(objs, key, metadata, [f.name for f in funcs], stats)


def build_made(kernels: list, target: Target | None = None, stats: dict | None = None):
    """Compile kernels whose loop programs are made in their compile jobs into one shared
    library and load it: like :func:`build`, for ``(name, key text, make, payload)`` entries
    (see :func:`.objects.compile_made_objects`; the compiler's fused groups, whose computes,
    schedule and lowering then run on every core too). ``stats`` also gets what ``make``
    reports."""
    from .objects import compile_made_objects

    target = target or Target.host()
    objs, key, metadata = compile_made_objects(kernels, target, stats)
    return _library(objs, key, metadata, [k[0] for k in kernels], stats)


def kernel_links(metadata) -> tuple:
    """The link flags the kernels of ``metadata`` (its JSON text or dict) ask for: the
    libraries offloaded kernels call, each once, in order."""
    import json

    meta = json.loads(metadata) if isinstance(metadata, str) else (metadata or {})
    return tuple(dict.fromkeys(f for e in meta.get("kernels", []) for f in e.get("links", [])))


def _library(objs: list, key: str, metadata: str, names: list, stats: dict | None):
    """The library of ``objs`` (linked now, or found in the cache by ``key``), loaded."""
    import time

    from ...runtime.module import Module

    path = _build.cached_library(key)
    if path is None:
        what = "kernel " + ", ".join(repr(n) for n in names[:4]) + (" ..." if len(names) > 4 else "")
        t0 = time.perf_counter()
        path = _build.link(objs, key, what, kernel_links(metadata))
        _build.write_sidecar(key, metadata)
        if stats is not None:
            stats["(link)"] = {"link": time.perf_counter() - t0}
        from ...cache_size import maybe_prune

        maybe_prune()  # (the cache grew: at most hourly, the least recently used entries go)
    elif _build.debug_level() >= 3:
        print(f"=== cache hit: {path} ===", file=sys.stderr)
    return Module(path, metadata=metadata)


def export_library(funcs_or_module, path: Union[str, os.PathLike], target: Target | None = None) -> str:
    """Write a shared library holding ``funcs_or_module`` (PrimFuncs or a built Module) to ``path``.

    The file can be loaded later with :func:`ember.runtime.load_module` (no llvmlite needed).
    """
    from ...runtime.module import Module

    mod = funcs_or_module if isinstance(funcs_or_module, Module) else build(funcs_or_module, target)
    return mod.export(path)
