"""A program's memory and calls laid out for one set of symbol values.

A program's shapes may name symbols (``batch``, ``seq``) that a run binds from its inputs'
shapes. Everything that follows from them -- every slot's shape, the checks the compiler
recorded (two inputs that must share ``seq``), the memory plan of the intermediates, each
kernel's size arguments and the native runner's program words -- is worked out once per new
set of values and kept (:class:`Layouts`), so a run at a shape seen before pays a dict lookup.
A static program has one layout, made when it is loaded.

**Sizes known only while running.** A program's ``binds`` name symbols whose values a kernel
computes (the number of nonzeros, say) or that an input's *values* give: after call ``k``
(``-1``: before any), symbol := element ``index`` of slot ``slot``. The calls between binds
form *phases*; a phase is laid out when it starts, once every symbol its values need is bound,
and its intermediates live in an arena of their own (reused inside the phase, kept until the
run ends), since sizes not yet known cannot be planned beside them.
"""
from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Optional

import numpy as np

from ..errors import ModelError, ResourceError, ShapeError
from .memory_plan import Interval, plan_memory
from .ndarray import numpy_dtype
from .shapes import compile_shapes, evaluate, shape_symbols, symbols_of, text

SYMBOL_MAX = 1 << 40  # a symbol's value must lie in [1, SYMBOL_MAX] (what the compiler assumed)


def bind_symbols(inputs: list, arrays: list, symbols: list, data: frozenset = frozenset()) -> dict:
    """Symbol values from the input arrays' shapes (``inputs``: the program's input entries);
    every declared dimension is checked. ShapeError names the input, the axis and the symbol.
    ``data``: the symbols the program binds later (from values, not shapes)."""
    env: dict = {}
    later = []
    for info, a in zip(inputs, arrays):
        shape = a.shape
        want = info["shape"]
        if len(shape) != len(want):
            raise ShapeError(f"input {info['name']!r} must have rank {len(want)} "
                             f"({_shape_text(want)}), got shape {shape}")
        for axis, (w, got) in enumerate(zip(want, shape)):
            if isinstance(w, int):
                if w != got:
                    raise ShapeError(f"input {info['name']!r} must have shape {_shape_text(want)}, got {shape} "
                                     f"(axis {axis} must be {w})")
            elif isinstance(w, str) and w not in env:
                if not (0 if w.startswith("?") else 1) <= got <= SYMBOL_MAX:  # '?': a data size, may be 0
                    raise ShapeError(f"input {info['name']!r} axis {axis} ({w}) is {got}: a symbolic "
                                     f"dimension must be at least 1")
                env[w] = got
            else:
                later.append((info, axis, w, got))
    for info, axis, w, got in later:
        value = evaluate(w, env)
        if value != got:
            raise ShapeError(f"input {info['name']!r} axis {axis} must be {text(w)} = {value} "
                             f"({_bound(env)}), got {got}")
    missing = [s for s in symbols if s not in env and s not in data]
    if missing:
        raise ModelError(f"the program's symbols {', '.join(missing)} are not dimensions of any input")
    return env


def _bound(env: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items())


