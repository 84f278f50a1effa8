"""Which Ember this is: the release (``__version__``) and a digest of its sources, which keys
every cache (a changed Ember misses them all)."""
from __future__ import annotations

import hashlib
import os

__version__ = "0.1.0"


_SOURCE_DIGEST: list = []


def _keys_nothing(rel: str) -> bool:
    """Whether the source at ``rel`` (relative to the package) makes nothing a cache keeps: the
    benchmarks (``bench/``) and the command line (``cli*.py``) only call the compiler, so an edit
    there keeps every kernel and kept executable (a benchmark's fix no longer costs its next run
    a cold compile of every model)."""
    return rel.startswith("bench" + os.sep) or (os.sep not in rel and rel.startswith("cli"))


def source_digest() -> str:
    """A hash of every Python file of the ember package that makes what a cache keeps (computed
    once per process; see :func:`_keys_nothing` for those left out): cached libraries are keyed
    by it, so any change to the compiler misses the cache."""
    if not _SOURCE_DIGEST:
        root = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        for d, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(d, f)
                rel = os.path.relpath(p, root)
                if f.endswith(".py") and not _keys_nothing(rel):
                    h.update(rel.encode())
                    with open(p, "rb") as fh:
                        h.update(fh.read())
        _SOURCE_DIGEST.append(h.hexdigest())
    return _SOURCE_DIGEST[0]
