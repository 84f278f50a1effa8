"""Export an Executable as ONE shared library: its kernels, its program and its weights.

The kernels' object file (kept by the build cache) is linked with a small data object made
from an assembly file that ``.incbin`` s the program (JSON) and the weights (raw bytes, each
constant 64-byte aligned), so writing even hundreds of MB of weights costs a file copy, not a
trip through LLVM. :func:`ember.runtime.load.load` maps them back with ctypes, zero-copy.
The C runtime (:mod:`ember.compiler.deploy`) is linked in too, so C programs can run it.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

import numpy as np

from ..codegen.llvm import kernel_links
from ..codegen.llvm.build import find_cc
from ..errors import CompileError
from ..runtime.requirements import requirements_of
from .deploy import deploy_objects
from ..runtime.verify import seal
from ..target import Target

PROGRAM_SYMBOL = "__ember_program"
WEIGHTS_SYMBOL = "__ember_weights"
WEIGHTS_END_SYMBOL = "__ember_weights_end"


def _asm(program_path: str, weights_path: str) -> str:
    def q(p):
        return json.dumps(p)  # a quoted path the assembler accepts
    return f"""    .section .rodata
    .globl {PROGRAM_SYMBOL}
    .balign 64
{PROGRAM_SYMBOL}:
    .incbin {q(program_path)}
    .byte 0
    .globl {WEIGHTS_SYMBOL}
    .balign 64
{WEIGHTS_SYMBOL}:
    .incbin {q(weights_path)}
    .globl {WEIGHTS_END_SYMBOL}
{WEIGHTS_END_SYMBOL}:
    .byte 0
    .section .note.GNU-stack,"",@progbits
"""


def export(exe, path: str) -> str:
    """Write ``exe`` to ``path`` (a ``.so``); returns the path. Load it with ``ember.load``."""
    if exe.module is None:
        raise CompileError("this model has no kernels to export")
    obj = exe.module.path[:-3] + ".o"
    if not os.path.exists(obj):
        raise CompileError(f"the kernels' object file {obj} is missing from the build cache; "
                           f"compile the model again with an empty EMBER_CACHE_DIR to export it")
    program = dict(exe.program)
    layout, offset = [], 0
    for c in exe.constants:
        layout.append({"offset": offset, "shape": list(c.shape), "dtype": str(c.dtype)})
        offset += -(-c.nbytes // 64) * 64
    program["constants"] = layout
    program["output_names"] = [o.name for o in exe.output_info]
    cc = find_cc()
    links = kernel_links(exe.module.metadata)  # (the libraries offloaded kernels call)
    with tempfile.TemporaryDirectory(prefix="ember-export-") as tmp:
        prog_path = os.path.join(tmp, "program.json")
        with open(prog_path, "w") as f:
            json.dump(program, f)
        w_path = os.path.join(tmp, "weights.bin")
        with open(w_path, "wb") as f:
            for c, lay in zip(exe.constants, layout):
                f.seek(lay["offset"])
                f.write(np.ascontiguousarray(c).tobytes())
            f.truncate(offset)
        asm = os.path.join(tmp, "data.s")
        with open(asm, "w") as f:
            f.write(_asm(prog_path, w_path))
        data_o = os.path.join(tmp, "data.o")
        out = os.path.abspath(path)
        deploy = deploy_objects(exe, program, cc, tmp)  # the C runtime (ember.h), for running it without Python
        for cmd in (cc + ["-c", asm, "-o", data_o],
                    cc + ["-shared", "-o", out, obj, data_o, *deploy, *links, "-lgomp", "-lm"]):
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise CompileError(f"export failed ({' '.join(cmd)}):\n{res.stderr.strip()}")
    seal(out, {"requires": requirements_of(exe.target or Target.host(), links)})
    return out


__all__ = ["export"]
