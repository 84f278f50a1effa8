"""A fused group's kernel made by an offload backend (:mod:`ember.offload`): a compile job's
maker, like :func:`.group.make_group_kernel`, whose object comes from the backend's C source
instead of Ember's code generation. The group's own kernel is lowered first for its
signature -- the buffers, in order, that the program passes -- so the external function has
exactly the ABI and metadata of the kernel it replaces."""
from __future__ import annotations

import time

from ..errors import CompileError
from ..graph.ir import Function

__all__ = ["forget_when_freed", "make_external_kernel"]


def make_external_kernel(payload: tuple, name: str, target) -> tuple:
    """``payload`` = (backend name, group Function, the module defining the backend) ->
    (signature PrimFunc, stats), the stats holding the ``object`` and the metadata the entry
    adds (``backend``). In a compile worker, a backend the user registered is not known until
    its module is imported: it is, by the name the compiling process gave."""
    from ..offload import compile_c
    from .group import lower_group

    backend, fn, module = payload
    assert isinstance(fn, Function)
    t0 = time.perf_counter()
    func = lower_group(fn, name, target).lowered()
    if len(func.buffers) != len(fn.params) + 1:  # (its size arguments, int64 each, follow: the backend's to read)
        raise CompileError(f"{name}: offload backend {backend!r} takes groups of one output; "
                           f"this kernel has {len(func.buffers)} buffers for {len(fn.params)} inputs")
    b = _backend(backend, module)
    src = b.source(fn, func, name)
    t1 = time.perf_counter()
    obj = compile_c(src, f"kernel {name!r} (offloaded to {backend!r})")
    entry = {"backend": backend, "links": list(src.links)}
    if b.stateful:
        entry["forget"] = f"{name}__forget"
    return func, {"object": obj, "entry": entry, "schedule": t1 - t0, "c_compile": time.perf_counter() - t1}


# a backend registered in a script is unknown to the compile workers: its kernels are made here
make_external_kernel.in_process = lambda payload: payload[2] in ("", "__main__")


def backend_module(name: str) -> str:
    """The module that defines backend ``name``'s functions (registering it on import)."""
    from ..offload import get_backend

    return getattr(get_backend(name).source, "__module__", "") or ""


def _backend(name: str, module: str):
    from ..errors import ArgumentError
    from ..offload import get_backend

    try:
        return get_backend(name)
    except ArgumentError:
        if not module or module == "__main__":
            raise
        import importlib

        importlib.import_module(module)
        return get_backend(name)


def forget_when_freed(exe) -> None:
    """Where ``exe`` runs kernels that keep state per constant buffer (``Backend.stateful``:
    oneDNN's reordered weights), have them forget ``exe``'s constants when it is freed: another
    executable's constants may come to the same addresses."""
    import ctypes
    import weakref

    module = getattr(exe, "module", None)
    names = [e["forget"] for e in (module.metadata.get("kernels", []) if module else []) if e.get("forget")]
    if not names:
        return
    lib = ctypes.CDLL(module.path)
    fns = []
    for n in names:
        f = getattr(lib, n)
        f.argtypes, f.restype = [ctypes.c_void_p], None
        fns.append(f)
    ptrs = [c.ctypes.data for c in exe.constants if getattr(c, "ctypes", None) is not None]
    weakref.finalize(exe, _forget, fns, ptrs)


def _forget(fns: list, ptrs: list) -> None:
    for f in fns:
        for p in ptrs:
            f(p)
