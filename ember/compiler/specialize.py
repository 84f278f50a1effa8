"""A model whose inputs' *values* (or their structure) decide its graph, compiled per value.

Some ONNX graphs take a shape, an axis or a scale as a model input (``Reshape(x, shape)``,
``Resize(x, scales=s)``, ``Slice(x, starts, ends, axes)``). Where such a value can be a size
the program binds while running, one executable serves every value
(:meth:`ember.frontend.onnx.context.NodeContext.const`); where it decides more (an axis, a
scale that sizes the output), no single program can. Then ``ember.compile`` returns a
:class:`SpecializingExecutable`: each run with new values of those inputs compiles the model
with them bound as constants (the kernel cache makes a value seen before in another process
cheap), and runs with values seen before reuse their executable -- as torch.compile guards on
the values it specializes on.

Sequences at the graph's boundary (:mod:`ember.frontend.onnx.boundary`) work the same way: a
sequence input's length and items' shapes are its *structure*, each structure gets its
executable, and sequence outputs come back as lists.

Where one program serves the usual values but not all of them (a Reshape's shape from an input
holds sizes, except where a run gives -1 or 0), the program is kept and
:class:`GuardedExecutable` compiles per value only for the runs it refuses (:func:`guarded`).
"""
from __future__ import annotations

import threading
from typing import Any, Optional

import numpy as np

from ..errors import ArgumentError, EmberError, ShapeError
from ..runtime.executable import TensorInfo

__all__ = ["GuardedExecutable", "SpecializingExecutable", "guarded", "specializing"]


def specializing(model, options, err: EmberError):
    """A :class:`SpecializingExecutable` for ``model`` (an ONNX file, bytes or proto) whose
    compile failed with ``err``, where inputs whose values decide shapes, or sequences at the
    graph's boundary, explain it; else None. Problems no value would cure (an unsupported op,
    attribute or type) are raised now."""
    from ..frontend.onnx.boundary import SequenceOutputError, structured_inputs
    from ..frontend.onnx.checks import load_model, model_opset, raise_problems, scan, value_inputs
    from ..frontend.onnx.context import StructureValueError
    from ..frontend.onnx.functions import expand_functions

    proto, source = load_model(model)
    values, structured = value_inputs(proto), structured_inputs(proto)
    about_values = bool(values) and _about_values(err, values, StructureValueError)
    if not structured and not isinstance(err, SequenceOutputError):
        if getattr(err, "problems", None) is not None or not about_values:  # (the import's own scan: not about values)
            return None
    opset = model_opset(proto, source)
    raise_problems(scan(expand_functions(proto, opset), static_inputs=dict.fromkeys(values + structured),
                        source=source), opset, source)
    exe = SpecializingExecutable(proto, options, values, err, structured=structured,
                                 per_value=True if about_values else None)
    if not structured and not exe.per_value:  # (the structure is the model's: compiled now, errors now)
        got = exe._exes[(), None] = exe._compile({}, {})
        if isinstance(got, EmberError):
            raise got
    return exe


def guarded(model, options, exe):
    """``exe`` (the model's one program), or a :class:`GuardedExecutable` around it where the
    program binds sizes from model inputs' values: a run may give a value that is no size (a -1
    or 0 in a Reshape's shape), which an executable compiled for it then runs."""
    from ..graph import Module

    from .tiered import TieredExecutable

    inner = exe.current if isinstance(exe, TieredExecutable) else exe  # (its programs all bind the same)
    program = inner.__dict__.get("program")  # (None for an executable wrapped already)
    if isinstance(model, Module) or not isinstance(program, dict) or not _value_sized_inputs(program):
        return exe
    return GuardedExecutable(exe, model, options)


def _value_sized_inputs(program: dict) -> set:
    """The inputs whose values ``program`` (or a subgraph's) binds as sizes (``?x#3``)."""
    from ..graph.ops.dims import value_source

    found = {value_source(s)[0] for s in program.get("symbols", ()) if value_source(s)}
    for f in program.get("functions", ()):
        found |= _value_sized_inputs(f)
    return found


def _about_values(err: EmberError, values: list, structural: type) -> bool:
    """Whether ``err`` comes from what model inputs' values decide: a number the import needs
    from them (``StructureValueError``, or a value it could not know), or a shape rule about
    the sizes they give (``?shape#1``, ``_shape_1``). Any other error is the model's, and
    compiling per value would only repeat it on every run."""
    if isinstance(err, structural):
        return True
    text = str(err)
    if "must be known when the model is imported" in text:
        return True
    return any(f"?{v}#" in text or f"_{v}_" in text for v in values)


