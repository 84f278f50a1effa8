"""What an export needs of the machine that loads it, checked before any of its code runs.

An export is native code for one target: run on a CPU without an instruction set it uses
(AVX-512 code on an AVX2 machine), it dies of SIGILL at its first kernel. ``export`` records
the target's architecture, its CPU name, the instruction-set extensions its code may use and
the libraries it links against; ``ember.load`` compares them with the host (from
``/proc/cpuinfo`` and the dynamic loader, without LLVM) and raises :class:`TargetError`
naming what is missing and what the host has.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import platform
from typing import Optional

from ..errors import TargetError

# LLVM's names of the x86 extensions that change what vector code runs, and /proc/cpuinfo's
ISA_FLAGS = {
    "sse4.1": "sse4_1", "sse4.2": "sse4_2", "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c",
    "bmi": "bmi1", "bmi2": "bmi2", "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512cd": "avx512cd", "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16", "avx512vnni": "avx512_vnni", "avxvnni": "avx_vnni",
    "amx-tile": "amx_tile", "amx-bf16": "amx_bf16", "amx-int8": "amx_int8",
}
ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
# the shared libraries kernel libraries link: every one libgomp (-lgomp), offloaded kernels
# their vendor's (ember.offload) -- by link flag, the soname the loader must find, and what
# provides it
LIBRARIES = {"-lgomp": ("libgomp.so.1", "GCC's OpenMP runtime (Debian/Ubuntu: apt install libgomp1)"),
             "-ldnnl": ("libdnnl.so.2", "oneDNN (Debian/Ubuntu: apt install libdnnl2)")}


def requirements_of(target, links: tuple = ()) -> dict:
    """The requirements of code compiled for ``target`` (an :class:`ember.target.Target`) that
    also links ``links`` (``-ldnnl``)."""
    enabled = [f[1:] for f in target.features.split(",") if f.startswith("+")]
    libs = [LIBRARIES[f][0] for f in ("-lgomp", *links) if f in LIBRARIES]
    return {"arch": ARCH_ALIASES.get(target.triple.split("-")[0], target.triple.split("-")[0]),
            "cpu": target.cpu, "features": sorted(f for f in enabled if f in ISA_FLAGS),
            "libraries": sorted(set(libs))}


def host_flags() -> Optional[set]:
    """The host CPU's feature flags from /proc/cpuinfo (None where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def check_requirements(req, path: str, flags: Optional[set] = None, arch: Optional[str] = None) -> None:
    """Raise :class:`TargetError` unless this host meets ``req`` (from an export's manifest)."""
    if not isinstance(req, dict):
        return
    host_arch = arch or ARCH_ALIASES.get(platform.machine().lower(), platform.machine().lower())
    want = req.get("arch")
    if isinstance(want, str) and want != host_arch:
        raise TargetError(f"{path} was compiled for {want} ({req.get('cpu')}); this host is {host_arch}: "
                          f"compile the model on (or for) this machine")
    flags = host_flags() if flags is None else flags
    features = [f for f in req.get("features", []) if isinstance(f, str)]
    if flags is not None and features:
        missing = [f for f in features if ISA_FLAGS.get(f, f) not in flags]
        if missing:
            have = sorted(f for f, flag in ISA_FLAGS.items() if flag in flags)
            raise TargetError(f"{path} was compiled for {req.get('cpu')} and uses {', '.join(missing)}, which "
                              f"this CPU lacks (it has: {', '.join(have) or 'none of the vector extensions'}); "
                              f"compile the model for this machine, or export it with "
                              f"ember.compile(..., target='llvm -mcpu=x86-64-v3') for any AVX2 machine")
    known = dict(LIBRARIES.values())
    for lib in req.get("libraries", []):
        if isinstance(lib, str) and lib in known and not _loadable(lib):
            raise TargetError(f"{path} needs {lib}, which the dynamic loader cannot find: install "
                              f"{known[lib]}")


def _loadable(lib: str) -> bool:
    try:
        ctypes.CDLL(lib)
        return True
    except OSError:
        return ctypes.util.find_library(LIBRARIES[lib]) is not None


__all__ = ["ISA_FLAGS", "check_requirements", "host_flags", "requirements_of"]
