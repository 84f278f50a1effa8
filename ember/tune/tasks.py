"""Tuning tasks: a model's fused groups, deduplicated by workload, weighted by their time.

:func:`extract_tasks` compiles the model with static kernels (one kernel per distinct group:
the workloads the tuner measures and a later compile looks up), profiles it once, and keeps
the groups whose schedule has decisions to make. A task's ``weight`` is its share of the
model's time: its kernel's seconds per model run.

A :class:`GroupBuilder` is what travels to a measurement worker: the group's function (it
pickles) and its name; under a tuner's :func:`~ember.loop.knobs.decisions` it makes the
candidate's schedule.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import TuneError
from ..loop import dtype as dt
from ..loop.knobs import decisions
from ..compiler.workload import describe, workload_key, workload_text

__all__ = ["GroupBuilder", "Task", "extract_tasks", "random_inputs"]

CODES = ("uint8", "int8")  # a quantized model's activations: data, never indices


@dataclasses.dataclass
class GroupBuilder:
    """Makes a fused group's kernel under the active decisions."""

    fn: object  # the group's graph Function
    name: str

    def schedule(self, target):
        """``(schedule, args, name)``: the group's computes and schedule."""
        from ..compiler.group import lower_group
        from ..graph.ops import compute as _computes  # noqa: F401  (registers the computes)

        k = lower_group(self.fn, self.name, target)
        if k.func is not None:
            raise TuneError(f"{self.name}: a loop program written directly has no schedule to tune")
        return k.schedule, k.inputs + k.outputs, self.name

    def arrays(self, seed: int = 0) -> list:
        """Random inputs (standard normal floats; 8-bit codes over their whole range; for a
        packed dot's int32 words, the words of random narrow values) and zeroed outputs for the
        kernel's params. Other integer inputs may be indices, which random values would send
        out of bounds: such groups are not tuned."""
        from ..graph.cost import function_dot
        from ..graph.types import TensorType

        rng = np.random.default_rng(seed)
        body = self.fn.body.type
        params = [p.type for p in self.fn.params]
        results = [body]  # (a multi-output group is not a tuning task: the check below)
        dot = function_dot(self.fn)
        for t in params + results:
            if not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
                raise TuneError(f"{self.name}: only groups of static tensor shapes are tuned, got {t}")
        for t in params:
            words = dot is not None and t.dtype == "int32"
            if not (dt.is_float(t.dtype) or t.dtype in CODES or words):
                raise TuneError(f"{self.name}: only groups of floating-point tensors, 8-bit codes and packed "
                                f"dots' words are tuned, got {t.dtype}")

        def value(t):
            if t.dtype in CODES:
                info = np.iinfo(t.dtype)
                return rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype)
            if t.dtype != "int32":  # (bfloat16 and float16 through ml_dtypes' and numpy's casts)
                return rng.standard_normal(t.shape).astype(np.float32).astype(dt.numpy_dtype(t.dtype))
            if dot == "dot_bf16x2":  # (two bfloat16 a word: finite values, as the model's)
                import ml_dtypes

                return rng.standard_normal(t.shape + (2,)).astype(ml_dtypes.bfloat16).view(np.int32).reshape(t.shape)
            return rng.integers(-2 ** 31, 2 ** 31, t.shape, dtype=np.int64).astype(np.int32)
        return [value(t) for t in params] + [np.zeros(t.shape, t.dtype) for t in results]


@dataclasses.dataclass
class Task:
    """One workload to tune."""

    name: str  # the kernel's name in the model
    builder: GroupBuilder
    workload: str
    description: str
    weight: float  # seconds of one model run spent in this kernel (all its calls)
    calls: int = 1
    knobs: dict = dataclasses.field(default_factory=dict)  # name -> Knob of the default schedule
    text: str = ""

    @property
    def fn(self):
        return self.builder.fn


def _tunable(fn, name: str, target) -> dict | None:
    """The knobs of ``fn``'s default schedule, or None when it is not a tuning task (no
    decisions, a loop program written directly, symbolic or non-float tensors)."""
    b = GroupBuilder(fn, name)
    try:
        b.arrays()
        with decisions({}) as d:
            b.schedule(target)
    except TuneError:
        return None
    return dict(d.seen) or None


def random_inputs(exe, seed: int = 0) -> list:
    """Inputs for timing ``exe``: normal floats, zero integers (indices stay in range)."""
    from ..profile.inputs import random_inputs as arrays

    for info in exe.input_info:
        if not all(isinstance(d, int) for d in info.shape):
            raise TuneError(f"input {info.name!r} has a symbolic shape {info.shape}: give input_shapes "
                            f"(ember tune --input-shape {info.name}=...) to tune for one size")
    return arrays(exe.input_info, seed)


def extract_tasks(model, target, *, profile: bool = True, repeat: int = 10, input_shapes=None,
                  precision: str = "fp32") -> tuple:
    """``(tasks, executable)``: the tuning tasks of ``model`` (ONNX path or bytes, or a graph
    Module), heaviest first, and its untuned executable (static kernels)."""
    from ..compiler.compile import compile_model
    from ..compiler.generic import generic_kernels

    with generic_kernels("none"):
        exe = compile_model(model, target, cache=False, input_shapes=input_shapes, precision=precision, wait=True)
    if not hasattr(exe, "groups"):  # (a SpecializingExecutable: one program per value of some inputs)
        raise TuneError(f"the model's structure depends on the values of {', '.join(exe.value_inputs)}, so "
                        f"it compiles per value: bind them first (from_onnx(model, static_inputs=...)) and tune that")
    seconds: dict = {}
    calls: dict = {}
    if profile:
        prof = exe.profile(*random_inputs(exe), warmup=2, repeat=repeat)
        for row in prof.rows:
            # each call's least time over the runs: on a shared machine noise only adds time
            seconds[row.kernel] = seconds.get(row.kernel, 0.0) + row.min
            calls[row.kernel] = calls.get(row.kernel, 0) + 1
        exe.tune_latency = sum(seconds.values())  # (the kernels' time: what the tuning curve starts from)
    exe.tune_seconds = seconds
    tasks = []
    for name, fn in exe.groups:
        knobs = _tunable(fn, name, target)
        if knobs is None:
            continue
        tasks.append(Task(name, GroupBuilder(fn, name), workload_key(fn, target), describe(fn),
                          seconds.get(name, 0.0), calls.get(name, 1), knobs, workload_text(fn)))
    tasks.sort(key=lambda t: -t.weight)
    return tasks, exe
