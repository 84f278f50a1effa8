"""A model whose inputs' *values* decide its structure, compiled per value.

Some ONNX graphs take a shape, an axis or a scale as a model input (``Reshape(x, shape)``,
``Resize(x, scales=s)``, ``Slice(x, starts, ends, axes)``). Where such a value can be a size
the program binds while running, one executable serves every value
(:meth:`ember.frontend.onnx.context.NodeContext.const`); where it decides more (an axis, a
scale that sizes the output, a -1 in a reshape), no single program can. Then ``ember.compile``
returns a :class:`SpecializingExecutable`: each run with new values of those inputs compiles
the model with them bound as constants (the kernel cache makes a value seen before in another
process cheap), and runs with values seen before reuse their executable -- as torch.compile
guards on the values it specializes on.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..errors import ArgumentError, EmberError
from ..runtime.executable import TensorInfo

__all__ = ["SpecializingExecutable", "specializing"]


def specializing(model, options, err: EmberError):
    """A :class:`SpecializingExecutable` for ``model`` (an ONNX file, bytes or proto) whose
    compile failed with ``err``, where inputs whose values decide shapes explain it; else None.
    Problems no value would cure (an unsupported op, attribute or type) are raised now."""
    from ..frontend.onnx.functions import expand_functions
    from ..frontend.onnx.checks import load_model, model_opset, raise_problems, scan, value_inputs

    from ..frontend.onnx.context import StructureValueError

    if getattr(err, "problems", None) is not None:  # (the import's own scan: not about values)
        return None
    proto, source = load_model(model)
    values = value_inputs(proto)
    if not values or not _about_values(err, values, StructureValueError):
        return None
    opset = model_opset(proto, source)
    raise_problems(scan(expand_functions(proto, opset), static_inputs=dict.fromkeys(values), source=source), opset,
                   source)
    return SpecializingExecutable(proto, options, values, err)


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
    :attr:`value_inputs` (``specializations`` counts them)."""

    def __init__(self, proto, options, value_inputs: list, reason: EmberError):
        from ..frontend.onnx.checks import _graph_input_names
        from ..frontend.onnx.dtypes import to_ember

        self._proto = proto
        self._options = options
        self.value_inputs = list(value_inputs)
        self.reason = str(reason)  # why one executable cannot serve every value
        names = _graph_input_names(proto, False)
        self.input_info = []
        for i in proto.graph.input:
            if i.name not in names:
                continue
            t = i.type.tensor_type
            shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim)
            try:
                dtype = to_ember(t.elem_type, f"input {i.name!r}")
            except EmberError:
                dtype = str(t.elem_type)
            self.input_info.append(TensorInfo(i.name, shape, dtype))
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
        missing = [n for n in order if n not in out]
        if missing:
            raise ArgumentError(f"missing input(s) {', '.join(missing)}")
        return out

    def executable_for(self, *arrays: Any, **named: Any):
        """The executable of these inputs' values (compiled now if new) and the other inputs."""
        given = self._named(arrays, named)
        static = {n: np.asarray(given.pop(n)) for n in self.value_inputs}
        key = tuple((n, v.dtype.str, v.shape, v.tobytes()) for n, v in sorted(static.items()))
        with self._lock:  # (one compile at a time: concurrent first runs of one value compile it once)
            exe = self._exes.get(key)
            if exe is None:
                try:
                    exe = self._compile(static)
                except EmberError as e:  # (kept: a value the model cannot take fails fast next time)
                    exe = e
                self._exes[key] = exe
        if isinstance(exe, EmberError):
            raise exe
        return exe, given

    def _compile(self, static: dict):
        from ..frontend.onnx.importer import from_onnx
        from .compile import compile_model

        narrow: dict = {}
        shapes = {k: v for k, v in (self._options.input_shape_map or {}).items() if k not in static}
        # (the input shapes bind before the model's shape computations are imported, as for any model)
        mod = from_onnx(self._proto, static_inputs=static, io_narrow=narrow, input_shapes=shapes or None)
        exe = compile_model(mod, options=self._options.replace(narrow=narrow or None, cache=False, input_shapes=None))
        exe.output_info = [TensorInfo(o.name, i.shape, i.dtype) for i, o in zip(exe.output_info, self._proto.graph.output)]
        self.output_info = exe.output_info
        return exe

    def run(self, *arrays: Any, **named: Any) -> list:
        exe, rest = self.executable_for(*arrays, **named)
        return exe.run(**rest)

    __call__ = run

    def profile(self, *arrays: Any, warmup: int = 3, repeat: int = 10, **named: Any):
        """The profile of the executable these inputs' values select."""
        exe, rest = self.executable_for(*arrays, **named)
        return exe.profile(warmup=warmup, repeat=repeat, **rest)

    def export(self, path: str) -> str:
        raise EmberError(f"this model is compiled per value of {', '.join(self.value_inputs)} ({self.reason}): an "
                         f"export holds one program; bind those inputs first, from_onnx(model, "
                         f"static_inputs={{...}}), and compile and export that")
