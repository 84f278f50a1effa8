"""The Executable: compiled kernels plus the program that calls them.

The program is data (JSON-serializable): the model's inputs and outputs, a table of *slots*
(where each value lives: an input, a constant, a byte range of the arena, or an output) and the
list of kernel calls, each naming its kernel and the slots of its arguments. Intermediate
values live in one preallocated arena laid out by the static memory plan
(``ember.compiler.memory_plan``), so a run allocates only its outputs.

    exe = ember.compile("model.onnx")
    y, = exe.run(x)                    # positional, in input order
    y, = exe.run(**{"data_0": x})      # or by name
    exe.input_info, exe.output_info    # [(name, shape, dtype), ...]

Like every runtime object here it needs only ctypes and numpy (no llvmlite, no IR).
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import time
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import ArgumentError, CompileError, DTypeError, EmberError, ShapeError
from .control import run_control
from .ndarray import _aligned_empty, data_pointer, numpy_dtype
from . import handoff
from .lanes import LANES
from .layout import SYMBOL_MAX, Layouts, bind_symbols
from .arenas import ARENAS
from .pool import MemoryInfo, RunPool, RunState
from .shapes import evaluate, text
from .verify import verify_program

RUNNER_SYMBOL = "__ember_run_program"  # defined by ember.codegen.llvm.program in every kernel library
# the sizes a call of the native runner takes at most, less one (its switch is on nptr * 64 + nsizes)
RUNNER_MAX_SIZES = 64


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """A model input or output: its name, static shape and dtype."""

    name: str
    shape: tuple
    dtype: str

    def __iter__(self):  # unpacks as (name, shape, dtype)
        return iter((self.name, self.shape, self.dtype))


def _dims(shape: list) -> tuple:
    """A program shape for users: ints, symbol names, and the text of expressions."""
    return tuple(d if isinstance(d, (int, str)) else text(d) for d in shape)


def explicit_sizes(kernel, scalars: tuple) -> tuple:
    """The size arguments a Python call of ``kernel`` takes (those its arrays do not give)."""
    if not getattr(kernel, "_explicit", ()):
        return ()
    named = dict(zip((n for n, _, _ in kernel._scalars), scalars))
    return tuple(named[n] for n in kernel._explicit)


def _new_output(shape, dtype) -> np.ndarray:
    """A new output array in 64-byte-aligned memory (numpy gives 16): the constant-folding
    program's outputs become a model's weights, which kernels then read with aligned vectors."""
    return _aligned_empty(tuple(shape), dtype, 64)


def _copied(a: np.ndarray, into: Optional[np.ndarray] = None) -> np.ndarray:
    """A copy of ``a``: in ``into`` where it fits (same shape and dtype, writable), else in a new
    output array."""
    fits = into is not None and into.shape == a.shape and into.dtype == a.dtype and into.flags.writeable
    out = into if fits else _aligned_empty(a.shape, a.dtype, 64)
    out[...] = a
    return out


def _contiguous(a) -> np.ndarray:
    if a.flags.c_contiguous:
        return a
    # np.ascontiguousarray would turn a 0-d array into a 1-d one
    return np.require(a, requirements="C")


class Executable:
    """Kernels (a loaded :class:`~ember.runtime.module.Module`), a program and its constants.

    ``program`` keys: ``inputs``/``outputs`` (lists of {name, shape, dtype, slot}), ``slots``
    (list of {kind: input|const|arena|output|view|value, index, offset or live or base, shape,
    dtype}; a view is a reshape of its base's bytes, a value is set by a control step),
    ``calls`` (list of {kernel, args: [slot ids], scalars, nodes: source description}),
    ``arena_bytes`` and ``intermediate_bytes`` (null when planned per run). Shapes are JSON
    dimensions (:mod:`ember.runtime.shapes`) over ``symbols``; ``checks`` are conditions on
    them; ``binds`` bind data sizes while running; ``controls`` are if/loop/scan steps that run
    the programs in ``functions`` (see :mod:`ember.runtime.layout`).
    """

    def __init__(self, module, program: dict, constants: Sequence[np.ndarray], where: str = "program"):
        # every slot, offset and call is checked once here, so runs index without checks (a
        # loaded export's program is untrusted data; a compiled one is checked all the same)
        verify_program(program, module, constants=constants, where=where)
        self.module = module
        self.program = program
        self.constants = [_contiguous(c) for c in constants]
        for c in self.constants:
            if c.flags.writeable:
                c.flags.writeable = False
        # a narrow type (float8, int4, ...) is taken and given as the user's ml_dtypes array, run on its bytes
        self.input_info = [TensorInfo(i["name"], _dims(i["shape"]), i.get("view", i["dtype"]))
                           for i in program["inputs"]]
        self.output_info = [TensorInfo(o["name"], _dims(o["shape"]), o.get("view", o["dtype"]))
                            for o in program["outputs"]]
        self._out_views = [numpy_dtype(o["view"]) if "view" in o else None for o in program["outputs"]]
        self._in_views = ["view" in i for i in program["inputs"]]
        self._slots = program["slots"]
        self._symbols = list(program.get("symbols", ()))
        # views of inputs and outputs are made per run; every other slot's value lives in a RunState
        self._views = [(k, s["base"]) for k, s in enumerate(self._slots)
                       if s["kind"] == "view" and self._slots[s["base"]]["kind"] in ("input", "output", "value")]
        # (a view read as another type than its base's: a bitcast)
        self._view_dtypes = {k: numpy_dtype(self._slots[k]["dtype"]) for k, b in self._views
                             if self._slots[k]["dtype"] != self._slots[b]["dtype"]}
        # the programs of the subgraphs control steps run (same kernels, same constants)
        self._subs = [Executable(module, f, constants, where=f"{where} function {k}")
                      for k, f in enumerate(program.get("functions", ()))]
        self._calls = [(module[c["kernel"]], tuple(c["args"])) for c in program["calls"]]
        self._input_slots = [i["slot"] for i in program["inputs"]]
        self._static_inputs = [i.shape if all(isinstance(d, int) for d in i.shape) else None
                               for i in self.input_info]
        self._in_dtypes = [numpy_dtype(i.dtype) for i in self.input_info]
        self._out_take = [(o["slot"], bool(o["copy"])) for o in program["outputs"]]
        self._names = [i.name for i in self.input_info]
        # set by the compiler (absent on a loaded export): [(schedule, args, kernel name)] or a
        # function that makes them (after a warm compile), and the target
        self._kernel_sources: list = []
        self.kernel_sources_thunk = None
        self.target = None
        self.weights_mapped = False  # set by ember.load: the weights are the library's pages
        self._runs_here = False
        # shapes, memory plan and call arguments per set of symbol values (one, for a static model)
        self._layouts = Layouts(program, self._calls)
        self._single = len(self._layouts.phases) == 1 and not self._layouts.pre and \
            not self._layouts.phases[0].controls
        self._static = None if self._symbols else self._layouts.get({})
        self._native = self._native_program()
        self._timer = None  # set by the profiler: called (what, start, seconds) per kernel call and control step
        # the pool's factory holds the slots and constants, not self: no reference cycle, so
        # an executable's memory goes when its last reference does
        self._pool = RunPool(functools.partial(RunState, self._slots, self.constants))

    @property
    def kernel_sources(self) -> list:
        """The kernels' schedules as ``[(schedule, args, name)]`` (empty for a loaded export)."""
        if not self._kernel_sources and self.kernel_sources_thunk is not None:
            self._kernel_sources = self.kernel_sources_thunk()
        return self._kernel_sources

    @kernel_sources.setter
    def kernel_sources(self, value: list) -> None:
        self._kernel_sources = list(value)

    # -- running --------------------------------------------------------------------------------
    def _bind(self, arrays: tuple, named: dict) -> list:
        if not named and len(arrays) == len(self.input_info) and all(v is not None for v in arrays):
            values = arrays  # (every input by position: the common call)
        else:
            values = self._by_name(arrays, named)
        out = []
        for info, static, want, v, view in zip(self.input_info, self._static_inputs, self._in_dtypes, values,
                                               self._in_views):
            a = v if type(v) is np.ndarray else np.asarray(v)
            if a.dtype != want:
                raise DTypeError(f"input {info.name!r} must have dtype {info.dtype}, got {a.dtype} "
                                 f"(convert it with .astype(np.{want.name}))")
            if static is not None and a.shape != static:
                raise ShapeError(f"input {info.name!r} must have shape {info.shape}, got {a.shape}")
            a = _contiguous(a)
            out.append(a.view(np.uint8) if view else a)
        return out

    def _by_name(self, arrays: tuple, named: dict) -> list:
        """The inputs in input order, from positional arrays and named ones."""
        if len(arrays) > len(self.input_info):
            raise ArgumentError(f"the model takes {len(self.input_info)} input(s) "
                                f"({', '.join(self._names)}), got {len(arrays)} positional arrays")
        values: list = list(arrays) + [None] * (len(self.input_info) - len(arrays))
        for name, v in named.items():
            if name not in self._names:
                raise ArgumentError(f"the model has no input named {name!r}; its inputs are: "
                                    f"{', '.join(self._names)}")
            k = self._names.index(name)
            if values[k] is not None:
                raise ArgumentError(f"input {name!r} is given twice (by position and by name)")
            values[k] = v
        missing = [n for n, v in zip(self._names, values) if v is None]
        if missing:
            raise ArgumentError(f"missing input(s): {', '.join(missing)}")
        return values

    def _env(self, inputs: list) -> dict:
        """The symbols the inputs' shapes bind (empty for a static program)."""
        if not self._symbols:
            return {}
        return bind_symbols(self.program["inputs"], inputs, self._symbols, self._layouts.data)

    def _layout(self, inputs: list):
        """The layout of a single-phase run on ``inputs`` (checked arrays)."""
        if self._static is not None:
            return self._static
        return self._layouts.get(self._env(inputs))

    def _check_host(self) -> None:
        """Refuse to run code compiled for another CPU (its instructions would kill the process)."""
        missing = self.target.missing_on_host()
        if missing:
            raise CompileError(f"this executable was compiled for {self.target} and uses {', '.join(missing)}, "
                               f"which this CPU lacks: export it (exe.export / ember compile -o) and run it "
                               f"on such a machine, or compile for this one (target=None)")
        self._runs_here = True

    def _inputs(self, arrays: tuple, named: dict) -> list:
        """The checked input arrays, in input order (refusing code built for another CPU)."""
        if self.target is not None and not self._runs_here:
            self._check_host()
        return self._bind(arrays, named)

    def _values(self, state: RunState, inputs: list, layout, into: Optional[dict] = None) -> list:
        """The array of every slot for one run on ``state`` (laid out for ``layout``): the checked
        inputs, new outputs (or ``into``'s array for a slot, where it fits), the state's fixed
        values (its own arena) and views."""
        state.prepare(layout)
        vals = list(state.fixed)
        for slot, a in zip(self._input_slots, inputs):
            vals[slot] = a
        for slot, shape, dtype in layout.out_new:
            a = into.get(slot) if into else None
            fits = (a is not None and a.shape == tuple(shape) and a.dtype == dtype and a.flags.c_contiguous
                    and a.flags.writeable and data_pointer(a) % 64 == 0)
            vals[slot] = a if fits else _new_output(shape, dtype)
        shapes = layout.shapes
        views = self._view_dtypes
        for k, base in self._views:  # (a bitcast's type first: of another width, it regroups the last dim)
            vals[k] = (vals[base].reshape(-1).view(views[k]) if k in views else vals[base]).reshape(shapes[k])
        return vals

    def _outputs(self, vals: list, dest: Optional[dict] = None) -> list:
        """The outputs of a run: the arrays kernels wrote, or copies (into ``dest``'s array for
        an output's index, where the caller gave one that fits)."""
        outs = [(_copied(vals[slot], dest.get(k) if dest else None) if copy else vals[slot])
                for k, (slot, copy) in enumerate(self._out_take)]
        return [o if v is None else o.view(v) for o, v in zip(outs, self._out_views)]

    def run(self, *arrays: Any, **named: Any) -> list:
        """Run the model on numpy arrays (positional in input order, or by name); returns the
        outputs as a list of new numpy arrays.

        Symbolic dimensions (``batch``) take their values from the inputs' shapes; a new set of
        values is laid out once (shapes, checks, memory plan) and reused by later runs. Sizes
        that a kernel computes (the nonzeros of a tensor) are bound while the run goes on.
        Safe to call from any number of threads at once: each run works in an arena of its own
        from a pool (see :attr:`threads_per_run` and :attr:`max_concurrent_runs` for how
        concurrent runs share the cores), and no output aliases another run's memory."""
        inputs = self._inputs(arrays, named)
        if self._single:
            return self._run_single(inputs)
        env = self._env(inputs)
        with self._pool.run() as state:
            vals = LANES.execute(self._pool.threads_per_run, lambda: self._run_phases(state, inputs, env))
            return self._outputs(vals)

    def _run_into(self, out: Sequence, *arrays: Any) -> list:
        """:meth:`run`, writing each output into ``out``'s array at its index where that array
        fits (same shape and dtype, C-contiguous, writable, 64-byte aligned for an output the
        kernels write; an output copied at the end -- a view of an intermediate, an input, a
        constant -- needs the shape, dtype and writability) and the output is not a view of
        another dtype; the others are new arrays as in :meth:`run`. Returns the outputs: an
        ``out`` array where it was used.

        For callers that make their output buffers themselves ahead of the run: the PyTorch
        wrapper makes torch tensors while torch's code is still in the caches from converting
        the inputs, where a conversion after the run would find it evicted."""
        if not self._single:
            return self.run(*arrays)
        into, dest = {}, {}
        for k, ((slot, copy), view, a) in enumerate(zip(self._out_take, self._out_views, out)):
            if a is not None and view is None:
                if copy:
                    dest[k] = a
                else:
                    into[slot] = a
        return self._run_single(self._inputs(arrays, {}), into, dest)

    def _run_single(self, inputs: list, into: Optional[dict] = None, dest: Optional[dict] = None) -> list:
        """A run of a program laid out once for its inputs' shapes (one phase)."""
        layout = self._layout(inputs)
        state = self._pool.acquire()
        try:
            vals = self._values(state, inputs, layout, into)
            if self._native is not None and self._timer is None:
                self._run_native(state, vals, layout)  # (the lane runs only native code: no GIL)
            else:
                LANES.execute(self._pool.threads_per_run, lambda: self._execute(state, vals, layout))
            return self._outputs(vals, dest)
        finally:
            self._pool.release(state)

    def _execute(self, state: RunState, vals: list, layout) -> None:
        if self._timer is not None:  # profiling: each call timed on its own (its arguments gathered first)
            calls = self._calls[layout.phase.start:layout.phase.end]
            for k, ((kernel, args), sc) in enumerate(zip(calls, layout.scalars)):
                a = [vals[x] for x in args] + list(explicit_sizes(kernel, sc))
                t0 = time.perf_counter()
                kernel(*a)
                self._timer(("call", layout.phase.start + k), t0, time.perf_counter() - t0)
            return
        if self._native is not None:
            self._run_native(state, vals, layout)
        else:
            calls = self._calls[layout.phase.start:layout.phase.end]
            for (kernel, args), sc in zip(calls, layout.scalars):
                kernel(*[vals[a] for a in args], *explicit_sizes(kernel, sc))

    def _run_phases(self, state: RunState, inputs: list, env: dict) -> list:
        """A run of a program that binds sizes as it goes: phase by phase, each laid out when
        the symbols it needs are bound."""
        vals = list(state.fixed)
        for slot, a in zip(self._input_slots, inputs):
            vals[slot] = a
        env = dict(env)
        self._bind_sizes(vals, env, self._layouts.pre)
        earlier = None
        for phase in self._layouts.phases:
            lay = self._layouts.get(env, phase.index, earlier)
            state.prepare(lay)
            fixed = state.fixed
            for k in phase.slots:
                if fixed[k] is not None:
                    vals[k] = fixed[k]
            for slot, shape, dtype in lay.out_new:
                vals[slot] = _new_output(shape, dtype)
            self._make_views(vals, lay.shapes)
            if phase.end > phase.start:
                self._execute(state, vals, lay)
            for step in phase.controls:
                t0 = time.perf_counter()
                run_control(self, step, vals, env)
                if self._timer is not None:
                    self._timer(("control", self.program["controls"].index(step)), t0, time.perf_counter() - t0)
            self._bind_sizes(vals, env, phase.binds)
            # (views of what the controls returned: the last phase has no next one to make them)
            self._make_views(vals, lay.shapes, env)
            earlier = lay
        return vals

    def _make_views(self, vals: list, shapes: list, env: Optional[dict] = None) -> None:
        """The views whose base has a value: of the laid-out ``shapes``, or (given ``env``) of
        their declared shapes evaluated there."""
        for k, base in self._views:
            if vals[k] is None and vals[base] is not None:
                shape = shapes[k] if env is None else [evaluate(d, env) for d in self._slots[k]["shape"]]
                if shape is not None and all(d is not None for d in shape):
                    vals[k] = vals[base].reshape(shape)
                    if k in self._view_dtypes:
                        vals[k] = vals[k].view(self._view_dtypes[k])

    @staticmethod
    def _bind_sizes(vals: list, env: dict, binds: list) -> None:
        for sym, slot, index, axis in binds:
            if axis is not None:  # a dimension of a value a subgraph returned
                v = int(vals[slot].shape[axis])
                env[sym] = v
                continue
            flat = vals[slot].reshape(-1)
            if not 0 <= index < flat.size:
                raise ShapeError(f"size {sym!r} is element {index} of a value of {flat.size} element(s)")
            x = flat[index]
            if not np.isfinite(x):
                raise ShapeError(f"size {sym!r} came out as {x}: a size must be in [0, {SYMBOL_MAX}]")
            v = int(x)  # (a float value truncates: OneHot's depth)
            if not 0 <= v <= SYMBOL_MAX:
                raise ShapeError(f"size {sym!r} came out as {v}: a size must be in [0, {SYMBOL_MAX}]")
            env[sym] = v

    @property
    def threads_per_run(self) -> int:
        """Threads each run's parallel loops use (default: ``OMP_NUM_THREADS``, else all cores).
        Settable; ``None`` restores the default."""
        return self._pool.threads_per_run

    @threads_per_run.setter
    def threads_per_run(self, n: Optional[int]) -> None:
        self._pool.threads_per_run = n

    @property
    def max_concurrent_runs(self) -> int:
        """How many runs execute at once; further callers wait for a turn (default: cores //
        threads_per_run, so the cores are never oversubscribed). Settable; ``None`` restores
        the default."""
        return self._pool.max_concurrent_runs

    @max_concurrent_runs.setter
    def max_concurrent_runs(self, n: Optional[int]) -> None:
        self._pool.max_concurrent_runs = n

    @property
    def memory_info(self) -> MemoryInfo:
        """Weights, arena per run, the arenas in use and the peak (:class:`MemoryInfo`); for a
        model with symbolic shapes, at the largest shapes run so far."""
        lay = self._static or self._layouts.largest()
        arena = lay.arena_bytes if lay is not None else 0
        outs = 0
        if lay is not None:
            outs = sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize for _, shape, dtype in lay.out_new)
            outs += sum(int(np.prod(lay.shapes[slot], dtype=np.int64)) * numpy_dtype(o.dtype).itemsize
                        for o, (slot, copy) in zip(self.output_info, self._out_take) if copy)
        weights = sum(c.nbytes for c in self.constants)
        arenas, peak = self._pool.arenas, self._pool.peak_in_flight
        return MemoryInfo(weights=weights, arena_per_run=arena, arenas=arenas, pool=ARENAS.free_bytes,
                          peak_arenas=peak, outputs_per_run=outs, peak=weights + peak * (arena + outs),
                          intermediates=lay.intermediate_bytes if lay is not None else 0,
                          weights_mapped=self.weights_mapped)

    @property
    def native(self) -> bool:
        """Whether :meth:`run` calls the kernels from the library's native program runner
        (one call into native code per run) rather than one checked Python call per kernel.
        Set it to False to use the Python calls."""
        return self._native is not None

    @native.setter
    def native(self, on: bool) -> None:
        self._native = self._native_program() if on else None

    def _native_program(self):
        """(runner, its address, kernels, kernel addresses, slots set per run), or None where the library has
        no runner or a kernel takes a float scalar: the compiler laid out every intermediate, so
        only the inputs and outputs need checks. Each run's slot pointers live in its
        :class:`RunState`, its program words (sizes included) in its layout."""
        lib = getattr(self.module, "_lib", None)
        if lib is None or not self._calls:
            return None
        try:
            runner = lib[RUNNER_SYMBOL]
        except AttributeError:
            return None
        handoff.offer(lib)
        kernels = []
        for kernel, args in self._calls:
            if len(args) != len(kernel._bufs) or len(kernel._scalars) >= RUNNER_MAX_SIZES or any(
                    p.get("abi") != "int64" for p in kernel.meta["params"] if p["kind"] == "scalar"):
                return None  # (a kernel the runner has no case for: one checked Python call each)
            if kernel not in kernels:
                kernels.append(kernel)
        runner.argtypes = [ctypes.c_void_p] * 3
        runner.restype = ctypes.c_int32
        fns = (ctypes.c_void_p * len(kernels))(*[ctypes.cast(k._cfunc, ctypes.c_void_p).value for k in kernels])
        per_run = [k for k, s in enumerate(self._slots) if s["kind"] in ("input", "output", "value")]
        per_run += [k for k, _ in self._views]
        return runner, ctypes.cast(runner, ctypes.c_void_p).value, kernels, fns, per_run

    def _run_native(self, state: RunState, vals: list, layout) -> None:
        """The phase's calls through the library's program runner, on a lane (or on this one)."""
        runner, address, kernels, fns, per_run = self._native
        words = layout.native_words(self._calls, kernels)
        ptrs = state.ptrs
        for k in per_run:
            v = vals[k]
            if v is not None:  # (a value a later phase makes is not used by this one)
                ptrs[k] = data_pointer(v)
        rc = LANES.run_native(self._pool.threads_per_run, runner, address, data_pointer(words),
                              ctypes.addressof(ptrs), ctypes.addressof(fns))
        if rc:
            what = (f"kernel {self._calls[rc - 1][0].name!r} failed: {self._calls[rc - 1][0].failure()}"
                    if rc > 0 else "the native program runner met a call it was not built for")
            raise EmberError(f"{what} (call {rc} of {len(self._calls)})")

    __call__ = run

    # -- reporting ------------------------------------------------------------------------------
    @property
    def kernel_calls(self) -> list:
        """The program's kernel calls: ``[(kernel name, source nodes), ...]``."""
        return [(c["kernel"], c.get("nodes", "")) for c in self.program["calls"]]

    def memory_summary(self) -> str:
        lay = self._static or self._layouts.largest()
        if lay is None:
            return "arena planned per input shape (none run yet)"
        arena, total = lay.arena_bytes, lay.intermediate_bytes
        saved = 100 * (1 - arena / total) if total else 0.0
        return (f"arena {arena / 2**20:.2f} MiB for intermediates of {total / 2**20:.2f} MiB in all "
                f"({saved:.0f}% saved by reuse)")

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.shape} {i.dtype}" for i in self.input_info)
        return f"<Executable ({ins}) -> {len(self.output_info)} output(s), {len(self._calls)} kernel calls>"


__all__ = ["Executable", "TensorInfo", "explicit_sizes"]
