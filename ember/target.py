"""The machines Ember generates code for, as *kinds*: ``llvm`` (an x86 CPU: triple, CPU,
features, vector width, cores and caches) and ``cuda`` (an NVIDIA GPU: architecture and the
limits of a thread block).

A kind owns its schedule table (``set_schedule(op, kind, fn)``), its code generator and its
runtime; the layers above them name no kind. Schedules read a target's widths and limits to
pick tile shapes; the CPU's code generator reads the triple, CPU and features to create an
LLVM target machine. :func:`as_target` turns what a user passes (None, a string, a target)
into one.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import shlex
from typing import ClassVar, Union

_SYS_CACHE = "/sys/devices/system/cpu/cpu0/cache"
# Used when sysfs is unavailable (containers, non-Linux): typical current x86 server values.
_DEFAULT_CACHES = {"l1d": 32 * 1024, "l2": 1024 * 1024, "l3": 32 * 1024 * 1024}


@dataclasses.dataclass(frozen=True)
class Target:
    """An x86 CPU, the ``llvm`` kind (immutable, hashable; part of the compile-cache key)."""

    kind: ClassVar[str] = "llvm"

    triple: str
    cpu: str
    features: str = ""
    vector_bits: int = 128
    cores: int = 1
    l1d_bytes: int = _DEFAULT_CACHES["l1d"]
    l2_bytes: int = _DEFAULT_CACHES["l2"]
    l3_bytes: int = _DEFAULT_CACHES["l3"]

    @property
    def fp32_lanes(self) -> int:
        """float32 lanes in one vector register."""
        return self.vector_bits // 32

    def lanes(self, dtype_bits: int) -> int:
        """Lanes of a ``dtype_bits``-wide element in one vector register."""
        return max(1, self.vector_bits // max(8, dtype_bits))

    def has_feature(self, name: str) -> bool:
        return f"+{name}" in self.features.split(",")

    @property
    def feature_set(self) -> frozenset:
        """The features this target's code may use: ``{"avx2", "avx512bf16", ...}``."""
        return frozenset(f[1:] for f in self.features.split(",") if f.startswith("+"))

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def host() -> "Target":
        """The machine this process runs on.

        Asking LLVM loads its whole library (~25 ms), so the answer is remembered in the cache
        directory, keyed by the CPU's own description: a build served from the compile cache
        then needs no LLVM at all."""
        key_file = _host_key_file()
        if key_file is not None:
            try:
                with open(key_file) as f:
                    triple, cpu, features = json.load(f)
                return _make(triple, cpu, features)
            except (OSError, ValueError):
                pass
        import llvmlite.binding as llvm

        cpu = llvm.get_host_cpu_name()
        try:
            features = llvm.get_host_cpu_features().flatten()
        except RuntimeError:  # some platforms cannot report features
            features = ""
        triple = llvm.get_process_triple()
        if key_file is not None:
            try:
                tmp = f"{key_file}.{os.getpid()}.tmp"
                with open(tmp, "w") as f:
                    json.dump([triple, cpu, features], f)
                os.replace(tmp, key_file)
            except OSError:
                pass  # a read-only cache only costs the LLVM lookup next time
        return _make(triple, cpu, features)

    @staticmethod
    def from_string(spec: str) -> "Union[Target, CudaTarget]":
        """Parse ``"llvm -mcpu=skylake-avx512 -mattr=+avx2 -mtriple=..."`` (host defaults), or
        a GPU, ``"cuda -arch=sm_90"`` (:class:`CudaTarget`).

        ``-mcpu`` alone selects that CPU's default feature set (the host's features are dropped,
        so the code does not claim instructions the named CPU lacks).
        """
        words = shlex.split(spec)
        if words and words[0] == "cuda":
            return CudaTarget.from_words(words[1:], spec)
        if words and words[0] in ("llvm", "cpu"):
            words = words[1:]
        elif words and not words[0].startswith("-"):
            from .errors import TargetError

            raise TargetError(f"unknown target kind {words[0]!r} in {spec!r}: the kinds are 'llvm' (a CPU, the "
                              f"default) and 'cuda' (an NVIDIA GPU, 'cuda -arch=sm_90')")
        host = Target.host()
        triple, cpu, features = host.triple, host.cpu, host.features
        opts = {}
        for w in words:
            key, sep, value = w.partition("=")
            if not sep or key not in ("-mcpu", "-mattr", "-mtriple", "-cores"):
                from .errors import EmberError

                raise EmberError(f"bad target option {w!r} in {spec!r}: expected -mcpu=, -mattr=, "
                                 f"-mtriple= or -cores=")
            opts[key] = value
        if "-mtriple" in opts:
            triple = opts["-mtriple"]
        if "-mcpu" in opts and opts["-mcpu"] != cpu:
            cpu, features = opts["-mcpu"], _cpu_default_features(opts["-mcpu"])
        if "-mattr" in opts:
            features = _merge_features(features, opts["-mattr"])
        t = _make(triple, cpu, features)
        if "-cores" in opts:
            t = dataclasses.replace(t, cores=int(opts["-cores"]))
        return t

    def __str__(self) -> str:
        return f"llvm -mtriple={self.triple} -mcpu={self.cpu}"

    def missing_on_host(self) -> list:
        """The features this target's code may use that the host CPU lacks (``["avx512f"]``):
        code compiled for it cannot run here."""
        host = Target.host()
        if self.triple.split("-")[0] != host.triple.split("-")[0]:
            return [self.triple.split("-")[0]]
        have = {f[1:] for f in host.features.split(",") if f.startswith("+")}
        return sorted(f[1:] for f in self.features.split(",") if f.startswith("+") and f[1:] not in have)


