"""The compiled model, kept: a warm compile of a model file loads its executable.

A compile of a model file is keyed by the file (path, size, modification time), the compile's
settings and a digest of Ember's own sources (``compile._compiled_before``). After a compile
the executable's program and constants are written to ``<cache>/models/<key>/`` in the
background (the kernels are already in the cache, content-addressed); the next compile of the
same file with the same settings maps the constants and loads the program instead of
importing, optimizing and folding the model again -- the warm path of a 330 MB ViT-B goes from
1.3 s to a few tenths, its weights pages of one file.

A kept executable is the compiled one: the program is checked as every program is
(``Executable.__init__``), the constants are the folded ones, byte for byte. What it does not
keep (the graph, the schedules) is made again, by compiling without the cache, only when a
profiler asks for it. Anything missing or unreadable is a miss: the model compiles.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from typing import Callable, Optional

import numpy as np

from ..config import cache_dir

_ALIGN = 64
_writers: list = []  # the background writes in flight (joined at exit: non-daemon threads)


def _dir(key: str) -> str:
    return os.path.join(cache_dir(), "models", key)


def _idle_priority() -> None:
    """The calling thread at the lowest CPU priority (Linux schedules a process's threads apart):
    a background write then takes the cores' idle time, not the model's runs'. At the normal
    one, the write of a model whose kernels were all cached ran beside the script's first run:
    ResNet-50's took 147-250 ms against 75-83 without the write (2-core Zen 3). (A process
    that keeps every core busy writes it when it goes idle, or at exit, which waits for it.)"""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):  # (no per-thread priorities here: the write runs as before)
        pass


def save(exe, key: str) -> None:
    """Write ``exe``'s program and constants for ``key`` in a background thread (atomically:
    a folder renamed into place when complete, so a reader never sees half of one)."""
    if exe.module is None or not os.path.isfile(exe.module.path):
        return
    program, constants, library = exe.program, list(exe.constants), exe.module.path
    names = [o.name for o in exe.output_info]
    final = _dir(key)  # (now: the cache folder is the one this compile used)

    def write() -> None:
        _idle_priority()
        if os.path.isdir(final):
            return
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".ember-model-", dir=os.path.dirname(final))
        try:
            table, off = [], 0
            with open(os.path.join(tmp, "constants.bin"), "wb") as f:
                for c in constants:
                    off = -(-off // _ALIGN) * _ALIGN
                    f.seek(off)
                    f.write(np.ascontiguousarray(c).reshape(-1).view(np.uint8).data if c.size else b"")  # (no copy)
                    table.append({"offset": off, "shape": list(c.shape), "dtype": str(c.dtype)})
                    off += c.nbytes
                f.truncate(max(off, 1))
            with open(os.path.join(tmp, "program.json"), "w") as f:
                json.dump({"program": program, "constants": table, "library": library, "output_names": names}, f)
            os.replace(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)

    t = threading.Thread(target=write, name="ember-keep-model", daemon=False)
    _writers.append(t)
    t.start()


def load(key: str, recompile: Callable) -> Optional[object]:
    """The executable kept for ``key``, or None (a miss: nothing kept, or not readable).
    ``recompile()`` compiles the model without the cache when a profiler needs its schedules."""
    from ..cache_size import touch
    from ..errors import EmberError
    from ..runtime.executable import TensorInfo
    from .executable import Executable
    from ..runtime.module import Module
    from ..runtime.ndarray import numpy_dtype

    d = _dir(key)
    try:
        if not touch(os.path.join(d, "program.json")):
            return None
        with open(os.path.join(d, "program.json")) as f:
            doc = json.load(f)
        if not touch(doc["library"]):
            return None  # (its kernels were pruned from the cache)
        blob = np.memmap(os.path.join(d, "constants.bin"), dtype=np.uint8, mode="r")
        constants = []
        for c in doc["constants"]:
            dt = numpy_dtype(c["dtype"])
            n = int(np.prod(c["shape"], dtype=np.int64)) * dt.itemsize
            if c["offset"] + n > len(blob):
                return None
            constants.append(blob[c["offset"]: c["offset"] + n].view(dt).reshape(c["shape"]))
        exe = Executable(Module(doc["library"]), doc["program"], constants, where=f"{d}: program")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, EmberError):
        shutil.rmtree(d, ignore_errors=True)  # damaged: the compile that follows keeps a new one
        return None
    names = doc.get("output_names")
    if names:
        exe.output_info = [TensorInfo(n, i.shape, i.dtype) for n, i in zip(names, exe.output_info)]
    exe.weights_mapped = True
    exe.kernel_sources_thunk = lambda: recompile().kernel_sources
    return exe


def wait() -> None:
    """Wait for the background writes (tests; the interpreter also waits at exit)."""
    for t in list(_writers):
        t.join()
    _writers.clear()


__all__ = ["load", "save", "wait"]
