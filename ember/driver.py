"""The kernel front door: schedule (or PrimFuncs) in, loaded native module out."""
from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Optional, Sequence, Union

from .config import cache_dir, debug_level
from .loop.lower import lower
from .loop.passes import default_pipeline
from .loop.schedule import Schedule
from .loop.stmt import PrimFunc

# Bump when the loop passes change what they produce, so the lowered-program index of the cache
# (which skips them) stops matching stale libraries.
PIPELINE_VERSION = "1"


def lower_kernel(sch: Schedule, args: Sequence, name: str = "kernel", attrs: Optional[dict] = None) -> PrimFunc:
    """Lower a schedule and run the loop passes a build runs (unroll, vectorize, simplify)."""
    return default_pipeline(lower(sch, args, name, attrs))


def build(kernels: Union[Schedule, PrimFunc, Sequence], args: Optional[Sequence] = None,
          name: str = "kernel", target=None):
    """Compile kernels to native code and load them.

    ``kernels`` is a schedule (with ``args``, the tensors that become its parameters), a
    PrimFunc, or a list of PrimFuncs and ``(schedule, args, name)`` triples built into one
    module. ``target`` is the host CPU by default, or a Target or a string such as
    ``"llvm -mcpu=skylake-avx512"``. Returns an :class:`ember.runtime.Module`;
    ``module[name](*arrays)`` runs a kernel.

    Built libraries are cached by content. A rebuild of the same lowered programs for the same
    target skips the loop passes, LLVM and the linker: it is an index lookup and a ``dlopen``.
    """
    from .kernels.common import host
    from .runtime.module import Module

    target = host(target)
    if isinstance(kernels, Schedule):
        kernels = [(kernels, args, name)]
    elif isinstance(kernels, PrimFunc):
        kernels = [kernels]
    lowered = [k if isinstance(k, PrimFunc) else lower(k[0], k[1], k[2]) for k in kernels]
    key = _index_key(lowered, target)
    hit = _index_lookup(key)
    if hit is not None:
        if debug_level() >= 2:  # the program is still shown when its library comes from the cache
            import sys

            for f in lowered:
                print(f"=== loop program {f.name} (cached) ===\n{default_pipeline(f).script()}", file=sys.stderr)
        return Module(hit)
    from .codegen.llvm import build as llvm_build  # LLVM is loaded only on a cache miss

    funcs = [default_pipeline(f) for f in lowered]
    mod = llvm_build(funcs, target=target, name=funcs[0].name if len(funcs) == 1 else name)
    _index_store(key, mod.path)
    return mod


def _index_key(funcs: list, target) -> str:
    from . import __version__

    h = hashlib.sha256()
    for part in [f.script() for f in funcs] + [target.triple, target.cpu, target.features,
                                                __version__, PIPELINE_VERSION]:
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def _index_dir() -> str:
    d = os.path.join(cache_dir(), "index")
    os.makedirs(d, exist_ok=True)
    return d


def _index_lookup(key: str) -> Optional[str]:
    try:
        with open(os.path.join(_index_dir(), key)) as f:
            path = f.read().strip()
    except OSError:
        return None
    # the object file is needed to export a model: an entry without it is rebuilt
    return path if os.path.exists(path) and os.path.exists(path[:-3] + ".o") else None


def _index_store(key: str, library: str) -> None:
    d = _index_dir()
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".idx-")
    with os.fdopen(fd, "w") as f:
        f.write(library)
    os.replace(tmp, os.path.join(d, key))
