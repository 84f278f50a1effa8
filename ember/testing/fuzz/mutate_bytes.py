"""Byte-level mutators, ``(bytes, rng, ...) -> (bytes, description)``, and the interesting
values they write (boundary integers, special floats, varints)."""
from __future__ import annotations

import random
import struct
from typing import List, Optional


INTERESTING_INTS = [0, 1, -1, 2, -2, 3, 4, 7, 8, 16, 64, 255, 1000, 65535, 65536, 2 ** 31 - 1, -2 ** 31,
                    2 ** 32, 2 ** 40, 2 ** 62, 2 ** 63 - 1, -2 ** 63]
INTERESTING_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, 1e30, 3.4e38, 1e-45, float("inf"), float("-inf"), float("nan")]


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


INTERESTING_BYTES = ([b"\x00", b"\xff", b"\x7f", b"\x80", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff"]
                     + [struct.pack("<q", v) for v in (0, -1, 2 ** 31 - 1, 2 ** 32, 2 ** 63 - 1, -2 ** 63)]
                     + [struct.pack("<i", v) for v in (-1, 2 ** 31 - 1, -2 ** 31, 65536)]
                     + [struct.pack("<f", v) for v in (float("nan"), float("inf"), 1e30)]
                     + [_varint(v) for v in (0, 2 ** 31, 2 ** 32, 2 ** 63 - 1, -1)])


def _int(rng: random.Random) -> int:
    return rng.choice(INTERESTING_INTS) if rng.random() < 0.7 else rng.randint(-10, 100)


def _float(rng: random.Random) -> float:
    return rng.choice(INTERESTING_FLOATS) if rng.random() < 0.7 else rng.uniform(-10, 10)


# ------------------------------------------------------------------------------------------------
# byte-level mutators: (bytes, rng, context) -> (bytes, description)
# ------------------------------------------------------------------------------------------------


def _span(rng: random.Random, lo: int, hi: int, n: int = 1) -> int:
    """A position in [lo, hi - n] (lo when the range is too small)."""
    return rng.randint(lo, max(lo, hi - n))


def flip_bits(data: bytes, rng: random.Random, lo: int = 0, hi: Optional[int] = None) -> tuple:
    hi = len(data) if hi is None else hi
    b = bytearray(data)
    if not b or hi <= lo:
        return data, "flip (empty)"
    k = rng.randint(1, 8)
    where = []
    for _ in range(k):
        i = _span(rng, lo, hi)
        b[i] ^= 1 << rng.randrange(8)
        where.append(i)
    return bytes(b), f"flip {k} bit(s) at {where[:4]}"


def overwrite_interesting(data: bytes, rng: random.Random, lo: int = 0, hi: Optional[int] = None) -> tuple:
    hi = len(data) if hi is None else hi
    v = rng.choice(INTERESTING_BYTES)
    if hi - lo < len(v):
        return flip_bits(data, rng, lo, hi)
    i = _span(rng, lo, hi, len(v))
    return data[:i] + v + data[i + len(v):], f"overwrite {v.hex()} at {i}"


def overwrite_random(data: bytes, rng: random.Random, lo: int = 0, hi: Optional[int] = None) -> tuple:
    hi = len(data) if hi is None else hi
    n = min(rng.choice([1, 2, 4, 8, 16, 64]), max(0, hi - lo))
    if not n:
        return data, "overwrite (empty)"
    i = _span(rng, lo, hi, n)
    fill = rng.choice([bytes(n), b"\xff" * n, bytes(rng.randrange(256) for _ in range(n))])
    return data[:i] + fill + data[i + n:], f"overwrite {n} byte(s) at {i} with {fill[:8].hex()}"


def insert_bytes(data: bytes, rng: random.Random) -> tuple:
    i = rng.randint(0, len(data))
    v = rng.choice(INTERESTING_BYTES) if rng.random() < 0.5 else bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return data[:i] + v + data[i:], f"insert {v.hex()} at {i}"


def delete_bytes(data: bytes, rng: random.Random) -> tuple:
    if not data:
        return data, "delete (empty)"
    n = rng.randint(1, min(64, len(data)))
    i = _span(rng, 0, len(data), n)
    return data[:i] + data[i + n:], f"delete {n} byte(s) at {i}"


def truncate(data: bytes, rng: random.Random) -> tuple:
    n = rng.choice([0, rng.randint(0, len(data)), max(0, len(data) - rng.randint(1, 64))])
    return data[:n], f"truncate to {n} of {len(data)} bytes"


def splice(data: bytes, rng: random.Random, others: List[bytes]) -> tuple:
    other = rng.choice(others)
    i, j = rng.randint(0, len(data)), rng.randint(0, len(other))
    return data[:i] + other[j:], f"splice at {i} with another seed from {j}"


def mutate_bytes(data: bytes, rng: random.Random, others: List[bytes]) -> tuple:
    """One byte-level mutation anywhere in ``data``."""
    m = rng.choice([flip_bits, flip_bits, overwrite_interesting, overwrite_interesting, overwrite_random,
                    insert_bytes, delete_bytes, truncate, splice])
    return m(data, rng, others) if m is splice else m(data, rng)