# Per architecture: the shared memory one block may use (bytes, with the opt-in above the 48 KiB
# default) and the registers of a multiprocessor, from NVIDIA's CUDA programming guide.
_CUDA_ARCHS = {
    "sm_70": (96 * 1024, 65536), "sm_75": (64 * 1024, 65536), "sm_80": (163 * 1024, 65536),
    "sm_86": (99 * 1024, 65536), "sm_87": (163 * 1024, 65536), "sm_89": (99 * 1024, 65536),
    "sm_90": (227 * 1024, 65536),
}


@dataclasses.dataclass(frozen=True)
class CudaTarget:
    """An NVIDIA GPU, the ``cuda`` kind: its architecture and the limits every GPU schedule
    must respect (threads per block, shared memory, registers, warp size)."""

    kind: ClassVar[str] = "cuda"

    arch: str = "sm_80"
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = _CUDA_ARCHS["sm_80"][0]
    max_registers_per_thread: int = 255
    registers_per_multiprocessor: int = 65536
    warp_size: int = 32

    @property
    def compute_capability(self) -> tuple:
        """``(9, 0)`` for ``sm_90``."""
        digits = self.arch[3:]
        return int(digits[:-1]), int(digits[-1])

    @staticmethod
    def for_arch(arch: str) -> "CudaTarget":
        """The target of architecture ``arch`` (``"sm_90"``) with its limits."""
        if arch not in _CUDA_ARCHS:
            from .errors import TargetError

            raise TargetError(f"unknown CUDA architecture {arch!r}: known are {', '.join(_CUDA_ARCHS)}")
        shared, regs = _CUDA_ARCHS[arch]
        return CudaTarget(arch, max_shared_memory_per_block=shared, registers_per_multiprocessor=regs)

    @staticmethod
    def from_words(words: list, spec: str) -> "CudaTarget":
        arch = "sm_80"
        for w in words:
            key, sep, value = w.partition("=")
            if key != "-arch" or not sep:
                from .errors import TargetError

                raise TargetError(f"bad target option {w!r} in {spec!r}: a cuda target takes -arch=sm_XX "
                                  f"(one of {', '.join(_CUDA_ARCHS)})")
            arch = value
        return CudaTarget.for_arch(arch)

    def __str__(self) -> str:
        return f"cuda -arch={self.arch}"


AnyTarget = Union[Target, CudaTarget]
KINDS = ("llvm", "cuda")
BUILDABLE = ("llvm", "cuda")  # the kinds whose code generator and runtime exist


def check_buildable(target: AnyTarget, kinds: tuple = ("llvm",)) -> None:
    """TargetError unless Ember can generate code for ``target``'s kind where ``kinds`` are
    the kinds the caller serves (the CPU's kernels, tuning and exports serve ``llvm`` alone;
    ``ember.compile`` serves :data:`BUILDABLE`)."""
    if target.kind not in kinds:
        from .errors import TargetError

        if target.kind == "cuda":
            raise TargetError(f"target {target}: this runs on the CPU only so far; ember.compile(model, "
                              f"target={str(target)!r}) compiles and runs a model on the GPU")
        raise TargetError(f"target {target}: Ember has no code generator for the {target.kind!r} kind yet; "
                          f"compile for the CPU (target='llvm', the default)")


