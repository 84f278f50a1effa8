"""The kernel front door: schedule (or PrimFuncs) in, loaded native module out."""
from __future__ import annotations

import hashlib
from typing import Optional, Sequence, Union

from .codegen.index import index_lookup, index_store
from .config import debug_level, opt_level
from .loop.lower import lower
from .loop.passes import default_pipeline
from .loop.schedule import Schedule
from .loop.stmt import PrimFunc
from .loop.visit import loop_nest
from .version import source_digest


def lower_kernel(sch: Schedule, args: Sequence, name: str = "kernel", attrs: Optional[dict] = None) -> PrimFunc:
    """Lower a schedule and run the loop passes a build runs (unroll, vectorize, simplify)."""
    return default_pipeline(lower(sch, args, name, attrs))


def build(kernels: Union[Schedule, PrimFunc, Sequence], args: Optional[Sequence] = None,
          name: str = "kernel", target=None, stats: Optional[dict] = None):
    """Compile kernels to native code and load them.

    ``kernels`` is a schedule (with ``args``, the tensors that become its parameters), a
    PrimFunc, or a list of PrimFuncs and ``(schedule, args, name)`` triples built into one
    module. ``target`` is the host CPU by default, or a Target or a string such as
    ``"llvm -mcpu=skylake-avx512"``. Returns an :class:`ember.runtime.Module`;
    ``module[name](*arrays)`` runs a kernel.

    Built libraries are cached by content. A rebuild of the same lowered programs for the same
    target skips the loop passes, LLVM and the linker: it is an index lookup and a ``dlopen``.

    ``stats`` (if given) gets, per kernel name, the seconds of each phase (``lower``,
    ``loop_passes``, ``llvm_emit``, ``llvm_opt``, ``llvm_codegen``), the loop nest's size
    (``loops``, ``depth``) and whether it came from the cache; ``"(link)"`` the link time.
    """
    import time

    from .kernels.common import host
    from .runtime.module import Module

    target = host(target)
    if isinstance(kernels, Schedule):
        kernels = [(kernels, args, name)]
    elif isinstance(kernels, PrimFunc):
        kernels = [kernels]
    lowered = []
    for k in kernels:
        t0 = time.perf_counter()
        f = k if isinstance(k, PrimFunc) else lower(k[0], k[1], k[2])
        lowered.append(f)
        if stats is not None:
            stats.setdefault(f.name, {}).update(lower=time.perf_counter() - t0, cached=True, **loop_nest(f))
    key = _index_key(lowered, target)
    hit = index_lookup(key)
    if hit is not None:
        if debug_level() >= 2:  # the program is still shown when its library comes from the cache
            import sys

            for f in lowered:
                print(f"=== loop program {f.name} (cached) ===\n{default_pipeline(f).script()}", file=sys.stderr)
        return Module(hit)
    from .codegen.llvm import build as llvm_build  # LLVM is loaded only on a cache miss

    # the loop passes run in the compile jobs, beside LLVM, on every core
    mod = llvm_build(lowered, target=target, name=lowered[0].name if len(lowered) == 1 else name, stats=stats,
                     passes=True)
    index_store(key, mod.path)
    return mod


def _index_key(funcs: list, target) -> str:
    # the sources' digest: the code a library holds besides its kernels (the program runner,
    # the metadata) and how kernels are emitted change with Ember, not with the loop programs
    h = hashlib.sha256()
    for part in [f.script() for f in funcs] + [target.triple, target.cpu, target.features, source_digest(),
                                               str(opt_level())]:
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()
