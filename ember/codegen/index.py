"""The kernel cache's index: a key (a digest of the lowered programs, target and Ember) to the
shared library built for it, so a rebuild of the same kernels is a lookup and a ``dlopen``."""
from __future__ import annotations

import os
import tempfile
from typing import Optional

from ..cache_size import touch
from ..config import cache_dir


def _index_dir() -> str:
    d = os.path.join(cache_dir(), "index")
    os.makedirs(d, exist_ok=True)
    return d


def index_lookup(key: str) -> Optional[str]:
    """The library stored under ``key`` in the cache's index, if it (and its object) exist."""
    try:
        with open(os.path.join(_index_dir(), key)) as f:
            path = f.read().strip()
    except OSError:
        return None
    # the object file is needed to export a model: an entry without it is rebuilt
    return path if os.path.exists(path[:-3] + ".o") and touch(path) and touch(os.path.join(_index_dir(), key)) else None


def index_store(key: str, library: str) -> None:
    """Record ``library`` under ``key`` (atomically: readers see no half-written entry)."""
    d = _index_dir()
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".idx-")
    with os.fdopen(fd, "w") as f:
        f.write(library)
    os.replace(tmp, os.path.join(d, key))
