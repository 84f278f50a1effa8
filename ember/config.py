"""Settings read from the environment, in one place (no heavy imports: the runtime uses it)."""
from __future__ import annotations

import contextlib
import contextvars
import os

_LLVM_OPT = contextvars.ContextVar("ember_llvm_opt_level", default=3)


@contextlib.contextmanager
def llvm_opt_level(level: int):
    """Compile the kernels built inside at LLVM optimization ``level`` (0-3) instead of 3: code
    that runs once (the constant-folding program) does not repay LLVM's optimizations."""
    token = _LLVM_OPT.set(level)
    try:
        yield
    finally:
        _LLVM_OPT.reset(token)


def opt_level() -> int:
    """The LLVM optimization level of the kernels being built now (``llvm_opt_level``)."""
    return _LLVM_OPT.get()


def cache_dir() -> str:
    """``EMBER_CACHE_DIR`` (default ``~/.cache/ember``), created if missing."""
    d = os.environ.get("EMBER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ember")
    os.makedirs(d, exist_ok=True)
    return d


def debug_level() -> int:
    """``EMBER_DEBUG``: 2 prints loop programs, 3 also optimized LLVM IR, 4 also assembly."""
    try:
        return int(os.environ.get("EMBER_DEBUG", "0") or 0)
    except ValueError:
        return 1
