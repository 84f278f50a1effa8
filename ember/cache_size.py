"""The cache folder kept under a size bound: the entries used least recently go first.

Every compile adds to ``EMBER_CACHE_DIR``: kernel objects (``objects/``), linked libraries
(``<key>.so``, ``.o``, ``.json``), kept model executables (``models/<key>/``, the folded
weights once more) and index entries. Any change to Ember or to a model makes new ones, and a
tuning run links a library per candidate, so without a bound the folder grows without end (to
tens of GB here in a few weeks). ``EMBER_CACHE_SIZE`` (default ``5G``; ``0`` for no bound) caps
it: after a compile, at most once an hour, the entries used least recently are deleted until
the folder is at 80% of the bound.

An entry is a unit that is found or missed as a whole (a library with its object and
metadata, a kernel object with its metadata, a model's folder, an index file). A hit touches
the entry (``touch``), so its modification time is its last use. Entries used in the last ten
minutes are never deleted (a compile in another process may be about to read them), and every
reader treats a vanished file as a miss, so deleting is safe while other processes compile.
Files and folders Ember does not know (a zoo of exported models, a tuning database) are left
alone and not counted.
"""
from __future__ import annotations

import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Optional

from .config import cache_dir
from .errors import EmberError

DEFAULT_SIZE = 5 << 30
KEEP_FRESH_SECONDS = 600  # entries used this recently stay
PRUNE_INTERVAL_SECONDS = 3600  # a compile prunes at most this often
LOW_WATER = 0.8  # a prune deletes down to this share of the bound (not at every compile)
_STAMP = "last-prune"  # (its modification time; not a dot file, which would read as a temporary)
_KEY = re.compile(r"^[0-9a-f]{64}$")
_TEMP_PREFIXES = (".ember-model-", ".meta-", ".obj-", ".idx-")
_TEMP_AGE_SECONDS = 86400  # a temporary file this old was left by a process that died


class CacheSizeError(EmberError):
    """``EMBER_CACHE_SIZE`` is not a size."""


def size_bound() -> int:
    """The bound in bytes from ``EMBER_CACHE_SIZE`` (a number of bytes or one with a K, M, G or
    T suffix, binary units); 0 means no bound."""
    text = os.environ.get("EMBER_CACHE_SIZE", "").strip()
    if not text:
        return DEFAULT_SIZE
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)i?[bB]?", text)
    if not m:
        raise CacheSizeError(f"EMBER_CACHE_SIZE={text!r} is not a size: write bytes or a number with "
                             f"K, M, G or T (e.g. 5G), or 0 for no bound")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


@dataclass
class Entry:
    """One unit of the cache: its files (deleted in this order: the one a lookup checks first),
    their bytes, and its last use."""
    kind: str  # "library", "object", "model", "index", "temporary"
    paths: list
    size: int
    used: float


def touch(path: str) -> bool:
    """Mark ``path`` used now; False if it has vanished (a miss for the caller)."""
    try:
        os.utime(path)
        return True
    except FileNotFoundError:
        return False
    except OSError:
        return os.path.exists(path)  # (a read-only cache: used, but not marked)


def _files(d: str):
    try:
        with os.scandir(d) as it:
            for e in it:
                try:
                    if e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        yield e.name, e.path, st.st_size, st.st_mtime
                except OSError:
                    continue
    except OSError:
        return


def _temporary(name: str) -> bool:
    """A file or folder being written (renamed into place when complete), or left by a process
    that died: the temporary prefixes, and the linker's ``.<key>-*.so``/``.o``."""
    return name.startswith(_TEMP_PREFIXES) or (name.startswith(".") and name.endswith((".so", ".o")))


def _left_behind(path: str, size: int, mtime: float, now: float) -> list:
    """A temporary as an entry to delete where it is old enough to be a dead process's."""
    return [Entry("temporary", [path], size, mtime)] if now - mtime > _TEMP_AGE_SECONDS else []


def _grouped(d: str, kind: str, order: tuple, now: float) -> list:
    """The entries of folder ``d`` whose files are ``<key><suffix>`` (grouped by key)."""
    groups: dict = {}
    temps = []
    for name, path, size, mtime in _files(d):
        if _temporary(name):
            temps += _left_behind(path, size, mtime, now)
            continue
        stem, dot, suffix = name.partition(".")
        if not _KEY.match(stem) or "." + suffix not in order:
            continue
        groups.setdefault(stem, []).append((order.index("." + suffix), path, size, mtime))
    out = []
    for files in groups.values():
        files.sort()
        out.append(Entry(kind, [p for _, p, _, _ in files], sum(s for _, _, s, _ in files),
                         max(m for _, _, _, m in files)))
    return out + temps


