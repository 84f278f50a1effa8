"""Settings read from the environment, in one place (no heavy imports: the runtime uses it)."""
from __future__ import annotations

import os


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