class SpecializingExecutable:
    """Runs like an Executable (``run(*arrays, **named)``); compiles one per distinct value of
    :attr:`value_inputs` (where :attr:`per_value`) and per structure of :attr:`structured`
    inputs (``specializations`` counts them). ``per_value`` None: compiled per value only once
    a structure's import shows that the values decide it."""

    def __init__(self, proto, options, value_inputs: list, reason: Optional[EmberError],
                 structured: list = (), per_value: Optional[bool] = True):
        from ..frontend.onnx.checks import _graph_input_names

        self._proto = proto
        self._options = options
        self.value_inputs = list(value_inputs)
        self.structured = list(structured)
        self.per_value = per_value
        self.reason = str(reason) if reason is not None else ""  # why one executable cannot serve every value
        names = _graph_input_names(proto, False)
        self._types = {i.name: i.type for i in proto.graph.input if i.name in names}
        self.input_info = [_input_info(i) for i in proto.graph.input if i.name in names]
        self.output_info = [TensorInfo(o.name, (), "") for o in proto.graph.output]
        self._exes: dict = {}
        self._lock = threading.Lock()
        self.target = options.target

    @property
    def specializations(self) -> int:
        """How many executables the runs so far compiled (one per distinct value)."""
        return sum(not isinstance(e, EmberError) for e in self._exes.values())

    def _named(self, arrays: tuple, named: dict) -> dict:
        order = [i.name for i in self.input_info]
        if len(arrays) > len(order):
            raise ArgumentError(f"the model takes {len(order)} inputs, got {len(arrays)}")
        out = dict(zip(order, arrays))
        for k, v in named.items():
            if k not in order:
                raise ArgumentError(f"{k!r} is not an input of the model (inputs: {', '.join(order)})")
            if k in out:
                raise ArgumentError(f"input {k!r} given twice")
            out[k] = v
        missing = [n for n in order if n not in out and n not in self.structured]
        if missing:
            raise ArgumentError(f"missing input(s) {', '.join(missing)}")
        return out

    def _split(self, given: dict) -> tuple:
        """``(structure key, the executable's tensor inputs, the value inputs' arrays)``."""
        from ..frontend.onnx.boundary import feed, structure_of

        structure = {}
        for n in self.structured:
            v = given.pop(n, None)  # (an optional input left out is an empty optional)
            structure[n] = structure_of(v, self._types[n], n)
            given.update(feed(n, v, structure[n]))
        for n, v in given.items():
            if isinstance(v, (list, tuple)) and n in self._types:  # (a list for a tensor input)
                structure_of(v, self._types[n], n)
        values = {n: np.asarray(given.pop(n)) for n in self.value_inputs if n in given}
        return structure, given, values

    def executable_for(self, *arrays: Any, **named: Any):
        """The executable of these inputs' values (compiled now if new), the other inputs (by
        the executable's input names) and how to regroup its outputs."""
        structure, rest, values = self._split(self._named(arrays, named))
        skey = tuple(sorted(structure.items()))
        with self._lock:  # (one compile at a time: concurrent first runs of one value compile it once)
            if self.per_value is None and (skey, None) not in self._exes:
                self._exes[skey, None] = self._compile({}, structure)
                err = self._exes[skey, None]
                if isinstance(err, EmberError) and self.value_inputs:
                    from ..frontend.onnx.context import StructureValueError

                    if _about_values(err, self.value_inputs, StructureValueError):
                        del self._exes[skey, None]
                        self.per_value, self.reason = True, str(err)
            if self.per_value:
                key = (skey, tuple((n, v.dtype.str, v.shape, v.tobytes()) for n, v in sorted(values.items())))
                if key not in self._exes:
                    self._exes[key] = self._compile(values, structure)
            else:
                key = (skey, None)
                rest.update(values)  # (plain inputs of the program)
            got = self._exes[key]
        if isinstance(got, EmberError):
            raise got
        exe, layouts = got
        return exe, rest, layouts

    def _one_program(self):
        """The model as one program with its Ifs as control flow, where only the conditions of
        Ifs made it compile per value (optimum's merged decoders); else None."""
        from ..frontend.onnx.control import ifs_as_control_flow

        with ifs_as_control_flow():
            got = self._compile({}, {})
        return None if isinstance(got, EmberError) else got[0]

    def _compile(self, static: dict, structure: dict):
        """``(executable, output layouts)``, or the EmberError (kept: a value the model cannot
        take fails fast the next time)."""
        from ..frontend.onnx.importer import from_onnx
        from .compile import compile_model

        narrow: dict = {}
        layouts: list = []
        shapes = {k: v for k, v in (self._options.input_shape_map or {}).items() if k not in static}
        try:
            # (the input shapes bind before the model's shape computations are imported, as for any model)
            mod = from_onnx(self._proto, static_inputs=static, io_narrow=narrow, input_shapes=shapes or None,
                            structure=structure, io_structure=layouts)
            exe = compile_model(mod, options=self._options.replace(narrow=narrow or None, cache=False,
                                                                    input_shapes=None))
        except EmberError as e:
            return e
        infos, k = [], 0
        for o, lay in zip(self._proto.graph.output, layouts):
            if lay == "tensor":
                i = exe.output_info[k]
                infos.append(TensorInfo(o.name, i.shape, i.dtype))
            else:
                infos.append(TensorInfo(o.name, (), "sequence" if lay[0] == "sequence" else "optional"))
            k += 1 if lay == "tensor" else (lay[1] if lay[0] == "sequence" else 0)
        if all(lay == "tensor" for lay in layouts):
            exe.output_info = infos
        self.output_info = infos
        return exe, layouts

    def run(self, *arrays: Any, **named: Any) -> list:
        """The outputs (a sequence output as a list of arrays, an empty optional as None)."""
        from ..frontend.onnx.boundary import regroup

        exe, rest, layouts = self.executable_for(*arrays, **named)
        return regroup(exe.run(**rest), layouts)

    __call__ = run

    def profile(self, *arrays: Any, warmup: int = 3, repeat: int = 10, **named: Any):
        """The profile of the executable these inputs' values select."""
        exe, rest, _ = self.executable_for(*arrays, **named)
        return exe.profile(warmup=warmup, repeat=repeat, **rest)

    def export(self, path: str) -> str:
        if self.structured and not self.per_value:
            raise EmberError(f"this model is compiled per structure of its sequence input(s) "
                             f"{', '.join(self.structured)}: an export holds one program")
        if not self.per_value:
            return self.executable_for()[0].export(path)
        one = self._one_program()
        if one is not None:  # (only Ifs' conditions were compiled per value: they export as control flow)
            return one.export(path)
        raise EmberError(f"this model is compiled per value of {', '.join(self.value_inputs)} ({self.reason}): an "
                         f"export holds one program; bind those inputs first, from_onnx(model, "
                         f"static_inputs={{...}}), and compile and export that")


