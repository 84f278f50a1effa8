"""Load an exported model (``ember.load("model.so")``): kernels, program and weights from one
shared library, with ctypes and numpy only. The weights stay in the library's mapped pages.

Nothing from the file is used before it is checked (:mod:`ember.runtime.verify`): the
integrity trailer before ``dlopen``, then the kernel metadata, the constant table and the
program, each field against the others. A library is native code and loading it runs it:
these checks catch damage, not malice.
"""
from __future__ import annotations

import ctypes
import json
import os

import numpy as np

from ..errors import EmberError, ModelError
from .executable import Executable, TensorInfo
from .module import Module
from .ndarray import numpy_dtype
from .requirements import check_requirements
from .verify import check_seal, verify_constant_layout

PROGRAM_SYMBOL = "__ember_program"
WEIGHTS_SYMBOL = "__ember_weights"
WEIGHTS_END_SYMBOL = "__ember_weights_end"


def load(path: str, cls: type = Executable) -> Executable:
    """The Executable exported to ``path`` by ``exe.export(path)``, as a ``cls`` (``ember.load``
    gives the compiler's, which can also profile and export).

    Raises :class:`ModelError` for a truncated, corrupted or malformed export, before any
    offset from it is used, and :class:`TargetError` when this host lacks what its code needs
    (an instruction set such as AVX-512, the OpenMP runtime), before any of its code runs."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise EmberError(f"{path}: no such file")
    from .gpu_export import is_gpu_export, load_gpu

    if is_gpu_export(path):  # (a model compiled for a GPU: an archive, not a library)
        return load_gpu(path)
    manifest = check_seal(path)
    check_requirements(manifest.get("requires"), path)  # before any of its code runs
    module = Module(path)
    lib = module._lib
    try:
        prog = ctypes.c_char.in_dll(lib, PROGRAM_SYMBOL)
        start = ctypes.addressof(ctypes.c_char.in_dll(lib, WEIGHTS_SYMBOL))
        end = ctypes.addressof(ctypes.c_char.in_dll(lib, WEIGHTS_END_SYMBOL))
    except ValueError:
        raise EmberError(f"{path} is an Ember kernel library but not an exported model "
                         f"(no program inside); load it with ember.runtime.load_module") from None
    if end < start:
        raise ModelError(f"{path}: the weights end before they start")
    try:
        program = json.loads(ctypes.string_at(ctypes.addressof(prog)).decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError is one
        raise ModelError(f"{path}: its program is not JSON ({exc})") from None
    if not isinstance(program, dict):
        raise ModelError(f"{path}: its program is not a JSON object")
    layout = verify_constant_layout(program.get("constants", []), end - start, f"{path}: program")
    blob = np.ctypeslib.as_array((ctypes.c_uint8 * max(1, end - start)).from_address(start))
    constants = []
    for off, shape, dtype in layout:
        dt = numpy_dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64))
        constants.append(blob[off: off + n * dt.itemsize].view(dt).reshape(shape))
    exe = cls(module, program, constants, where=f"{path}: program")
    names = program.get("output_names")
    if names:
        exe.output_info = [TensorInfo(n, i.shape, i.dtype) for n, i in zip(names, exe.output_info)]
    exe.weights_mapped = True
    return exe


__all__ = ["load"]
