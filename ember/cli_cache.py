"""``ember cache``: the compile cache's size by kind, its bound, and pruning or clearing it."""
from __future__ import annotations

import argparse


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def cache_main(argv=None) -> int:
    from .cache_size import clear, entries, prune, size_bound
    from .config import cache_dir

    p = argparse.ArgumentParser(
        prog="ember cache",
        description="The compile cache (EMBER_CACHE_DIR, default ~/.cache/ember): compiled kernels, linked "
                    "libraries and each compiled model file's program and folded weights. It is kept under "
                    "EMBER_CACHE_SIZE (default 5G, K/M/G/T suffixes, 0 for no bound): after a compile, at "
                    "most hourly, the entries used least recently are deleted down to 80% of the bound. "
                    "Entries used in the last ten minutes always stay. Files Ember did not make are never "
                    "touched.",
        epilog="Examples:\n  ember cache                 # where it is, what it holds, the bound\n"
               "  ember cache --prune         # prune to the bound now\n"
               "  EMBER_CACHE_SIZE=1G ember cache --prune\n"
               "  ember cache --clear         # delete everything Ember made there",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--prune", action="store_true", help="delete the least recently used entries down to "
                      "80%% of the bound now (not waiting for the hourly prune)")
    what.add_argument("--clear", action="store_true", help="delete every entry Ember made (the next compiles "
                      "are cold)")
    args = p.parse_args(argv)
    bound = size_bound()
    root = cache_dir()
    if args.prune or args.clear:
        r = clear(root) if args.clear else prune(bound, root)
        print(f"{root}: {_size(r['before'])} -> {_size(r['after'])}, {r['deleted']} entries deleted")
        return 0
    by_kind: dict = {}
    for e in entries(root):
        n, b = by_kind.get(e.kind, (0, 0))
        by_kind[e.kind] = (n + 1, b + e.size)
    total = sum(b for _, b in by_kind.values())
    print(f"{root}: {_size(total)} of {'no bound' if not bound else _size(bound)} (EMBER_CACHE_SIZE)")
    names = {"object": "kernel objects", "library": "linked libraries", "model": "kept model executables",
             "index": "index entries", "temporary": "temporary files left by stopped processes"}
    for kind, (n, b) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"  {names.get(kind, kind):<44} {n:>7}  {_size(b):>10}")
    return 0


__all__ = ["cache_main"]
