"""The memory limit of a compile: every constant the compiler materializes is checked against
it *before* it is allocated, so a model that would need too much memory is a
:class:`~ember.errors.ResourceError` naming what needs the bytes, never numpy's ``MemoryError``
from inside a pass (or the kernel's OOM killer).

``ember.compile(..., memory_limit=bytes)`` sets the limit for the compile (with
:func:`memory_limit`); the default is the memory available to the process when the compile
starts (:func:`available_memory`: ``MemAvailable``, or less under a cgroup or ``ulimit -v``). A compile inside a compile (the constant-folding program) keeps the
outer limit. Outside any compile (``from_onnx`` alone) the default applies.

    check_bytes(tensor_bytes(shape, "float32"), "the value of ConstantOfShape node 'c' (shape ...)")
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import re
from typing import Iterator, Optional, Sequence

from ..errors import ResourceError

# (limit in bytes or None for no limit, where it came from: "memory_limit=" or the machine)
_LIMIT: contextvars.ContextVar = contextvars.ContextVar("ember_memory_limit", default=None)

_UNITS = {"": 1, "b": 1, "k": 10 ** 3, "kb": 10 ** 3, "m": 10 ** 6, "mb": 10 ** 6, "g": 10 ** 9, "gb": 10 ** 9,
          "t": 10 ** 12, "tb": 10 ** 12, "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}


def parse_bytes(text) -> int:
    """``"4GiB"``, ``"512MB"``, ``"1.5G"``, ``"1000000"`` -> bytes (an int passes through).
    ValueError for anything else."""
    if isinstance(text, int) and not isinstance(text, bool):
        n = text
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        unit = m.group(2).lower() if m else None
        if not m or unit not in _UNITS:
            raise ValueError(f"{text!r} is not an amount of memory (examples: 4GiB, 512MB, 1000000)")
        n = int(float(m.group(1)) * _UNITS[unit])
    if n <= 0:
        raise ValueError(f"a memory limit must be positive, got {text!r}")
    return n


def format_bytes(n: int) -> str:
    """``1536 -> '1.5 KiB'``: bytes in the largest binary unit that keeps a number >= 1."""
    for unit, size in (("PiB", 2 ** 50), ("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def available_memory() -> Optional[int]:
    """The memory this process can still get, in bytes: the machine's ``MemAvailable``
    (``/proc/meminfo``; else the free physical pages from ``sysconf``, else all of them), or
    less where the process is held to less: the room left in its cgroup (a container's
    ``memory.max``) or under its address-space rlimit (``ulimit -v``). None where nothing can
    be read."""
    room = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    room.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not room:
        for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
            try:
                n, size = os.sysconf(pages), os.sysconf("SC_PAGE_SIZE")
            except (AttributeError, ValueError, OSError):
                continue
            if n > 0 and size > 0:
                room.append(n * size)
                break
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as f:
                text = f.read().strip()
            if text == "max" or int(text) >= 2 ** 60:  # no limit
                continue
            with open(usage_file) as f:
                room.append(max(0, int(text) - int(f.read().strip())))
            break
        except (OSError, ValueError):
            continue
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/status") as f:
                size = next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:")), 0)
            room.append(max(0, soft - size))
    except (ImportError, OSError, ValueError):
        pass
    return min(room) if room else None


@contextlib.contextmanager
def memory_limit(limit: Optional[int] = None) -> Iterator[Optional[int]]:
    """Within the block, :func:`check_bytes` checks against ``limit`` bytes; None keeps an
    enclosing block's limit, or takes :func:`available_memory`. Yields the limit."""
    outer = _LIMIT.get()
    if limit is not None:
        value = (parse_bytes(limit), "the memory_limit")
    elif outer is not None:
        value = outer
    else:
        value = (available_memory(), "the memory available to this process")
    token = _LIMIT.set(value)
    try:
        yield value[0]
    finally:
        _LIMIT.reset(token)


def current_limit() -> tuple:
    """``(bytes or None, where the limit comes from)`` for the current context."""
    value = _LIMIT.get()
    return value if value is not None else (available_memory(), "the memory available to this process")


def tensor_bytes(shape: Sequence, dtype: str) -> int:
    """Bytes of a tensor (exact Python ints, so 2**50 elements do not overflow)."""
    from ..loop import dtype as dt

    n = 1
    for d in shape:
        n *= int(d)
    return n * dt.nbytes(dtype)


def check_bytes(nbytes: int, what: str) -> None:
    """Raise ResourceError when ``nbytes`` (what ``what`` needs) exceeds the current limit.
    ``what`` names the thing: the node, op and shape at fault."""
    limit, source = current_limit()
    if limit is None or nbytes <= limit:
        return
    raise ResourceError(
        f"{what}: {format_bytes(nbytes)} ({nbytes} bytes) needed, more than {source} "
        f"({format_bytes(limit)}, {limit} bytes). If the model really needs it, raise the limit: "
        f"ember.compile(..., memory_limit=...) or `ember compile --memory-limit 64GiB`")


@contextlib.contextmanager
def allocating(nbytes: int, what: str) -> Iterator[None]:
    """Check ``nbytes`` for ``what``, then run the block that allocates them; a MemoryError
    inside (the limit was set above what the machine has) becomes a ResourceError too."""
    check_bytes(nbytes, what)
    try:
        yield
    except MemoryError:
        raise ResourceError(f"{what}: {format_bytes(nbytes)} ({nbytes} bytes) needed, which this machine "
                            f"could not allocate (the memory limit, {format_bytes(current_limit()[0] or 0)}, is "
                            f"more than it has)") from None


def describe(expr) -> str:
    """``"broadcast_to (from node 'Expand_3') of shape (1024, 1024) float32"`` for messages."""
    t = getattr(expr, "type", None)
    op = getattr(expr, "op", type(expr).__name__)
    span = getattr(expr, "span", ())
    where = f" (from node {', '.join(repr(s) for s in span)})" if span else ""
    shape = f" of shape {tuple(t.shape)} {t.dtype}" if t is not None and hasattr(t, "shape") else ""
    return f"{op}{where}{shape}"


__all__ = ["allocating", "available_memory", "check_bytes", "current_limit", "describe", "format_bytes", "memory_limit",
           "parse_bytes", "tensor_bytes"]
