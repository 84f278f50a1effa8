"""Export mutators: bytes inside an exported library's ELF headers, a section, the embedded
program or metadata JSON (resealed, so the checksum passes and the checks behind it run), or
what follows the sections."""
from __future__ import annotations

import json
import math
import random
import re
import struct
from typing import Dict, List

from ...runtime.verify import DTYPES, reseal
from .mutate_bytes import flip_bits, mutate_bytes, overwrite_interesting, overwrite_random, truncate


def elf_regions(data: bytes) -> Dict[str, tuple]:
    """Named byte ranges ``[start, end)`` of a little-endian ELF64 file: ``elf_header``,
    ``program_headers``, ``section_headers``, every section with bytes in the file (``.text``,
    ``.rodata``, ``.dynsym``, ...), ``trailer`` (whatever follows the last section and the section
    headers; the last 256 bytes when nothing does) and ``json:<start>`` for each JSON object
    embedded as a NUL-terminated string (the program, the kernel metadata). Best effort: a
    region that cannot be read is left out."""
    out: Dict[str, tuple] = {}
    n = len(data)
    if n >= 64 and data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1:
        out["elf_header"] = (0, 64)
        phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
        if phoff + phnum * phentsize <= n:
            out["program_headers"] = (phoff, phoff + phnum * phentsize)
        end = 0
        if shentsize >= 64 and shoff + shnum * shentsize <= n:
            out["section_headers"] = (shoff, shoff + shnum * shentsize)
            end = shoff + shnum * shentsize
            secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize) for k in range(shnum)]
            strtab = secs[shstrndx] if shstrndx < shnum else None
            for s in secs:
                name_off, sh_type, _, _, off, size = s[:6]
                if sh_type == 8 or not size or off + size > n:  # NOBITS
                    continue
                name = "?"
                if strtab is not None:
                    a = strtab[4] + name_off
                    z = data.find(b"\0", a, a + 64)
                    name = data[a:z].decode("latin-1") if z > a else "?"
                out.setdefault(name or "?", (off, off + size))
                end = max(end, off + size)
        out["trailer"] = (end, n) if 0 < end < n else (max(0, n - 256), n)
    for mo in re.finditer(rb'\{"', data):
        a = mo.start()
        z = data.find(b"\0", a, a + (1 << 22))
        if z < 0 or any(a < s < z for s, _ in (v for k, v in out.items() if k.startswith("json:"))):
            continue
        try:
            doc = json.loads(data[a:z].decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict):
            out[f"json:{a}"] = (a, z)
            if isinstance(doc.get("constants"), list) and "calls" in doc:  # the program: weights follow
                try:
                    w0 = -(-(z + 1) // 64) * 64
                    size = max((c["offset"] + math.prod(c["shape"]) * DTYPES.get(c["dtype"], 1)
                                for c in doc["constants"]), default=0)
                    out["weights"] = (w0, min(n, w0 + size))
                except (TypeError, KeyError, ValueError, AttributeError):
                    pass  # a mutated program: no weights region
    return out


def _json_paths(doc, path=()) -> list:
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _json_paths(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _json_paths(v, path + (i,))
    return out


def _json_strings(doc) -> list:
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for v in doc.values() for s in _json_strings(v)] + list(doc)
    if isinstance(doc, list):
        return [s for v in doc for s in _json_strings(v)]
    return []


def mutate_json(doc, rng: random.Random) -> str:
    """Change one value of a JSON document in place (an int to an interesting one, a string to
    another string of the document, a list shortened or lengthened, a key dropped)."""
    paths = _json_paths(doc)[1:]
    if not paths:
        return "json: empty"
    path = rng.choice(paths)
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    v = parent[key]
    label = "/".join(str(p) for p in path)
    if isinstance(v, bool) or v is None:
        parent[key] = rng.choice([0, 1, None, True, "x"])
    elif isinstance(v, int):
        parent[key] = rng.choice([0, -1, 1, v + 1, v - 1, v * 2, v + 64, 2 ** 31, 2 ** 62, -2 ** 63, 2 ** 64])
    elif isinstance(v, float):
        parent[key] = rng.choice([0.0, -1.0, 1e308])
    elif isinstance(v, str):
        parent[key] = rng.choice(_json_strings(doc) + ["", "float64", "int8", "bogus", "output", "arena", "view"])
    elif isinstance(v, list):
        op = rng.choice(["drop", "dup", "clear"])
        if op == "drop" and v:
            v.pop(rng.randrange(len(v)))
        elif op == "dup" and v:
            v.append(v[rng.randrange(len(v))])
        else:
            v.clear()
        return f"json {label}: list {op}"
    elif isinstance(v, dict):
        if v and rng.random() < 0.7:
            k = rng.choice(list(v))
            del v[k]
            return f"json {label}: drop key {k!r}"
        parent[key] = rng.choice([[], 0, "x", None])
    return f"json {label}: {v!r:.40} -> {parent[key]!r:.40}"


def mutate_export(data: bytes, rng: random.Random, regions: Dict[str, tuple], others: List[bytes],
                  may_reseal: bool = True) -> tuple:
    """One mutation of an exported library: ``(bytes, description)``. ``may_reseal``: whether the
    bytes hold no change to code (only then may a change to data be resealed)."""
    r = rng.random()
    jsons = [k for k in regions if k.startswith("json:")]
    # A change to the program, the metadata or the weights is resealed (the trailer's checksum
    # made anew) most of the time: the checksum alone would catch it, and the structure checks
    # behind it need testing too. Code is never resealed: a library is native code, and loading
    # code changed consistently runs it (ember.load checks integrity, not trust).
    if r < 0.3 and jsons:  # a field of the program or the metadata, written back in place
        a, z = regions[rng.choice(jsons)]
        doc = json.loads(data[a:z].decode("utf-8"))
        d = mutate_json(doc, rng)
        for sep in ((", ", ": "), (",", ":")):
            text = json.dumps(doc, separators=sep).encode("utf-8")
            if len(text) <= z - a:
                out = data[:a] + text.ljust(z - a) + data[z:]
                if may_reseal and rng.random() < 0.8:
                    return reseal(out), f"{d} (json at {a}, resealed)"
                return out, f"{d} (json at {a})"
        return data, f"{d} (did not fit, not written)"
    if r < 0.4 and "weights" in regions and regions["weights"][1] > regions["weights"][0]:
        a, z = regions["weights"]
        m = rng.choice([flip_bits, overwrite_interesting, overwrite_random])
        out, d = m(data, rng, a, z)
        return (reseal(out), f"weights: {d} (resealed)") if may_reseal else (out, f"weights: {d}")
    if r < 0.75 and regions:  # bytes inside one ELF region
        name = rng.choice(sorted(regions))
        a, z = regions[name]
        if z - a <= 0:
            return data, f"region {name} empty"
        m = rng.choice([flip_bits, overwrite_interesting, overwrite_random])
        out, d = m(data, rng, a, z)
        return out, f"{name}: {d}"
    if r < 0.9:
        if rng.random() < 0.3 and regions:  # cut inside a region
            a, z = regions[rng.choice(sorted(regions))]
            n = rng.randint(a, z)
            return data[:n], f"truncate to {n} of {len(data)} bytes (inside a region)"
        return truncate(data, rng)
    if rng.random() < 0.3:
        extra = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        return data + extra, f"append {len(extra)} bytes"
    return mutate_bytes(data, rng, others)
