"""A model compiled for a GPU as one file, and loading it back (``ember.load``).

The file is a zip archive (each member checked by its CRC when read): ``manifest.json`` (the
format, the Ember that wrote it, the target, the program and the launches), ``kernels.ptx`` (the
device kernels as PTX, which the driver compiles for whatever GPU loads them), the kernels as
cubins for the architectures ptxas was asked for at export (``kernels.sm_90.cubin``: loaded
without the driver's compile where the GPU is exactly that architecture), and the constants
(``constants/<i>.npy``).

Loading checks the file before anything of it is used: a damaged or malformed archive is a
:class:`ModelError`; a host without the CUDA bindings, the driver or a GPU, or a GPU older than
the architecture the model was compiled for, is a :class:`TargetError` naming what is missing.
"""
from __future__ import annotations

import io
import json
import os
import zipfile
from typing import Optional

import numpy as np

from ..errors import ModelError, TargetError
from ..target import CudaTarget

FORMAT = "ember-gpu-export"
MAGIC = b"PK\x03\x04"  # (a zip archive; a CPU export is an ELF shared library)

__all__ = ["FORMAT", "is_gpu_export", "load_gpu", "write_gpu_export"]


def is_gpu_export(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == MAGIC


def write_gpu_export(path: str, manifest: dict, ptx: str, constants: list, cubins: Optional[dict] = None) -> str:
    """Write the archive (see the module doc); ``cubins``: architecture -> cubin bytes."""
    tmp = os.fspath(path) + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps({**manifest, "format": FORMAT, "constants": len(constants),
                                                "cubins": sorted(cubins or {})}))
        z.writestr("kernels.ptx", ptx)
        for arch, blob in (cubins or {}).items():
            z.writestr(f"kernels.{arch}.cubin", blob)
        for i, c in enumerate(constants):
            buf = io.BytesIO()
            np.save(buf, np.ascontiguousarray(c), allow_pickle=False)
            z.writestr(f"constants/{i}.npy", buf.getvalue())
    os.replace(tmp, path)
    return os.fspath(path)


def _capability(arch, path: str) -> tuple:
    """``(9, 0)`` for ``"sm_90"`` (:attr:`CudaTarget.compute_capability`); a ModelError for a
    manifest's malformed one."""
    try:
        return CudaTarget(str(arch)).compute_capability
    except (ValueError, IndexError):
        raise ModelError(f"{path}: its manifest names no CUDA architecture ({arch!r})") from None


def load_gpu(path: str, device=None):
    """The :class:`~ember.runtime.gpu_executable.GpuExecutable` exported to ``path``, on
    ``device`` (default: the process's GPU 0)."""
    from .gpu_executable import GpuExecutable

    try:
        z = zipfile.ZipFile(path)
        manifest = json.loads(z.read("manifest.json").decode("utf-8"))
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ModelError(f"{path}: a zip archive but not a GPU model exported by Ember")
        for key in ("program", "launches", "target", "arch"):
            if key not in manifest:
                raise ModelError(f"{path}: its manifest has no {key!r}")
        ptx = z.read("kernels.ptx").decode("utf-8")
        cubins = {a: z.read(f"kernels.{a}.cubin") for a in manifest.get("cubins", [])}
        constants = [np.load(io.BytesIO(z.read(f"constants/{i}.npy")), allow_pickle=False)
                     for i in range(int(manifest.get("constants", 0)))]
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as e:  # (a CRC mismatch is BadZipFile)
        raise ModelError(f"{path}: a damaged or incomplete GPU export ({type(e).__name__}: {e})") from None
    if device is None:
        from .cuda_driver import device as gpu

        try:
            device = gpu(0)
        except TargetError as e:
            raise TargetError(f"{path} is a model compiled for {manifest['target']}, and this host cannot run it: "
                              f"{e}") from None
    arch = getattr(device, "arch", None)
    if arch is not None and _capability(arch, path) < _capability(manifest["arch"], path):
        raise TargetError(f"{path} was compiled for {manifest['arch']}; this GPU ({device.name}) is {arch}: compile "
                          f"the model for it (target='cuda -arch={arch}')")
    names = [k["name"] for entry in manifest["launches"].values() for k in entry["kernels"]]
    # (a cubin of this GPU's own architecture skips the driver's compile of the PTX)
    functions = device.load_cubin(cubins[arch], names) if arch in cubins else device.load_ptx(ptx, names)
    return GpuExecutable(manifest["program"], manifest["launches"], constants, device, functions, ptx=ptx,
                         target=manifest["target"])
