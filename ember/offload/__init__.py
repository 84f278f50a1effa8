"""Offload: fused groups run by kernels another compiler makes (a vendor library's, through C).

A *backend* says which fused groups it takes (``matches``: a predicate over the group's graph
``Function`` -- its anchor op, attributes, dtypes, layouts and the epilogue ops it can fuse)
and writes, for each, C source of a function with Ember's kernel ABI: the group's inputs then
outputs as pointers, then its size arguments, returning 0 (``source``). The compiler compiles
that source with the system's C compiler into the kernel's object (:func:`compile_c`) in
place of its own code generation; the program, the runtime, exports, the profiler and
concurrent runs call it like any kernel, on the same buffers (no copy at the boundary). See
``docs/external_kernels.md`` for the design this is the first part of.

``ember.compile(model, offload=["reference"])`` sends every group a named backend takes to it.
:mod:`.reference` is a backend written from scratch: a direct convolution in plain C.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
from typing import Callable, Optional

from ..errors import ArgumentError, CompileError, TargetError

__all__ = ["Backend", "ExternalSource", "backend_for", "backend_names", "compile_c", "get_backend", "int8_channels_last",
           "layout_block", "register_backend"]


@dataclasses.dataclass(frozen=True)
class ExternalSource:
    """A kernel as a backend writes it: C ``text`` defining the kernel's function, the flags it
    compiles with and the libraries it links (``-ldnnl``)."""

    text: str
    cflags: tuple = ()
    links: tuple = ()


@dataclasses.dataclass(frozen=True)
class Backend:
    """``matches(group Function) -> bool``; ``source(group Function, signature PrimFunc, kernel
    name) -> ExternalSource`` (the PrimFunc is Ember's own kernel of the group: its buffers, in
    order, are the function's parameters); ``unavailable() -> reason or None`` (a library
    missing on this host); ``version``: part of the kernels' cache key; ``block(target)``: the
    channel block of the blocked layout its kernels run on, which the model's blocked regions
    then take (None: Ember's choice)."""

    name: str
    matches: Callable
    source: Callable
    unavailable: Callable = lambda: None
    version: str = "1"
    doc: str = ""
    block: Callable = lambda target: None  # the channel block its kernels read, for block_layout
    # the packed dots (``dot_u8i8x4``, ...) of the quantized convs its kernels take, which read
    # their data channels last, one block of all the channels (oneDNN 2's fast int8
    # convolutions take nhwc only: blocked data ran its reference code); a conv on another dot
    # (an AVX2 host's int16 pairs) keeps Ember's blocks
    int8_channels_last: tuple = ()
    # its kernels keep state per constant buffer (weights reordered on first sight) and export
    # ``<kernel>__forget(const void *)``, which an executable calls for its constants when freed
    stateful: bool = False


_BACKENDS: dict = {}


def register_backend(backend: Backend) -> Backend:
    """Make ``backend`` available to ``ember.compile(..., offload=[backend.name])``."""
    _BACKENDS[backend.name] = backend
    return backend


def _builtin() -> None:
    from . import onednn, reference  # noqa: F401  (each registers itself)


def backend_names() -> list:
    _builtin()
    return sorted(_BACKENDS)


def get_backend(name: str) -> Backend:
    """The backend called ``name``: an ArgumentError naming the known ones if there is none, a
    TargetError saying what is missing where it cannot run here."""
    _builtin()
    b = _BACKENDS.get(name)
    if b is None:
        raise ArgumentError(f"no offload backend {name!r}; the backends are {', '.join(backend_names())} "
                            f"(or offload='auto' alone: each that this host has, where it measures faster)")
    why = b.unavailable()
    if why:
        raise TargetError(f"the offload backend {name!r} cannot run here: {why}")
    return b


def compile_c(source: ExternalSource, what: str) -> bytes:
    """``source`` compiled by the system's C compiler into an object (position-independent,
    for the kernels' shared library)."""
    from ..codegen.llvm.build import find_cc

    cc = find_cc()
    with tempfile.TemporaryDirectory(prefix="ember-offload-") as d:
        src, obj = os.path.join(d, "k.c"), os.path.join(d, "k.o")
        with open(src, "w") as f:
            f.write(source.text)
        cmd = [*cc, "-c", "-O2", "-fPIC", "-std=c11", *source.cflags, src, "-o", obj]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise CompileError(f"{what}: the C compiler rejected the offloaded kernel ({' '.join(cmd[:1])}): "
                               f"{r.stderr.strip()[-1500:]}")
        with open(obj, "rb") as f:
            return f.read()


def layout_block(names: tuple, target) -> Optional[int]:
    """The channel block the first of the backends ``names`` that has one wants, or None."""
    for n in names:
        b = get_backend(n).block(target)
        if b:
            return b
    return None


def int8_channels_last(names: tuple) -> tuple:
    """The packed dots of the quantized convs the backends ``names`` take channels last."""
    return tuple(sorted({d for n in names for d in get_backend(n).int8_channels_last}))


def backend_for(fn, names: tuple) -> Optional[str]:
    """The first of the backends ``names`` that takes group ``fn``, or None."""
    for n in names:
        if get_backend(n).matches(fn):
            return n
    return None
