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
import threading

from ...errors import CompileError
from ...config import cache_dir, debug_level, llvm_opt_level, opt_level  # noqa: F401  (re-exported)
from ...target import Target

OPT_LEVEL = 3  # (the default of ``config.llvm_opt_level``)

@functools.lru_cache(maxsize=None)
def target_machine(target: Target, opt: int = OPT_LEVEL):
    """An LLVM target machine for ``target`` (position-independent code for shared libraries)."""
    import llvmlite.binding as llvm

    try:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        t = llvm.Target.from_triple(target.triple)
        return t.create_target_machine(cpu=target.cpu, features=target.features, opt=opt,
                                       reloc="pic", codemodel="default")
    except RuntimeError as exc:
        raise CompileError(f"cannot create an LLVM target machine for {target}: {exc}") from exc


def data_layout(target: Target) -> str:
    return str(target_machine(target).target_data)


def cache_key(ir_text: str, target: Target, opt: int = OPT_LEVEL) -> str:
    from ...version import __version__

    h = hashlib.sha256()
    for part in (ir_text, target.triple, target.cpu, target.features, str(opt), __version__):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def cached_library(key: str) -> str | None:
    """``<cache>/<key>.so`` if it and its object are there (marked used: ``cache_size``)."""
    from ...cache_size import touch

    path = os.path.join(cache_dir(), key + ".so")
    return path if os.path.exists(path[:-3] + ".o") and touch(path) else None


def compile_object(ir_text: str, target: Target, what: str, times: dict | None = None,
                   opt: int = OPT_LEVEL) -> bytes:
    """Parse, verify and optimize (O``opt``, new pass manager) ``ir_text``; return an ELF object.

    ``times`` (if given) gets the seconds of ``llvm_opt`` (parse, verify, O3) and ``llvm_codegen``
    (instruction selection to the object)."""
    with _LLVM_LOCK:  # (one LLVM at a time in a process: a tiered build's thread compiles too)
        return _compile_object(ir_text, target, what, times, opt)


_LLVM_LOCK = threading.RLock()


def _compile_object(ir_text: str, target: Target, what: str, times: dict | None, opt: int) -> bytes:
    import time

    import llvmlite.binding as llvm

    t0 = time.perf_counter()
    tm = target_machine(target, opt)
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
    except RuntimeError as exc:
        raise CompileError(f"{what}: LLVM rejected the generated IR: {exc}") from exc
    try:
        pto = llvm.PipelineTuningOptions(speed_level=opt)
        pto.loop_vectorization = opt >= 2
        pto.slp_vectorization = opt >= 2
        pto.loop_unrolling = opt >= 2
        pto.loop_interleaving = opt >= 2
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        if debug_level() >= 3:
            print(f"=== optimized LLVM IR ({what}) ===\n{mod}", file=sys.stderr)
        if debug_level() >= 4:
            print(f"=== assembly ({what}) ===\n{tm.emit_assembly(mod)}", file=sys.stderr)
        t1 = time.perf_counter()
        obj = tm.emit_object(mod)
        if times is not None:
            times["llvm_opt"] = t1 - t0
            times["llvm_codegen"] = time.perf_counter() - t1
        return obj
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


def _start_cc(cmd: list, what: str) -> subprocess.Popen:
    try:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise CompileError(f"{what}: cannot run the C compiler {cmd[0]!r}: {exc}; install "
                           f"gcc or clang, or set CC") from exc


def _wait_cc(proc: subprocess.Popen, cmd: list, what: str) -> None:
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise CompileError(f"{what}: linking failed ({' '.join(cmd)}):\n{err.strip()}")


def link(objs, key: str, what: str, links: tuple = ()) -> str:
    """Link one object or a list of them into ``<cache>/<key>.so`` atomically; returns the path.
    The objects are also merged into one relocatable object, kept as ``<key>.o`` (exporting a
    model links it with the model's data); the two runs of the C compiler go side by side.
    ``links``: the libraries offloaded kernels call (``-ldnnl``)."""
    out_dir = cache_dir()
    final = os.path.join(out_dir, key + ".so")
    cc = find_cc()
    objs = [objs] if isinstance(objs, (bytes, bytearray)) else list(objs)
    with tempfile.TemporaryDirectory(prefix="ember-link-") as tmp:
        paths = []
        for i, o in enumerate(objs):
            paths.append(os.path.join(tmp, f"k{i}.o"))
            with open(paths[-1], "wb") as f:
                f.write(o)
        merge = None
        if len(paths) > 1:
            merged = os.path.join(tmp, "kernels.o")
            merge = cc + ["-r", "-nostdlib", "-o", merged, *paths]
            merging = _start_cc(merge, what)
        fd, tmp_so = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".so", dir=out_dir)
        os.close(fd)
        try:
            shared = cc + ["-shared", "-o", tmp_so, *paths, *links, "-lgomp", "-lm"]
            linking = _start_cc(shared, what)
            _wait_cc(linking, shared, what)
            if merge is not None:
                _wait_cc(merging, merge, what)
            with open(merged if merge is not None else paths[0], "rb") as f:
                obj = f.read()
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
            if merge is not None and merging.poll() is None:  # (a failed link: do not leave it running)
                merging.kill()
                merging.wait()
    return final


def write_sidecar(key: str, metadata: str) -> None:
    """The kernel metadata next to the library, for people inspecting the cache."""
    path = os.path.join(cache_dir(), key + ".json")
    fd, tmp = tempfile.mkstemp(dir=cache_dir(), prefix=".meta-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(metadata)
    os.replace(tmp, path)