def _shape_text(shape) -> str:
    return "(" + ", ".join(text(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


@dataclasses.dataclass
class Phase:
    """Calls ``[start, end)`` of a program, laid out together (see the module docstring)."""

    index: int
    start: int
    end: int
    slots: list  # the slots whose values it makes (arena, output and views of them)
    arena: list  # of those, the arena slots
    checks: list  # the checks first decidable when it starts
    binds: list  # what is bound after it: [(symbol, slot, index, axis)] (an element, or a dim)
    known: frozenset  # the symbols bound when it starts
    controls: list = dataclasses.field(default_factory=list)  # control steps run after it (before binds)


def data_symbols(program: dict) -> frozenset:
    return frozenset(b["symbol"] for b in program.get("binds", ()))


def phases_of(program: dict) -> tuple:
    """``(binds before the first call, [Phase])``; ModelError where a value needs a symbol
    that is bound only later."""
    binds = program.get("binds", [])
    controls = program.get("controls", [])
    calls, slots = program["calls"], program["slots"]
    # a phase ends where a bind or a control step comes (a control step may come first of all)
    cuts = sorted({b["after"] + 1 for b in binds if b["after"] >= 0} | {c["after"] + 1 for c in controls})
    bounds, start = [], 0
    for c in cuts:
        bounds.append((start, c))
        start = c
    if start < len(calls) or not bounds:
        bounds.append((start, len(calls)))
    first_use: dict = {}
    for k, c in enumerate(calls):
        for a in c["args"]:
            first_use.setdefault(a, k)
    owner: dict = {}
    for k, s in enumerate(slots):
        if s["kind"] in ("input", "const", "value"):  # (a value: set by a control step)
            owner[k] = -1
        elif s["kind"] == "view":
            owner[k] = owner.get(s["base"], -1)
        else:
            c = s["live"][0] if s["kind"] == "arena" and "live" in s else first_use.get(k, 0)
            owner[k] = next(i for i, (a, b) in enumerate(bounds) if a <= c < b or i == len(bounds) - 1)
    input_syms = frozenset(program.get("symbols", ())) - data_symbols(program)
    known = input_syms | {b["symbol"] for b in binds if b["after"] < 0 and "axis" not in b}
    def bind(b):
        return b["symbol"], b["slot"], b.get("index"), b.get("axis")

    # before anything: sizes from the inputs' (or constants') values; a control step's sizes
    # come after it (even when it comes first of all)
    pre = [bind(b) for b in binds if b["after"] < 0 and "axis" not in b]
    checks = list(program.get("checks", ()))
    phases = []
    for i, (a, b) in enumerate(bounds):
        mine = [k for k in range(len(slots)) if owner[k] == i]
        for k in mine:
            need = shape_symbols(slots[k]["shape"]) - known
            if need:
                raise ModelError(f"slot {k} (made by call {first_use.get(k)}) needs {', '.join(sorted(need))}, "
                                 f"which is bound only later")
        ready = [c for c in checks if symbols_of(c["cond"], set()) <= known]
        checks = [c for c in checks if c not in ready]
        after = [bind(x) for x in binds if x["after"] == b - 1 and (x["after"] >= 0 or "axis" in x)]
        steps = [c for c in controls if c["after"] == b - 1]
        phases.append(Phase(i, a, b, mine, [k for k in mine if slots[k]["kind"] == "arena"], ready, after,
                            known, steps))
        known = known | {x[0] for x in after}
    if checks:
        raise ModelError(f"the checks {[c['what'] for c in checks]} need symbols no bind gives")
    return pre, phases


class Layout:
    """One phase at one set of symbol values: concrete slot shapes, arena offsets, call
    arguments (a static program: its one phase, with the compiler's memory plan)."""

    __slots__ = ("env", "phase", "shapes", "offsets", "arena_bytes", "out_new", "scalars", "words",
                 "intermediate_bytes", "capacity")

    def __init__(self, program: dict, calls: list, env: dict, phase: Phase, earlier: Optional["Layout"],
                 slot_shapes, itemsize: list, prior: Optional["Layout"], call_scalars):
        # (``slot_shapes``: every slot's shape at once, compiled (``shapes.compile_shapes``;
        # None where not bound yet); ``itemsize``: each slot's element size; ``call_scalars``:
        # every call's size arguments at once, compiled likewise: made once per program by
        # :class:`Layouts`; ``prior``: this phase's layout made last)
        self.env = env
        self.phase = phase
        for chk in phase.checks:
            if not evaluate(chk["cond"], env):
                raise ShapeError(f"the shapes ({_bound(env)}) break what the model's shapes "
                                 f"need: {chk['what']}")
        slots = program["slots"]
        # every slot made so far (earlier phases' and this one's) has a shape now
        self.shapes = shapes = list(earlier.shapes) if earlier is not None else [None] * len(slots)
        nbytes = {}
        evaluated = slot_shapes(env)
        for k, s in enumerate(slots):
            if shapes[k] is not None and k not in phase.slots:
                continue
            shape = evaluated[k]
            if shape is None or None in shape:
                continue  # made by a later phase, from symbols not bound yet
            if shape and min(shape) < 0:
                raise ShapeError(f"slot {k} has shape {_shape_text(s['shape'])} = {shape} for {_bound(env)}")
            shapes[k] = shape
        for k in set(phase.slots) | {x for x in range(len(slots)) if shapes[x] is not None}:
            n = itemsize[k]
            for d in shapes[k]:
                n *= d
            nbytes[k] = n
        # the intermediates: the compiler's static plan, or one made now for these sizes
        self.capacity = None
        if program["arena_bytes"] is not None:
            self.offsets = {k: slots[k]["offset"] for k in phase.arena}
            self.arena_bytes = int(program["arena_bytes"])
            self.intermediate_bytes = int(program.get("intermediate_bytes", self.arena_bytes))
        elif prior is not None and prior.capacity is not None and all(
                nbytes[k] <= prior.capacity[k] for k in phase.arena):
            # every intermediate fits the room the last plan of this phase gave it: the plan holds
            # (same lifetimes, each buffer inside its region), so a decoder's next past length
            # is laid out without planning again
            self.offsets, self.arena_bytes, self.capacity = prior.offsets, prior.arena_bytes, prior.capacity
            self.intermediate_bytes = prior.intermediate_bytes
        else:
            # planned with room to grow (ROOM): the sizes of the next runs of a growing sequence
            # fit it too
            last = phase.end - 1
            room = {k: _with_room(nbytes[k]) for k in phase.arena}
            plan = plan_memory([Interval(k, room[k], slots[k]["live"][0], min(slots[k]["live"][1], last))
                                for k in phase.arena])
            self.offsets, self.arena_bytes, self.capacity = plan.offsets, plan.arena_bytes, room
            self.intermediate_bytes = plan.total_bytes  # (with their room: what the plan laid out)
        mine = set(phase.slots)
        self.out_new = [(o["slot"], shapes[o["slot"]], numpy_dtype(o["dtype"])) for o in program["outputs"]
                        if slots[o["slot"]]["kind"] == "output" and not o["copy"] and o["slot"] in mine]
        for k in phase.slots:
            s = slots[k]
            if s["kind"] == "view" and s["base"] in nbytes and (
                    nbytes[k] + s.get("offset", 0) > nbytes[s["base"]] if "offset" in s else nbytes[k] != nbytes[s["base"]]):
                raise ModelError(f"slot {k} views slot {s['base']} ({nbytes[s['base']]} bytes) as "
                                 f"{shapes[k]} ({nbytes[k]} bytes) at offset {s.get('offset', 0)} for {_bound(env)}")
        # each call's size arguments, by the kernel's scalar parameter names (all of the phase's
        # at once: ``call_scalars``, compiled once per program)
        self.scalars = []
        for c, (kernel, args), vals in zip(program["calls"][phase.start:phase.end], calls[phase.start:phase.end],
                                           call_scalars(env)[phase.start:phase.end]):
            if vals is None or None in vals:  # (which size, one at a time, for the message)
                given = c.get("scalars", {})
                name = next(n for n, _, _ in kernel._scalars
                            if (evaluate(given[n], env) if n in given else env.get(n)) is None)
                if name in given or name in env:
                    raise ShapeError(f"kernel {kernel.name!r}: its size {name!r} cannot be computed for "
                                     f"{_bound(env)}")
                raise ModelError(f"kernel {kernel.name!r} takes size {name!r}, which the program "
                                 f"does not give")
            self.scalars.append(vals)
            wanted = kernel.buffer_shapes(dict(zip((n for n, _, _ in kernel._scalars), vals)))
            for p, a, want in zip(kernel._bufs, args, wanted):
                if want != shapes[a]:
                    raise ModelError(f"call of {kernel.name!r} passes slot {a} of shape {shapes[a]} as "
                                     f"{p.name!r}, which has shape {want} for {_bound(env)}")
        self.words = None

    def native_words(self, calls: list, kernels: list) -> np.ndarray:
        """The native runner's program for this phase's calls:
        ``[ncalls, (fn, nptr, nscalar, slots..., scalars...)...]``."""
        if self.words is None:
            calls = calls[self.phase.start:self.phase.end]
            index = {id(k): i for i, k in enumerate(kernels)}
            words = [len(calls)]
            for (kernel, args), sc in zip(calls, self.scalars):
                words += [index[id(kernel)], len(args), len(sc), *args, *sc]
            self.words = np.array(words, np.int64)
        return self.words

    def new_arena(self, nbytes: Optional[int] = None) -> np.ndarray:
        """A new arena of ``nbytes`` (at least this layout's ``arena_bytes``)."""
        from .ndarray import _aligned_empty

        try:
            return _aligned_empty((max(1, self.arena_bytes, nbytes or 0),), np.dtype(np.uint8), 64)
        except MemoryError:
            raise ResourceError(f"the intermediates of a run at {_bound(self.env) or 'these shapes'} need "
                                f"{self.arena_bytes} bytes, more than this process can allocate") from None


def compile_call_scalars(program: dict, calls: list):
    """A function of ``env`` giving every call's size arguments (a tuple per call, in its
    kernel's scalar parameter order; None where one cannot be computed): the program's
    expression for each, or the symbol of the parameter's name."""
    return compile_shapes([[c.get("scalars", {}).get(name, name) for name, _, _ in kernel._scalars]
                           for c, (kernel, _) in zip(program["calls"], calls)])


ROOM = 1.25  # a plan made for new sizes gives each intermediate this much room (see Layout)


def _with_room(nbytes: int) -> int:
    return nbytes if nbytes <= 64 else int(nbytes * ROOM)


def _itemsizes(program: dict) -> list:
    """Each slot's element size."""
    return [numpy_dtype(s["dtype"]).itemsize for s in program["slots"]]


class Layouts:
    """The layouts of the symbol values seen so far (the most recent ``size`` per phase: a
    decoder generating 64 tokens after its prompt meets 65 pasts, which a bound of 64 evicted
    one by one, each generation laying out every step again)."""

    def __init__(self, program: dict, calls: list, size: int = 256):
        self._program = program
        self._calls = calls
        self._size = size
        self._cache: collections.OrderedDict = collections.OrderedDict()
        self._last: dict = {}  # phase -> the layout made last (whose memory plan a new one may reuse)
        self._lock = threading.Lock()
        self.symbols = list(program.get("symbols", ()))
        self.data = data_symbols(program)
        self.pre, self.phases = phases_of(program)
        self._slot_shapes = compile_shapes([s["shape"] for s in program["slots"]])
        self._itemsize = _itemsizes(program)
        self._call_scalars = compile_call_scalars(program, calls)

    def get(self, env: dict, p: int = 0, earlier: Optional[Layout] = None) -> Layout:
        """The layout of phase ``p`` at ``env`` (``earlier``: the previous phase's layout)."""
        phase = self.phases[p]
        key = (p,) + tuple(env[s] for s in self.symbols if s in phase.known)
        with self._lock:
            lay = self._cache.get(key)
            if lay is not None:
                self._cache.move_to_end(key)
                return lay
        lay = Layout(self._program, self._calls, env, phase, earlier, self._slot_shapes, self._itemsize,
                     self._last.get(p), self._call_scalars)
        with self._lock:
            self._cache[key] = lay
            self._last[p] = lay
            while len(self._cache) > self._size * len(self.phases):
                self._cache.popitem(last=False)
        return lay

    def largest(self) -> Optional[Layout]:
        with self._lock:
            return max(self._cache.values(), key=lambda lay: lay.arena_bytes, default=None)


__all__ = ["Layout", "Layouts", "Phase", "bind_symbols", "data_symbols", "phases_of"]
