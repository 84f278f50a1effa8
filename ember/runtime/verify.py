"""Checks that run once, before a program or a kernel library is trusted.

An exported model is a shared library holding native code, a program (JSON) and weights. Two
kinds of check run before ``ember.load`` uses any offset from it:

- **Integrity** (:func:`seal`, :func:`check_seal`): ``export`` appends a manifest (what the
  code needs of a host) and a trailer to the library -- a SHA-256 of every byte before it, and
  that length -- and ``load`` recomputes it before ``dlopen`` sees the file, so a truncated or
  corrupted file (program, metadata, weights, code) is a :class:`ModelError`, never a crash
  inside the loader or a kernel.
- **Structure** (:func:`verify_metadata`, :func:`verify_program`): every field the runtime
  reads is of the right type and in range -- dtypes among Ember's, shapes of non-negative
  ints, every slot index, arena range and weights range in bounds, every call's arity, dtypes
  and shapes equal to its kernel's parameters, written arguments in writable memory that no
  other argument of the call overlaps. The same checks run on every freshly compiled program,
  so they are checked against the compiler's own output all the time.

This is integrity, not trust: a library is native code, and loading it runs it (its
constructors run at ``dlopen``). Load exports only from sources you would run a program from.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any, Optional, Sequence

from ..errors import ModelError
from . import shapes

# the dtypes a kernel or a slot may have (ember.loop.dtype.SCALAR_TYPES; the runtime does not
# import the loop IR)
DTYPES = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2,
          "uint32": 4, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
SLOT_KINDS = ("input", "const", "arena", "output", "view", "value")
MAX_BYTES = 1 << 48  # no tensor or arena is larger: a size past it is a corrupted field
ARENA_ALIGN = 64  # the arena's base and every constant of an export are 64-byte aligned

SEAL_MAGIC = b"EMBERSL2"
OLD_MAGICS = (b"EMBERSL1",)
_SEAL = struct.Struct("<32sQ8s")  # sha256 of the bytes before the trailer, their count, magic
_LEN = struct.Struct("<Q")
MAX_MANIFEST = 1 << 20


# -- integrity --------------------------------------------------------------------------------

def _digest(f, n: int) -> bytes:
    h = hashlib.sha256()
    left = n
    while left:
        chunk = f.read(min(left, 1 << 22))
        if not chunk:
            break
        h.update(chunk)
        left -= len(chunk)
    return h.digest()


def _manifest_bytes(manifest: Optional[dict]) -> bytes:
    text = json.dumps(manifest or {}, sort_keys=True).encode("utf-8")
    return text + _LEN.pack(len(text))


def seal(path: str, manifest: Optional[dict] = None) -> None:
    """Append ``manifest`` (what the export needs of a host: :mod:`ember.runtime.requirements`)
    and the integrity trailer to the library at ``path`` (done by ``export``)."""
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.write(_manifest_bytes(manifest))
        n = f.tell()
        f.seek(0)
        digest = _digest(f, n)
        f.seek(n)
        f.write(_SEAL.pack(digest, n, SEAL_MAGIC))


def reseal(data: bytes, manifest: Optional[dict] = None) -> bytes:
    """``data`` (an export's bytes, sealed or not) with a fresh trailer, over the same manifest
    or ``manifest``. For tests and the fuzzer: they change an export's contents consistently,
    to reach the structure checks behind the checksum."""
    if len(data) >= _SEAL.size and data[-8:] == SEAL_MAGIC:
        data = data[:-_SEAL.size]
        if manifest is not None:
            (m,) = _LEN.unpack(data[-_LEN.size:])
            data = data[:-_LEN.size - m] + _manifest_bytes(manifest)
    else:
        data = data + _manifest_bytes(manifest)
    return data + _SEAL.pack(hashlib.sha256(data).digest(), len(data), SEAL_MAGIC)


def check_seal(path: str) -> dict:
    """The export's manifest, after checking that ``path`` ends in a trailer whose checksum and
    length match the bytes before it; :class:`ModelError` otherwise."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if size < _SEAL.size + _LEN.size + 64:
                raise ModelError(f"{path}: {size} bytes is too short to be an exported Ember model "
                                 f"(truncated?)")
            f.seek(size - _SEAL.size)
            digest, n, magic = _SEAL.unpack(f.read(_SEAL.size))
            if magic in OLD_MAGICS:
                raise ModelError(f"{path} was exported by an older Ember; export the model again")
            if magic != SEAL_MAGIC:
                raise ModelError(f"{path} has no Ember export trailer: it is truncated, was modified "
                                 f"after export (stripped?), or is not an exported model")
            if n != size - _SEAL.size:
                raise ModelError(f"{path} is {size} bytes but was exported as {n + _SEAL.size}: "
                                 f"truncated or extended")
            f.seek(0)
            if _digest(f, n) != digest:
                raise ModelError(f"{path} is corrupted: its checksum does not match the one written "
                                 f"at export (program, metadata, weights or code changed)")
            f.seek(n - _LEN.size)
            (m,) = _LEN.unpack(f.read(_LEN.size))
            if m > min(MAX_MANIFEST, n - _LEN.size - 64):
                raise ModelError(f"{path}: its manifest length {m} is out of range")
            f.seek(n - _LEN.size - m)
            try:
                manifest = json.loads(f.read(m).decode("utf-8"))
            except ValueError as exc:
                raise ModelError(f"{path}: its manifest is not JSON ({exc})") from None
            if not isinstance(manifest, dict):
                raise ModelError(f"{path}: its manifest is not a JSON object")
            f.seek(0)
            if f.read(4) != b"\x7fELF":
                raise ModelError(f"{path} is not a shared library (no ELF header)")
            return manifest
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc


# -- structure --------------------------------------------------------------------------------

class _Checker:
    def __init__(self, where: str):
        self.where = where

    def fail(self, what: str):
        raise ModelError(f"{self.where}: {what}")

    def dict(self, v, what: str, keys: Sequence[str] = ()) -> dict:
        if not isinstance(v, dict):
            self.fail(f"{what} must be an object, got {type(v).__name__}")
        for k in keys:
            if k not in v:
                self.fail(f"{what} has no {k!r}")
        return v

    def list(self, v, what: str) -> list:
        if not isinstance(v, list):
            self.fail(f"{what} must be a list, got {type(v).__name__}")
        return v

    def str(self, v, what: str) -> str:
        if not isinstance(v, str):
            self.fail(f"{what} must be a string, got {type(v).__name__}")
        return v

    def int(self, v, what: str, lo: int = 0, hi: int = MAX_BYTES) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v < hi:
            self.fail(f"{what} must be an integer in [{lo}, {hi}), got {v!r:.40}")
        return v

    def dtype(self, v, what: str) -> str:
        if v not in DTYPES:
            self.fail(f"{what} has dtype {v!r:.40}; an Ember dtype is one of {', '.join(DTYPES)}")
        return v

    def shape(self, v, what: str, symbols=()) -> tuple:
        self.list(v, f"{what}'s shape")
        if len(v) > 32:
            self.fail(f"{what} has rank {len(v)}")
        out = []
        for k, d in enumerate(v):
            if isinstance(d, (str, list)):
                if not shapes.is_valid(d, symbols):
                    self.fail(f"{what}'s shape entry {k} is not a dimension over the program's symbols")
                out.append(d)
            else:
                out.append(self.int(d, f"{what}'s shape entry {k}"))
        return tuple(out)

    def tensor(self, v, what: str, symbols=()) -> tuple:
        """(shape, dtype, bytes) of a {shape, dtype} entry (bytes None for a symbolic shape)."""
        shape, dtype = self.shape(v.get("shape"), what, symbols), self.dtype(v.get("dtype"), what)
        if not all(isinstance(d, int) for d in shape):
            return shape, dtype, None
        n = DTYPES[dtype]
        for d in shape:
            n *= d
        if n >= MAX_BYTES:
            self.fail(f"{what} of shape {shape} {dtype} is {n} bytes")
        return shape, dtype, n


def _check_dim(c: _Checker, e, what: str, depth: int = 0) -> None:
    if depth > shapes.MAX_DEPTH:
        c.fail(f"{what} nests too deep")
    if e is None or isinstance(e, str) or (isinstance(e, int) and not isinstance(e, bool)):
        return
    if (isinstance(e, list) and len(e) == 3 and e[0] in ("Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Min", "Max")):
        _check_dim(c, e[1], what, depth + 1)
        _check_dim(c, e[2], what, depth + 1)
        return
    c.fail(f"{what} is not a dimension: {e!r:.60}")


def verify_metadata(meta: Any, path: str) -> None:
    """Check a kernel library's metadata (``__ember_metadata``) before kernels are made from it."""
    c = _Checker(f"{path}: kernel metadata")
    c.dict(meta, "the metadata", ("kernels",))
    names = set()
    for k, kern in enumerate(c.list(meta["kernels"], "kernels")):
        c.dict(kern, f"kernel #{k}", ("name", "params"))
        name = c.str(kern["name"], f"kernel #{k}'s name")
        if not name.isidentifier() or name in names:
            c.fail(f"kernel #{k}'s name {name!r:.60} is not a unique identifier")
        names.add(name)
        for j, p in enumerate(c.list(kern["params"], f"kernel {name!r}'s params")):
            what = f"kernel {name!r} parameter #{j}"
            c.dict(p, what, ("kind", "name", "dtype"))
            c.str(p["name"], f"{what}'s name")
            c.dtype(p["dtype"], what)
            if p["kind"] == "buffer":
                for key in ("shape", "strides"):
                    dims = p.get(key)
                    if dims is None and key == "strides":
                        continue
                    for i, d in enumerate(c.list(dims, f"{what}'s {key}")):
                        _check_dim(c, d, f"{what}'s {key} entry {i}")
                align = p.get("align", 1)
                c.int(align, f"{what}'s alignment", 1, 4097)
                if align & (align - 1):
                    c.fail(f"{what}'s alignment {align} is not a power of two")
            elif p["kind"] == "scalar":
                if p.get("abi") not in ("double", "int64"):
                    c.fail(f"{what} has scalar ABI {p.get('abi')!r:.40}")
            else:
                c.fail(f"{what} has kind {p['kind']!r:.40}")


def verify_program(program: Any, module, n_constants: Optional[int] = None,
                   constants: Optional[Sequence] = None, where: str = "program") -> None:
    """Check an executable's program against its kernels (``module``, or None when it has none)
    before any slot, offset or call of it is used. ``constants``: the arrays the ``const`` slots
    index (their shapes and dtypes must match), or just their count.

    A program over symbolic shapes (``symbols``) is checked here for everything that does not
    depend on their values; what does (the memory plan, each call's shapes) is checked by its
    :class:`~ember.runtime.layout.Layout` for each new set of values, before a run uses it."""
    c = _Checker(where)
    c.dict(program, "the program", ("inputs", "outputs", "slots", "calls", "arena_bytes"))
    symbols = _symbols(c, program)
    if symbols or program.get("controls"):
        arena_bytes = None
        if program["arena_bytes"] is not None:
            c.fail("a program over symbolic shapes or with control steps plans its arena per run: "
                   "arena_bytes must be null")
    else:
        arena_bytes = c.int(program["arena_bytes"], "arena_bytes")
    if constants is not None:
        n_constants = len(constants)
    slots = c.list(program["slots"], "slots")
    calls = c.list(program["calls"], "calls")
    info = []  # (kind, shape, dtype, nbytes or None, root slot, arena range or None)
    for k, s in enumerate(slots):
        what = f"slot {k}"
        c.dict(s, what, ("kind", "shape", "dtype"))
        kind = s["kind"]
        if kind not in SLOT_KINDS:
            c.fail(f"{what} has kind {kind!r:.40}; a slot is one of {', '.join(SLOT_KINDS)}")
        shape, dtype, n = c.tensor(s, what, symbols)
        root, rng = k, None
        if kind == "const":
            if n_constants is None:
                c.fail(f"{what} is a constant but the program has none")
            if n is None:
                c.fail(f"{what} is a constant of symbolic shape {shape}")
            i = c.int(s.get("index"), f"{what}'s constant index", 0, n_constants)
            if constants is not None:
                a = constants[i]
                if tuple(a.shape) != shape or str(a.dtype) != dtype:
                    c.fail(f"{what} is constant {i} as {shape} {dtype}, but that constant is "
                           f"{tuple(a.shape)} {a.dtype}")
        elif kind == "arena" and arena_bytes is not None:
            off = c.int(s.get("offset"), f"{what}'s arena offset")
            if off + n > arena_bytes:
                c.fail(f"{what} ({n} bytes at offset {off}) runs past the arena's {arena_bytes} bytes")
            rng = (off, off + n)
        if kind == "arena" and (arena_bytes is None or "live" in s):  # planned per run from its lifetime
            live = c.list(s.get("live"), f"{what}'s lifetime")
            if len(live) != 2:
                c.fail(f"{what}'s lifetime must be [first call, last call]")
            first = c.int(live[0], f"{what}'s first call", 0, max(1, len(calls)))
            c.int(live[1], f"{what}'s last call", first, max(1, len(calls)))
        elif kind == "view":
            base = c.int(s.get("base"), f"{what}'s base", 0, k)  # a view comes after its base
            bkind, _, _, bn, root, rng = info[base]
            if bkind == "view":
                c.fail(f"{what} is a view of slot {base}, itself a view")
            if "offset" in s:  # a part of its base's bytes (a concat's part, written in place)
                if bkind != "arena":
                    c.fail(f"{what} views slot {base}, a {bkind}, at an offset (only arena values have parts)")
                off = c.int(s["offset"], f"{what}'s offset in its base", 0)
                if bn is None or n is None or off + n > bn:
                    c.fail(f"{what} ({n} bytes at offset {off}) runs past slot {base} ({bn} bytes)")
                if rng is not None:
                    rng = (rng[0] + off, rng[0] + off + n)
            elif bn is not None and n is not None and bn != n:
                c.fail(f"{what} views slot {base} ({bn} bytes) as {shape} {dtype} ({n} bytes)")
        info.append((kind, shape, dtype, n, root, rng))

    def io(entries, what: str, kinds: tuple) -> list:
        out = []
        for k, e in enumerate(c.list(entries, what)):
            w = f"{what[:-1]} #{k}"
            c.dict(e, w, ("name", "shape", "dtype", "slot"))
            c.str(e["name"], f"{w}'s name")
            shape, dtype, _ = c.tensor(e, w, symbols)
            s = c.int(e["slot"], f"{w}'s slot", 0, len(slots))
            if info[s][0] not in kinds or info[s][1:3] != (shape, dtype):
                c.fail(f"{w} ({shape} {dtype}) is slot {s}, a {info[s][0]} of {info[s][1]} {info[s][2]}")
            out.append(s)
        return out

    in_slots = io(program["inputs"], "inputs", ("input",))
    if sorted(in_slots) != sorted(k for k, i in enumerate(info) if i[0] == "input") or \
            len(set(in_slots)) != len(in_slots):
        c.fail("the input slots and the inputs do not match one to one")
    data = _binds(c, program, symbols, info, len(calls))
    _controls(c, program, info, len(calls))
    bare = {d for k in in_slots for d in info[k][1] if isinstance(d, str)}
    if bare != set(symbols) - data:
        c.fail(f"the symbols {sorted(set(symbols) - data)} and the inputs' symbolic dims {sorted(bare)} differ")
    io(program["outputs"], "outputs", SLOT_KINDS)
    for k, o in enumerate(program["outputs"]):
        copy = c.dict(o, f"output #{k}", ("copy",))["copy"]
        if not isinstance(copy, bool):
            c.fail(f"output #{k}'s copy flag must be true or false")
        if not copy and info[o["slot"]][0] != "output":
            c.fail(f"output #{k} is not copied, so its slot {o['slot']} must be an output slot")
    # an output slot's memory is the new array of exactly one uncopied output (else it has none)
    direct = [o["slot"] for o in program["outputs"] if not o.get("copy", False)]
    if sorted(direct) != sorted(k for k, i in enumerate(info) if i[0] == "output") or \
            len(set(direct)) != len(direct):
        c.fail("the output slots and the uncopied outputs do not match one to one")
    names = program.get("output_names")
    if names is not None:
        if len(c.list(names, "output_names")) != len(program["outputs"]):
            c.fail("output_names and outputs differ in length")
        for k, n in enumerate(names):
            c.str(n, f"output name #{k}")

    if calls and module is None:
        c.fail("the program calls kernels but has no kernel library")
    for k, call in enumerate(calls):
        c.dict(call, f"call {k}", ("kernel", "args"))
        name = c.str(call["kernel"], f"call {k}'s kernel")
        if name not in module:
            c.fail(f"call {k} names kernel {name!r:.60}, which the library does not have")
        kern = module[name]
        args = c.list(call["args"], f"call {k}'s args")
        what = f"call {k} ({name})"
        if len(args) != len(kern._bufs):
            c.fail(f"{what} passes {len(args)} argument(s) to {kern.signature()}")
        sizes = c.dict(call.get("scalars", {}), f"{what}'s sizes")
        for sname, e in sizes.items():
            if not shapes.is_valid(e, symbols):
                c.fail(f"{what}'s size {sname!r:.40} is not a dimension over the program's symbols")
        missing = [n for n, _, _ in kern._scalars if n not in sizes and n not in symbols]
        if missing:
            c.fail(f"{what}: the kernel takes size(s) {', '.join(missing)}, which the program does not give")
        for n_, key in (("flops", "flops"), ("bytes", "bytes")):
            if key in call and not shapes.is_valid(call[key], symbols):
                c.fail(f"{what}'s {n_} is not a dimension over the program's symbols")
        written = []
        for j, (a, p) in enumerate(zip(args, kern._bufs)):
            a = c.int(a, f"{what}'s argument {j}", 0, len(slots))
            kind, shape, dtype, _, root, rng = info[a]
            if dtype != p.dtype_name or len(shape) != p.ndim or \
                    any(isinstance(d, int) and isinstance(g, int) and d != g for d, g in zip(p.shape, shape)):
                c.fail(f"{what} passes slot {a} ({shape} {dtype}) as {p.name!r}, which is "
                       f"{[d if isinstance(d, int) else '?' for d in p.shape]} {p.dtype_name}")
            if p.strides is not None:  # slots are C-contiguous: a kernel with other strides
                for d, (want, got) in enumerate(zip(p.strides, _c_strides(shape))):
                    if isinstance(want, int) and isinstance(got, int) and isinstance(shape[d], int) and \
                            shape[d] > 1 and want != got:
                        c.fail(f"{what}: {p.name!r} needs strides {p.strides}, slot {a} is C-contiguous")
            if rng is not None and p.align_mask and (rng[0] & p.align_mask):
                c.fail(f"{what}: slot {a} at arena offset {rng[0]} is not {p.align_mask + 1}-byte aligned "
                       f"as {p.name!r} needs")
            if p.output:
                if info[root][0] not in ("arena", "output"):
                    c.fail(f"{what} writes {p.name!r} into slot {a}, a {info[root][0]} (read-only)")
                written.append((j, a, root, rng))
        # a written argument shares no memory with any other argument of the call (arena slots
        # planned per run are placed apart while alive, and every argument is alive at its call)
        for j, a, root, rng in written:
            for i, b in enumerate(args):
                if i == j:
                    continue
                bkind, _, _, _, broot, brng = info[b]
                if rng is None or brng is None:
                    same = broot == root
                else:
                    same = rng[0] < brng[1] and brng[0] < rng[1] and rng[1] > rng[0] and brng[1] > brng[0]
                if same:
                    c.fail(f"{what} writes argument {j} (slot {a}) over the memory of argument {i} "
                           f"(slot {b})")
        if arena_bytes is None:  # a planned slot must be alive at each call that uses it
            for a in args:
                r = info[a][4]
                if info[r][0] == "arena":
                    first, last = slots[r]["live"]
                    if not first <= k <= last:
                        c.fail(f"{what} uses slot {a} outside its lifetime {slots[r]['live']}")


def _binds(c: "_Checker", program: dict, symbols: list, info: list, ncalls: int) -> set:
    """The symbols the program binds while running (validated): each once, from an integer
    slot, after a call that exists (-1: before the first)."""
    data = set()
    for k, b in enumerate(c.list(program.get("binds", []), "binds")):
        w = f"bind #{k}"
        c.dict(b, w, ("after", "symbol", "slot"))
        c.int(b["after"], f"{w}'s call", -1, max(ncalls, 0))
        sym = c.str(b["symbol"], f"{w}'s symbol")
        if sym not in symbols or sym in data:
            c.fail(f"{w} binds {sym!r:.40}, which is not a symbol of the program or is bound twice")
        data.add(sym)
        slot = c.int(b["slot"], f"{w}'s slot", 0, len(info))
        if "axis" in b:  # a dimension of a value
            c.int(b["axis"], f"{w}'s axis", 0, max(1, len(info[slot][1])))
            continue
        if info[slot][2] not in ("int32", "int64", "float16", "float32", "float64"):  # (floats truncate)
            c.fail(f"{w} reads slot {slot}, which holds {info[slot][2]}, not numbers")
        c.int(b.get("index"), f"{w}'s index")
    return data


def _controls(c: "_Checker", program: dict, info: list, ncalls: int) -> None:
    """Control steps (validated): after a call; slots that exist; subgraph functions that exist
    and take and return what the step passes and expects; results in ``value`` slots, each set
    by exactly one step."""
    functions = c.list(program.get("functions", []), "functions")
    set_by: dict = {}

    def function(w: str, step: dict, key: str, n_in: int, n_out: int) -> None:
        f = c.int(step[key], f"{w}'s {key} function", 0, len(functions))
        sub = c.dict(functions[f], f"function {f}", ("inputs", "outputs"))
        if len(c.list(sub["inputs"], f"function {f}'s inputs")) != n_in:
            c.fail(f"{w} passes {n_in} argument(s) to function {f}, which takes {len(sub['inputs'])}")
        if len(c.list(sub["outputs"], f"function {f}'s outputs")) != n_out:
            c.fail(f"{w}: function {f} returns {len(sub['outputs'])} value(s), the step takes {n_out}")

    for k, step in enumerate(c.list(program.get("controls", []), "controls")):
        w = f"control step #{k}"
        c.dict(step, w, ("after", "kind", "args", "outs"))
        c.int(step["after"], f"{w}'s call", -1, max(ncalls, 0))  # (-1: before the first call)
        args = [c.int(a, f"{w}'s argument", 0, len(info)) for a in c.list(step["args"], f"{w}'s args")]
        outs = c.list(step["outs"], f"{w}'s outs")
        kind = step["kind"]
        if kind == "if":
            c.dict(step, w, ("cond", "then", "else", "n_then"))
            c.int(step["cond"], f"{w}'s condition", 0, len(info))
            n_then = c.int(step["n_then"], f"{w}'s n_then", 0, len(args) + 1)
            function(w, step, "then", n_then, len(outs))
            if step["else"] == -1:  # an error branch: its message, and no arguments
                if not isinstance(step.get("else_error"), str) or n_then != len(args):
                    c.fail(f"{w} has no else function but no error message for it, or arguments for it")
            else:
                function(w, step, "else", len(args) - n_then, len(outs))
        elif kind == "loop":
            c.dict(step, w, ("body", "has_trip", "has_cond", "n_carried", "n_scan"))
            fixed = int(bool(step["has_trip"])) + int(bool(step["has_cond"]))
            n = c.int(step["n_carried"], f"{w}'s n_carried", 0, len(args) - fixed + 1)
            m = c.int(step["n_scan"], f"{w}'s n_scan", 0, 1 << 16)
            if len(outs) != n + m:
                c.fail(f"{w} has {len(outs)} result(s) for {n} carried and {m} scanned value(s)")
            function(w, step, "body", 2 + len(args) - fixed, 1 + n + m)
        elif kind == "scan":
            c.dict(step, w, ("body", "n_states", "n_scan_in", "in_axes", "in_dirs", "out_axes", "out_dirs"))
            n = c.int(step["n_states"], f"{w}'s n_states", 0, len(args) + 1)
            m = c.int(step["n_scan_in"], f"{w}'s n_scan_in", 0, len(args) - n + 1)
            for key, count in (("in_axes", m), ("in_dirs", m), ("out_axes", len(outs) - n), ("out_dirs", len(outs) - n)):
                vals = c.list(step[key], f"{w}'s {key}")
                if len(vals) != count:
                    c.fail(f"{w}'s {key} has {len(vals)} entries, not {count}")
                for j, v in enumerate(vals):
                    c.int(v, f"{w}'s {key} entry {j}", 0, 33)
            for j, (a, x) in enumerate(zip(step["in_axes"], args[n:n + m])):
                if a >= len(info[x][1]):
                    c.fail(f"{w} scans axis {a} of slot {x}, which has rank {len(info[x][1])}")
            function(w, step, "body", len(args), len(outs))
        else:
            c.fail(f"{w} has kind {kind!r:.40}")
        for o in outs:
            o = c.int(o, f"{w}'s result slot", 0, len(info))
            if info[o][0] != "value" or o in set_by:
                c.fail(f"{w} sets slot {o}, which is not a value slot or is set twice")
            set_by[o] = k
    unset = [k for k, i in enumerate(info) if i[0] == "value" and k not in set_by]
    if unset:
        c.fail(f"value slots {unset} are set by no control step")


def _symbols(c: "_Checker", program: dict) -> list:
    """The program's symbols and checks (validated); [] for a static program."""
    symbols = c.list(program.get("symbols", []), "symbols")
    for k, name in enumerate(symbols):
        if not isinstance(name, str) or not name or len(name) > 256:
            c.fail(f"symbol #{k} must be a non-empty name")
    if len(set(symbols)) != len(symbols):
        c.fail("the symbols repeat a name")
    for k, chk in enumerate(c.list(program.get("checks", []), "checks")):
        c.dict(chk, f"check #{k}", ("cond", "what"))
        c.str(chk["what"], f"check #{k}'s message")
        if not shapes.is_valid(chk["cond"], symbols):
            c.fail(f"check #{k}'s condition is not an expression over the program's symbols")
    return symbols


def _c_strides(shape: tuple) -> list:
    """Element strides of a C-contiguous array (None past a symbolic dim)."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc = acc * max(d, 1) if isinstance(d, int) and acc is not None else None
    return out[::-1]


def verify_constant_layout(layout: Any, blob_bytes: int, where: str) -> list:
    """Check an export's constant table (offsets into the weights blob); returns
    ``[(offset, shape, dtype)]``."""
    c = _Checker(where)
    out = []
    for k, e in enumerate(c.list(layout, "constants")):
        w = f"constant {k}"
        c.dict(e, w, ("offset", "shape", "dtype"))
        shape, dtype, n = c.tensor(e, w)
        off = c.int(e["offset"], f"{w}'s offset")
        if off % ARENA_ALIGN:
            c.fail(f"{w}'s offset {off} is not {ARENA_ALIGN}-byte aligned")
        if off + n > blob_bytes:
            c.fail(f"{w} ({n} bytes at offset {off}) runs past the {blob_bytes} bytes of weights")
        out.append((off, shape, dtype))
    return out


__all__ = ["check_seal", "reseal", "seal", "verify_constant_layout", "verify_metadata", "verify_program"]
