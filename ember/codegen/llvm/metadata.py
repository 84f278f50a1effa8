"""The JSON description of a module's kernels, embedded in the shared library.

The runtime reads it back (``ember.runtime.module``) to check and marshal arguments without
the loop IR or llvmlite. Shapes and strides are lists whose entries are an int, the name of a
scalar parameter, a small expression ``["Mul", a, b]`` over those, or ``null`` (not checked).
"""
from __future__ import annotations

import json

from ...loop import dtype as dt
from ...loop.expr import IntImm, Var

METADATA_SYMBOL = "__ember_metadata"
FORMAT_VERSION = 1
_EXPR_OPS = ("Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Min", "Max",
             "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or")  # ember.runtime.shapes.OPS


def dim_to_json(e):
    """A shape/stride expression as JSON (``None`` when the runtime cannot evaluate it); see
    :mod:`ember.runtime.shapes`."""
    if isinstance(e, IntImm):
        return int(e.value)
    if isinstance(e, Var):
        return e.name
    name = type(e).__name__
    if name in _EXPR_OPS:
        a, b = dim_to_json(e.a), dim_to_json(e.b)
        if a is not None and b is not None:
            return [name, a, b]
    return None


def kernel_metadata(func, scalars: list) -> dict:
    """Everything the runtime needs to call ``func``: parameter names, dtypes, shapes, alignment,
    and which buffers it writes (those must be writable and distinct from the other arguments)."""
    from ...loop.stmt import Store
    from ...loop.visit import walk

    written = {n.buffer.name for n in walk(func.body) if isinstance(n, Store)}
    params = []
    for buf in func.buffers:
        params.append({
            "kind": "buffer", "name": buf.name, "dtype": buf.dtype, "output": buf.name in written,
            "shape": [dim_to_json(s) for s in buf.shape],
            "strides": None if buf.strides is None else [dim_to_json(s) for s in buf.strides],
            "align": max(buf.align, dt.nbytes(buf.dtype)),
        })
    for v in scalars:
        params.append({"kind": "scalar", "name": v.name, "dtype": v.dtype,
                       "abi": "double" if dt.is_float(v.dtype) else "int64"})
    entry = {"name": func.name, "params": params}
    from .profile import layout_of

    layout = layout_of(func)
    if layout is not None:  # where the counters are (read by ember.runtime.loop_counters)
        entry["profile"] = layout.as_json()
    return entry


def module_metadata(entries: list) -> str:
    from ...version import __version__

    return json.dumps({"format": FORMAT_VERSION, "ember_version": __version__, "kernels": entries},
                      separators=(",", ":"), sort_keys=True)


def add_metadata_global(module, entries: list) -> str:
    """Embed the metadata of ``entries`` in ``module`` as a constant C string; returns the JSON."""
    from llvmlite import ir

    from . import types as T

    text = module_metadata(entries)
    data = bytearray(text.encode("utf-8") + b"\0")
    g = ir.GlobalVariable(module, ir.ArrayType(T.I8, len(data)), METADATA_SYMBOL)
    g.global_constant = True
    g.initializer = ir.Constant(ir.ArrayType(T.I8, len(data)), data)
    return text
