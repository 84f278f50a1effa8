"""From LLVM IR text to a loadable shared library: optimize, emit an object, link, cache.

The cache is content-addressed: the key hashes the unoptimized IR, the target and the Ember
version, so a hit skips optimization, code generation and linking. Entries are written to a
temporary name and renamed into place, so concurrent processes never see half a file.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from ...errors import CompileError
from ...config import cache_dir, debug_level  # noqa: F401  (re-exported)
from ...target import Target

OPT_LEVEL = 3


@functools.lru_cache(maxsize=None)
def target_machine(target: Target):
    """An LLVM target machine for ``target`` (position-independent code for shared libraries)."""
    import llvmlite.binding as llvm

    try:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        t = llvm.Target.from_triple(target.triple)
        return t.create_target_machine(cpu=target.cpu, features=target.features, opt=OPT_LEVEL,
                                       reloc="pic", codemodel="default")
    except RuntimeError as exc:
        raise CompileError(f"cannot create an LLVM target machine for {target}: {exc}") from exc


def data_layout(target: Target) -> str:
    return str(target_machine(target).target_data)


def cache_key(ir_text: str, target: Target) -> str:
    from ... import __version__

    h = hashlib.sha256()
    for part in (ir_text, target.triple, target.cpu, target.features, str(OPT_LEVEL), __version__):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def cached_library(key: str) -> str | None:
    path = os.path.join(cache_dir(), key + ".so")
    return path if os.path.exists(path) and os.path.exists(path[:-3] + ".o") else None


def compile_object(ir_text: str, target: Target, what: str) -> bytes:
    """Parse, verify and optimize (O3, new pass manager) ``ir_text``; return an ELF object."""
    import llvmlite.binding as llvm

    tm = target_machine(target)
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
    except RuntimeError as exc:
        raise CompileError(f"{what}: LLVM rejected the generated IR: {exc}") from exc
    try:
        pto = llvm.PipelineTuningOptions(speed_level=OPT_LEVEL)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pto.loop_interleaving = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        if debug_level() >= 3:
            print(f"=== optimized LLVM IR ({what}) ===\n{mod}", file=sys.stderr)
        if debug_level() >= 4:
            print(f"=== assembly ({what}) ===\n{tm.emit_assembly(mod)}", file=sys.stderr)
        return tm.emit_object(mod)
    except RuntimeError as exc:
        raise CompileError(f"{what}: LLVM failed to optimize or emit code: {exc}") from exc


def find_cc() -> list:
    """The C compiler command used as the linker (``$CC``, else cc, gcc or clang)."""
    env = os.environ.get("CC")
    candidates = [shlex.split(env)] if env else [["cc"], ["gcc"], ["clang"]]
    for cmd in candidates:
        if cmd and shutil.which(cmd[0]):
            return cmd
    raise CompileError(
        f"no C compiler found to link kernels ({'CC=' + env if env else 'tried cc, gcc, clang'}): "
        f"install gcc or clang, or set CC to one")


def link(obj: bytes, key: str, what: str) -> str:
    """Link ``obj`` into ``<cache>/<key>.so`` atomically; returns the path."""
    out_dir = cache_dir()
    final = os.path.join(out_dir, key + ".so")
    cc = find_cc()
    with tempfile.TemporaryDirectory(prefix="ember-link-") as tmp:
        obj_path = os.path.join(tmp, "kernels.o")
        with open(obj_path, "wb") as f:
            f.write(obj)
        fd, tmp_so = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".so", dir=out_dir)
        os.close(fd)
        try:
            cmd = cc + ["-shared", "-o", tmp_so, obj_path, "-lgomp", "-lm"]
            try:
                res = subprocess.run(cmd, capture_output=True, text=True)
            except OSError as exc:
                raise CompileError(f"{what}: cannot run the C compiler {cc[0]!r}: {exc}; install "
                                   f"gcc or clang, or set CC") from exc
            if res.returncode != 0:
                raise CompileError(f"{what}: linking failed ({' '.join(cmd)}):\n{res.stderr.strip()}")
            os.chmod(tmp_so, 0o755)
            # the object is kept too: exporting a model links it with the model's data
            fd, tmp_o = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".o", dir=out_dir)
            with os.fdopen(fd, "wb") as f:
                f.write(obj)
            os.replace(tmp_o, final[:-3] + ".o")
            os.replace(tmp_so, final)  # atomic: readers see the old file or the whole new one
        finally:
            if os.path.exists(tmp_so):
                os.unlink(tmp_so)
    return final


def write_sidecar(key: str, metadata: str) -> None:
    """The kernel metadata next to the library, for people inspecting the cache."""
    path = os.path.join(cache_dir(), key + ".json")
    fd, tmp = tempfile.mkstemp(dir=cache_dir(), prefix=".meta-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(metadata)
    os.replace(tmp, path)