def _input_info(vi) -> TensorInfo:
    """A graph input's name, shape and dtype (``sequence(float32)`` for a sequence)."""
    from ..frontend.onnx.boundary import kind, optional_element
    from ..frontend.onnx.dtypes import to_ember

    t, wrap = vi.type, "{}"
    if kind(t) == "optional":
        t, wrap = optional_element(t), "optional({})"
    if kind(t) == "sequence":
        t, wrap = t.sequence_type.elem_type, wrap.format("sequence({})")
    tt = t.tensor_type
    shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim)
    try:
        dtype = to_ember(tt.elem_type, f"input {vi.name!r}")
    except EmberError:
        dtype = str(tt.elem_type)
    return TensorInfo(vi.name, shape, wrap.format(dtype))


class GuardedExecutable:
    """The model's one program (every attribute is its), with the runs it refuses compiled per
    value: a run whose value inputs break the sizes it binds (a -1 or 0 in a Reshape's shape)
    runs on an executable compiled for those values (a :class:`SpecializingExecutable`, made
    from the model at the first such run: the model is kept for it, a path as the path)."""

    def __init__(self, generic, model, options):
        self.generic = generic
        self._model, self._options = model, options
        self.fallback: Optional[SpecializingExecutable] = None
        self._refused: set = set()  # value keys the program refused: straight to the fallback
        self._lock = threading.Lock()

    _OWN = frozenset({"generic", "fallback", "_model", "_options", "_refused", "_lock"})

    def __getattr__(self, name: str):
        return getattr(self.generic, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # (a setting -- threads_per_run, the profiler's timer -- is the program's)
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.generic, name, value)

    def _fallback(self) -> SpecializingExecutable:
        with self._lock:
            if self.fallback is None:
                from ..frontend.onnx.checks import load_model, value_inputs

                proto, _ = load_model(self._model)
                self.fallback = SpecializingExecutable(proto, self._options, value_inputs(proto), None)
            return self.fallback

    def _values(self, arrays: tuple, named: dict) -> dict:
        names = [i.name for i in self.generic.input_info]
        given = {**dict(zip(names, arrays)), **named}
        return {n: np.asarray(given[n]) for n in sorted(_value_sized_inputs(self.generic.program)) if n in given}

    def run(self, *arrays: Any, **named: Any) -> list:
        """The program's outputs, or those of the executable compiled for values it refuses."""
        from ..frontend.onnx.context import StructureValueError

        values = self._values(arrays, named)
        key = tuple((n, v.dtype.str, v.shape, v.tobytes()) for n, v in values.items())
        if key not in self._refused:
            try:
                return self.generic.run(*arrays, **named)
            except ShapeError as e:  # (sizes bound from values are checked before any kernel runs)
                # a value that is no size (a reshape's -1, its 0 that keeps a dimension) may mean
                # more than a size: compiled for it. A size out of range is the run's error.
                if not (_about_values(e, list(values), StructureValueError)
                        and any(v.size and v.dtype.kind in "iuf" and (v <= 0).any() for v in values.values())):
                    raise
                self._refused.add(key)
        return self._fallback().run(*arrays, **named)

    __call__ = run
