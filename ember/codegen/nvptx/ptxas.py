"""``ptxas``, NVIDIA's PTX assembler, as the check of generated PTX on a host without a GPU.

The ``nvidia-cuda-nvcc`` wheel ships it (``pip install ember[cuda]``); ``EMBER_PTXAS`` names
another one. :func:`assemble` turns PTX into a cubin for an architecture, which is what a GPU
would load, and fails with ptxas's own message where the PTX is wrong.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Optional

from ...errors import CompileError, TargetError


def ptxas_path() -> Optional[str]:
    """The ptxas to use: ``EMBER_PTXAS``, the ``nvidia-cuda-nvcc`` wheel's, or one on PATH."""
    given = os.environ.get("EMBER_PTXAS")
    if given:
        return given
    try:
        import nvidia.cuda_nvcc as nvcc

        for root in list(getattr(nvcc, "__path__", [])):
            path = os.path.join(root, "bin", "ptxas")
            if os.access(path, os.X_OK):
                return path
    except ImportError:
        pass
    return shutil.which("ptxas")


def assemble(ptx_text: str, arch: str, what: str = "kernels") -> bytes:
    """The cubin of ``ptx_text`` for ``arch`` (``"sm_90"``); a :class:`CompileError` with
    ptxas's message where it refuses the PTX, a :class:`TargetError` where there is no ptxas."""
    exe = ptxas_path()
    if exe is None:
        raise TargetError("no ptxas to check PTX with: install the 'cuda' extra (pip install ember[cuda], "
                          "which brings the nvidia-cuda-nvcc wheel) or set EMBER_PTXAS")
    with tempfile.TemporaryDirectory(prefix="ember-ptx-") as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx_text)
        done = subprocess.run([exe, f"-arch={arch}", "-o", out, src], capture_output=True, text=True)
        if done.returncode != 0:
            raise CompileError(f"{what}: ptxas refused the PTX for {arch}: {done.stderr.strip() or done.stdout.strip()}")
        with open(out, "rb") as f:
            return f.read()


__all__ = ["assemble", "ptxas_path"]