def as_target(target: "Union[None, str, AnyTarget]" = None) -> AnyTarget:
    """``target`` as a target: None is the host CPU, a string is parsed (``"llvm
    -mcpu=znver4"``, ``"cuda -arch=sm_90"``), a target is itself."""
    if target is None:
        return Target.host()
    if isinstance(target, str):
        return Target.from_string(target)
    if isinstance(target, (Target, CudaTarget)):
        return target
    from .errors import TargetError

    raise TargetError(f"target must be None, a string such as 'llvm' or 'cuda -arch=sm_90', or a target; "
                      f"got {type(target).__name__}")


def _host_key_file():
    """Where the host's LLVM description is remembered: keyed by /proc/cpuinfo's model and flags
    and the llvmlite version (None where there is no /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [l for l in f.read().splitlines()[:40] if l.startswith(("model name", "flags"))]
        from importlib.metadata import version

        desc = "\n".join(lines) + version("llvmlite")
    except Exception:
        return None
    from .config import cache_dir

    return os.path.join(cache_dir(), f"host-{hashlib.sha256(desc.encode()).hexdigest()[:24]}.json")


def _make(triple: str, cpu: str, features: str) -> Target:
    flags = set(features.split(","))
    if "+avx512f" in flags:
        bits = 512
    elif "+avx2" in flags:
        bits = 256
    else:
        bits = 128
    caches = _cache_sizes()
    return Target(triple, cpu, features, bits, _cores(), caches["l1d"], caches["l2"], caches["l3"])


# A CPU named on the command line gets the features its family is known for. We only need the
# ones that decide vector width; LLVM fills in the rest from the CPU name.
_KNOWN_WIDE = {
    "skylake-avx512": "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,+fma,+f16c,+avx",
    "cascadelake": "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512vnni,+avx2,+fma,+f16c,+avx",
    "icelake-server": "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512vbmi,+avx2,+fma,+f16c,+avx",
    "sapphirerapids": "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512vbmi,+avx512bf16,+avx512fp16,+avx2,+fma,+f16c,+avx",
    "znver4": "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512vbmi,+avx512bf16,+avx2,+fma,+f16c,+avx",
    "znver3": "+avx2,+fma,+f16c,+avx", "znver2": "+avx2,+fma,+f16c,+avx",
    "haswell": "+avx2,+fma,+f16c,+avx", "skylake": "+avx2,+fma,+f16c,+avx",
    "x86-64-v3": "+avx2,+fma,+f16c,+avx", "x86-64-v4": "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,+fma,+f16c,+avx",
}


def _cpu_default_features(cpu: str) -> str:
    return _KNOWN_WIDE.get(cpu, "")


def _merge_features(base: str, extra: str) -> str:
    out = {}
    for f in [x for x in base.split(",") if x] + [x for x in extra.split(",") if x]:
        out[f[1:] if f[0] in "+-" else f] = f if f[0] in "+-" else "+" + f
    return ",".join(out.values())


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@functools.lru_cache(maxsize=None)
def _cache_sizes() -> dict:
    sizes = dict(_DEFAULT_CACHES)
    if platform.system() != "Linux" or not os.path.isdir(_SYS_CACHE):
        return sizes
    for entry in sorted(os.listdir(_SYS_CACHE)):
        d = os.path.join(_SYS_CACHE, entry)
        try:
            level = int(_read(d, "level"))
            kind = _read(d, "type")
            size = _parse_size(_read(d, "size"))
        except (OSError, ValueError):
            continue
        if level == 1 and kind in ("Data", "Unified"):
            sizes["l1d"] = size
        elif level == 2:
            sizes["l2"] = size
        elif level == 3:
            sizes["l3"] = size
    return sizes


def _read(d: str, name: str) -> str:
    with open(os.path.join(d, name)) as f:
        return f.read().strip()


def _parse_size(s: str) -> int:
    mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    if s and s[-1].upper() in mult:
        return int(s[:-1]) * mult[s[-1].upper()]
    return int(s)
