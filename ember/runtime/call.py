"""Specialized argument checking: one generated Python function per kernel.

A generic loop over parameter descriptions costs about a microsecond per array; a function
written out for the kernel's exact parameters (constants inlined, symbolic dimensions as local
variables) costs a third of that, which keeps a call of a small kernel under a few microseconds.
The generated function only *checks and marshals*; every error path calls back into
:class:`~ember.runtime.kernel.Kernel` to build the message.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .ndarray import DATA_OFFSET, NDArray


def _ptr_expr(var: str) -> str:
    if DATA_OFFSET is not None:
        return f"(_vp(_id({var}) + {DATA_OFFSET}).value or 0)"
    return f"{var}.__array_interface__['data'][0]"


def make_call(kernel, prepare: bool = False) -> callable:
    """Generate ``__call__(*args)`` for ``kernel`` (a :class:`Kernel` with parsed parameters);
    with ``prepare``, a function that makes the same checks and returns the native function's
    arguments instead of calling it (a profiler then times the native call alone)."""
    bufs, scalars = kernel._bufs, kernel._scalars
    explicit = [name for name, _, inferred in scalars if not inferred]
    nb = len(bufs)
    ns = {"_ndarray": np.ndarray, "_NDArray": NDArray, "_vp": ctypes.c_void_p.from_address, "_id": id,
          "_cfunc": kernel._cfunc, "_k": kernel, "_ArgErr": ctypes.ArgumentError}
    lines = ["def __call__(*args):",
             f"    if len(args) != {nb + len(explicit)}: _k._bad_count(args)"]
    bound: list = []  # symbolic names known so far, in binding order
    local = {name: f"v_{k}" for k, (name, _, _) in enumerate(scalars)}
    needs_extra = any(not isinstance(s, (int, str)) for b in bufs for s in b.shape) or \
        any(b.explicit_strides for b in bufs)

    def env_expr():
        return "{" + ", ".join(f"{n!r}: {local[n]}" for n in bound) + "}"

    for k, b in enumerate(bufs):
        a = f"a{k}"
        ns[f"D{k}"] = b.dtype
        lines += [f"    {a} = args[{k}]",
                  f"    if type({a}) is not _ndarray:",
                  f"        {a} = {a}._arr if type({a}) is _NDArray else _k._coerce({k}, {a})",
                  f"    if {a}.dtype is not D{k} and {a}.dtype != D{k}: _k._bad_dtype({k}, {a})"]
        if b.static_shape is not None:
            lines.append(f"    if {a}.shape != {b.static_shape!r}: _k._bad_shape({k}, {a}, {{}})")
        else:
            lines.append(f"    s{k} = {a}.shape")
            lines.append(f"    if len(s{k}) != {b.ndim}: _k._bad_shape({k}, {a}, {env_expr()})")
            for d, s in enumerate(b.shape):
                if isinstance(s, int):
                    lines.append(f"    if s{k}[{d}] != {s}: _k._bad_shape({k}, {a}, {env_expr()})")
                elif isinstance(s, str) and s in bound:
                    lines.append(f"    if s{k}[{d}] != {local[s]}: _k._bad_shape({k}, {a}, "
                                 f"{env_expr()}, {s!r})")
                elif isinstance(s, str):
                    lines.append(f"    {local[s]} = s{k}[{d}]")
                    bound.append(s)
        if b.explicit_strides:
            pass  # checked in _k._check_extra once every scalar is known
        elif b.c_strides is not None:
            lines.append(f"    if {a}.strides != {b.c_strides!r} and not {a}.flags.c_contiguous: "
                         f"_k._bad_layout({k}, {a})")
        else:
            lines.append(f"    if not {a}.flags.c_contiguous: _k._bad_layout({k}, {a})")
        lines.append(f"    p{k} = {_ptr_expr(a)}")
        if b.align_mask:
            lines.append(f"    if p{k} & {b.align_mask} and {a}.size: _k._bad_align({k}, p{k})")
        if b.output:
            lines.append(f"    if not {a}.flags.writeable: _k._read_only({k})")
    # Outputs must not be another argument (the code is compiled with noalias pointers). Only
    # identical start addresses are caught; partial overlaps are the caller's responsibility.
    for k, b in enumerate(bufs):
        others = [f"p{j}" for j in range(nb) if j != k]
        if b.output and others:
            lines.append(f"    if p{k} in ({', '.join(others)},) and a{k}.size: "
                         f"_k._aliased({k}, ({', '.join(f'p{j}' for j in range(nb))},))")
    for j, name in enumerate(explicit):
        lines.append(f"    {local[name]} = args[{nb + j}]")
        bound.append(name)
    if needs_extra:
        arrays = "(" + "".join(f"a{k}, " for k in range(nb)) + ")"
        lines.append(f"    _k._check_extra({arrays}, {env_expr()})")
    cargs = [f"p{k}" for k in range(nb)] + [local[name] for name, _, _ in scalars]
    if prepare:
        lines.append(f"    return ({''.join(a + ', ' for a in cargs)})")
    else:
        lines += ["    try:",
                  f"        rc = _cfunc({', '.join(cargs)})",
                  "    except _ArgErr as exc:",
                  f"        _k._bad_scalars(args[{nb}:], exc)",
                  "    if rc: _k._failed(rc)"]
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<ember kernel {kernel.name}>", "exec"), ns)
    fn = ns["__call__"]
    fn.__source__ = src
    return fn