def _models(d: str) -> list:
    out = []
    try:
        with os.scandir(d) as it:
            dirs = [e for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return out
    now = time.time()
    for e in dirs:
        files = list(_files(e.path))
        if _temporary(e.name):
            if files:
                out += _left_behind(e.path, sum(f[2] for f in files), max(f[3] for f in files), now)
            continue
        program = os.path.join(e.path, "program.json")
        # (program.json first: without it the entry is a miss, and the folder goes after)
        out.append(Entry("model", [program, e.path], sum(f[2] for f in files),
                         max([f[3] for f in files] or [e.stat().st_mtime])))
    return out


def entries(root: Optional[str] = None) -> list:
    """Every entry Ember made under the cache folder ``root`` (default: ``EMBER_CACHE_DIR``)."""
    root = root or cache_dir()
    now = time.time()
    out = _grouped(root, "library", (".so", ".o", ".json"), now)
    out += _grouped(os.path.join(root, "objects"), "object", (".o", ".json"), now)
    out += _models(os.path.join(root, "models"))
    for name, path, size, mtime in _files(os.path.join(root, "index")):
        out += _left_behind(path, size, mtime, now) if _temporary(name) else [Entry("index", [path], size, mtime)]
    return out


def _delete(entry: Entry) -> int:
    """Delete ``entry``'s files in order; the bytes it held."""
    for p in entry.paths:
        try:
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        except OSError:
            continue
    return entry.size


def prune(bound: Optional[int] = None, root: Optional[str] = None, keep_fresh: float = KEEP_FRESH_SECONDS) -> dict:
    """Delete the least recently used entries until the cache is at ``LOW_WATER`` of ``bound``
    (default: ``size_bound()``); entries used in the last ``keep_fresh`` seconds stay.
    Returns ``{"before", "after", "deleted", "bound"}`` (bytes, bytes, entries, bytes)."""
    bound = size_bound() if bound is None else bound
    root = root or cache_dir()
    all_entries = entries(root)
    total = sum(e.size for e in all_entries)
    report = {"before": total, "after": total, "deleted": 0, "bound": bound}
    now = time.time()
    stale = [e for e in all_entries if e.kind == "temporary"]
    for e in stale:
        total -= _delete(e)
        report["deleted"] += 1
    if bound and total > bound:
        target = bound * LOW_WATER
        for e in sorted((e for e in all_entries if e.kind != "temporary"), key=lambda e: e.used):
            if total <= target or now - e.used < keep_fresh:
                break
            try:  # (used since the scan: it stays)
                if now - os.stat(e.paths[0]).st_mtime < keep_fresh:
                    continue
            except OSError:
                pass
            total -= _delete(e)
            report["deleted"] += 1
    report["after"] = total
    return report


def maybe_prune() -> None:
    """After a compile: prune if the bound is set and the last prune is an hour old. Never
    raises (a full or read-only disk must not fail the compile that just succeeded)."""
    try:
        bound = size_bound()
    except CacheSizeError as e:
        _warn_once(str(e) + "; the default bound (5G) holds")
        bound = DEFAULT_SIZE
    try:
        if not bound:
            return
        root = cache_dir()
        stamp = os.path.join(root, _STAMP)
        try:
            if time.time() - os.stat(stamp).st_mtime < PRUNE_INTERVAL_SECONDS:
                return
        except FileNotFoundError:
            pass
        with open(stamp, "a"):
            pass
        os.utime(stamp)  # (first: a second process compiling now skips)
    except OSError:
        return
    # in the background: deleting thousands of files takes seconds the compile need not wait
    # for (a prune cut short at exit is safe: each entry goes in the order its readers check)
    threading.Thread(target=_prune_quietly, args=(bound, root), name="ember-cache-prune", daemon=True).start()


def _prune_quietly(bound: int, root: str) -> None:
    try:
        prune(bound, root)
    except (OSError, EmberError):
        return


_warned: set = set()


def _warn_once(text: str) -> None:
    if text not in _warned:
        import warnings

        _warned.add(text)
        warnings.warn(text, stacklevel=3)


def clear(root: Optional[str] = None) -> dict:
    """Delete every entry Ember made (unknown files stay); the same report as ``prune``."""
    root = root or cache_dir()
    all_entries = entries(root)
    total = sum(e.size for e in all_entries)
    for e in all_entries:
        _delete(e)
    return {"before": total, "after": 0, "deleted": len(all_entries), "bound": size_bound()}


__all__ = ["CacheSizeError", "Entry", "clear", "entries", "maybe_prune", "prune", "size_bound", "touch"]
