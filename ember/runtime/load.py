"""Load an exported model (``ember.load("model.so")``): kernels, program and weights from one
shared library, with ctypes and numpy only. The weights stay in the library's mapped pages."""
from __future__ import annotations

import ctypes
import json
import os

import numpy as np

from ..errors import EmberError
from .executable import Executable, TensorInfo
from .module import Module

PROGRAM_SYMBOL = "__ember_program"
WEIGHTS_SYMBOL = "__ember_weights"
WEIGHTS_END_SYMBOL = "__ember_weights_end"


def load(path: str) -> Executable:
    """The Executable exported to ``path`` by ``exe.export(path)``."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise EmberError(f"{path}: no such file")
    module = Module(path)
    lib = module._lib
    try:
        prog = ctypes.c_char.in_dll(lib, PROGRAM_SYMBOL)
        start = ctypes.addressof(ctypes.c_char.in_dll(lib, WEIGHTS_SYMBOL))
        end = ctypes.addressof(ctypes.c_char.in_dll(lib, WEIGHTS_END_SYMBOL))
    except ValueError:
        raise EmberError(f"{path} is an Ember kernel library but not an exported model "
                         f"(no program inside); load it with ember.runtime.load_module") from None
    program = json.loads(ctypes.string_at(ctypes.addressof(prog)).decode("utf-8"))
    blob = np.ctypeslib.as_array((ctypes.c_uint8 * max(1, end - start)).from_address(start))
    constants = []
    for c in program["constants"]:
        dt = np.dtype(c["dtype"])
        n = int(np.prod(c["shape"], dtype=np.int64))
        constants.append(blob[c["offset"]: c["offset"] + n * dt.itemsize].view(dt).reshape(c["shape"]))
    exe = Executable(module, program, constants)
    names = program.get("output_names")
    if names:
        exe.output_info = [TensorInfo(n, i.shape, i.dtype) for n, i in zip(names, exe.output_info)]
    return exe


__all__ = ["load"]
