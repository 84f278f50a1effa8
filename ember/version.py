"""Which Ember this is: the release (``__version__``) and a digest of its sources, which keys
every cache (a changed Ember misses them all)."""
from __future__ import annotations

import hashlib
import os

__version__ = "0.1.0"


_SOURCE_DIGEST: list = []


def source_digest() -> str:
    """A hash of every Python file of the ember package (computed once per process): cached
    libraries are keyed by it, so any change to Ember misses the cache."""
    if not _SOURCE_DIGEST:
        root = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        for d, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(".py"):
                    p = os.path.join(d, f)
                    h.update(os.path.relpath(p, root).encode())
                    with open(p, "rb") as fh:
                        h.update(fh.read())
        _SOURCE_DIGEST.append(h.hexdigest())
    return _SOURCE_DIGEST[0]
