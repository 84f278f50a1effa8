"""A program's memory and calls laid out for one set of symbol values.

A program's shapes may name symbols (``batch``, ``seq``) that a run binds from its inputs'
shapes. Everything that follows from them -- every slot's shape, the checks the compiler
recorded (two inputs that must share ``seq``), the memory plan of the intermediates, each
kernel's size arguments and the native runner's program words -- is worked out once per new
set of values and kept (:class:`Layouts`), so a run at a shape seen before pays a dict lookup.
A static program has one layout, made when it is loaded.
"""
from __future__ import annotations

import collections
import threading
from typing import Optional

import numpy as np

from ..errors import ModelError, ResourceError, ShapeError
from .memory_plan import Interval, plan_memory
from .ndarray import numpy_dtype
from .shapes import evaluate, text

SYMBOL_MAX = 1 << 40  # a symbol's value must lie in [1, SYMBOL_MAX] (what the compiler assumed)


def bind_symbols(inputs: list, arrays: list, symbols: list) -> dict:
    """Symbol values from the input arrays' shapes (``inputs``: the program's input entries);
    every declared dimension is checked. ShapeError names the input, the axis and the symbol."""
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
                if not 1 <= got <= SYMBOL_MAX:
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
    missing = [s for s in symbols if s not in env]
    if missing:
        raise ModelError(f"the program's symbols {', '.join(missing)} are not dimensions of any input")
    return env


def _bound(env: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items())


def _shape_text(shape) -> str:
    return "(" + ", ".join(text(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


class Layout:
    """One set of symbol values: concrete slot shapes, arena offsets, call arguments."""

    __slots__ = ("env", "shapes", "offsets", "arena_bytes", "out_new", "scalars", "words", "intermediate_bytes")

    def __init__(self, program: dict, calls: list, env: dict):
        self.env = env
        for chk in program.get("checks", ()):
            if not evaluate(chk["cond"], env):
                raise ShapeError(f"the inputs' shapes ({_bound(env)}) break what the model's shapes "
                                 f"need: {chk['what']}")
        slots = program["slots"]
        self.shapes = shapes = []
        nbytes = []
        for k, s in enumerate(slots):
            shape = tuple(evaluate(d, env) for d in s["shape"])
            if any(d is None or d < 0 for d in shape):
                raise ShapeError(f"slot {k} has shape {_shape_text(s['shape'])} = {shape} for {_bound(env)}")
            shapes.append(shape)
            n = numpy_dtype(s["dtype"]).itemsize
            for d in shape:
                n *= d
            nbytes.append(n)
        # the intermediates: the compiler's static plan, or one made now for these sizes
        arena = [k for k, s in enumerate(slots) if s["kind"] == "arena"]
        if program["arena_bytes"] is not None:
            self.offsets = {k: slots[k]["offset"] for k in arena}
            self.arena_bytes = int(program["arena_bytes"])
            self.intermediate_bytes = int(program.get("intermediate_bytes", self.arena_bytes))
        else:
            plan = plan_memory([Interval(k, nbytes[k], *slots[k]["live"]) for k in arena])
            self.offsets, self.arena_bytes, self.intermediate_bytes = plan.offsets, plan.arena_bytes, plan.total_bytes
        self.out_new = [(o["slot"], shapes[o["slot"]], numpy_dtype(o["dtype"])) for o in program["outputs"]
                        if slots[o["slot"]]["kind"] == "output" and not o["copy"]]
        for k, s in enumerate(slots):
            if s["kind"] == "view" and nbytes[k] != nbytes[s["base"]]:
                raise ModelError(f"slot {k} views slot {s['base']} ({nbytes[s['base']]} bytes) as "
                                 f"{shapes[k]} ({nbytes[k]} bytes) for {_bound(env)}")
        # each call's size arguments, by the kernel's scalar parameter names
        self.scalars = []
        for c, (kernel, args) in zip(program["calls"], calls):
            given = c.get("scalars", {})
            vals = []
            for name, _, _ in kernel._scalars:
                v = evaluate(given[name], env) if name in given else env.get(name)
                if v is None:
                    raise ModelError(f"kernel {kernel.name!r} takes size {name!r}, which the program "
                                     f"does not give")
                vals.append(int(v))
            self.scalars.append(tuple(vals))
            for j, (p, a) in enumerate(zip(kernel._bufs, args)):
                want = tuple(evaluate(d, dict(zip((n for n, _, _ in kernel._scalars), vals))) for d in p.shape)
                if want != shapes[a]:
                    raise ModelError(f"call of {kernel.name!r} passes slot {a} of shape {shapes[a]} as "
                                     f"{p.name!r}, which has shape {want} for {_bound(env)}")
        self.words = None

    def native_words(self, calls: list, kernels: list) -> np.ndarray:
        """The native runner's program: ``[ncalls, (fn, nptr, nscalar, slots..., scalars...)...]``."""
        if self.words is None:
            words = [len(calls)]
            for (kernel, args), sc in zip(calls, self.scalars):
                words += [kernels.index(kernel), len(args), len(sc), *args, *sc]
            self.words = np.array(words, np.int64)
        return self.words

    def new_arena(self) -> np.ndarray:
        from .ndarray import _aligned_empty

        try:
            return _aligned_empty((max(1, self.arena_bytes),), np.dtype(np.uint8), 64)
        except MemoryError:
            raise ResourceError(f"the intermediates of a run at {_bound(self.env) or 'these shapes'} need "
                                f"{self.arena_bytes} bytes, more than this process can allocate") from None


class Layouts:
    """The layouts of the symbol values seen so far (the most recent ``size``)."""

    def __init__(self, program: dict, calls: list, size: int = 64):
        self._program = program
        self._calls = calls
        self._size = size
        self._cache: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        self.symbols = list(program.get("symbols", ()))

    def get(self, env: dict) -> Layout:
        key = tuple(env[s] for s in self.symbols)
        with self._lock:
            lay = self._cache.get(key)
            if lay is not None:
                self._cache.move_to_end(key)
                return lay
        lay = Layout(self._program, self._calls, env)
        with self._lock:
            self._cache[key] = lay
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return lay

    def largest(self) -> Optional[Layout]:
        with self._lock:
            return max(self._cache.values(), key=lambda lay: lay.arena_bytes, default=None)


__all__ = ["Layout", "Layouts", "bind_symbols"]
