"""One value for everything a compile is asked to do: built once at the front door
(``ember.compile``, ``ember.from_torch``, the CLI) and passed down, each layer reading the
fields it needs, instead of a dozen keyword arguments threaded through every layer."""
from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Mapping, Optional, Union

from .errors import ArgumentError, TargetError
from .target import AnyTarget, as_target

__all__ = ["CompileOptions"]


def _frozen_shapes(shapes: Optional[Mapping], what: str) -> Optional[tuple]:
    if shapes is None:
        return None
    if not isinstance(shapes, Mapping):
        raise ArgumentError(f"{what} must map input names to shapes ({{'x': (1, 3, 224, 224)}}), got "
                            f"{type(shapes).__name__}")
    try:
        return tuple(sorted((str(k), tuple(int(d) for d in v)) for k, v in shapes.items()))
    except (TypeError, ValueError):
        raise ArgumentError(f"{what}: each shape must be a sequence of integers, got {dict(shapes)!r}") from None


PRECISIONS = {"fp32": None, "bf16": "avx512bf16", "fp16": None}  # precision -> the CPU feature it needs


def _precision(value: Any, target: AnyTarget) -> str:
    """``value`` checked: a known precision the target can run."""
    p = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", None: "fp32"}.get(value, value)
    if p not in PRECISIONS:
        raise ArgumentError(f"precision must be one of {', '.join(PRECISIONS)}, got {value!r}")
    if p == "fp16" and getattr(target, "kind", "llvm") == "llvm":
        raise ArgumentError("precision='fp16' runs a GPU's products on its tensor cores (target='cuda'); on a CPU "
                            "use 'bf16' (AVX512-BF16) or 'fp32'")
    need = PRECISIONS[p]
    if need is not None and getattr(target, "kind", "llvm") == "llvm" and not target.has_feature(need):
        raise TargetError(f"precision={p!r} needs the CPU feature {need!r}, which target {target} lacks "
                          f"(a CPU with it: Intel Cooper Lake, Sapphire Rapids or later; AMD Zen 4 or later); "
                          f"compile with precision='fp32'")
    return p


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """What a compile is asked for (immutable; :meth:`create` checks and normalizes).

    ``target``: the machine (``ember.target``: an ``llvm`` CPU, the host by default).
    ``opt_level``: 0-3, the graph passes that run. ``input_shapes``: symbolic input dims fixed
    before the model's shape computations are imported. ``shape_hints``: the sizes a dynamic
    model will mostly run at, which its kernels' schedules are made for. ``disabled_passes``,
    ``instruments``: for the pass pipeline. ``name``: the model's, in messages and profiles.
    ``memory_limit``: bytes (or ``"4GiB"``) the compile and one run may hold. ``narrow``: the
    float8/int4 inputs and outputs of a Module imported with ``io_narrow``. ``cache``: load and
    keep compiled model files. ``tuning_records``: workload -> tuning record, the best per
    fused group (``ember.tune.apply.best_records`` reads them from a database).
    ``precision``: ``"fp32"`` (as the model says), or ``"bf16"``: matrix products by constant
    weights take bfloat16 operands and accumulate in float32 (``vdpbf16ps``; the target must
    have AVX512-BF16). On a ``cuda`` target ``"bf16"`` or ``"fp16"``: float32 matrix products
    run on tensor cores, their operands rounded to that type, sums in float32.
    ``saturating_int8``: on a CPU without VNNI, let quantized products by full-range int8
    weights run AVX2's ``pmaddubsw``, whose int16 sums of two products saturate, as ONNX
    Runtime's MLAS and oneDNN (OpenVINO) do on such CPUs: QDQ ResNets 1.3-1.4x faster on a
    Zen 3, results then as ORT's on the same CPU where ORT fuses the QDQ conv (its
    ``quantize_static`` files), which differ from the ONNX spec where a pair's sum passes
    int16 (``ember.quantize``'s files ORT runs unsaturated: there the saturated results differ
    more). Off (the default): such weights take ``pmaddwd``, exact. No
    effect where the CPU has VNNI (exact and fast) or for 7-bit weights (ORT's
    ``reduce_range``: exact either way).
    ``offload``: names of offload backends (``ember.offload``): each fused group one of them
    takes runs on the kernel it writes (the first that takes it, in order); ``"auto"``: every
    backend this host has, each group offloaded only where its kernel measured faster than
    Ember's, and not at all where Ember alone ran the model faster (``ember.compiler.offload``).
    ``offload_groups``: the kernels (fused groups, by name) the backends may take; None: all.
    ``wait``: return only when every kernel is the model's specialized one (tier 1). Without it
    a model with many kernels not in the cache returns as soon as it runs, on tier-0 kernels,
    and switches to its tier-1 kernels as they compile in the background
    (:class:`ember.compiler.tiered.TieredExecutable`).
    """

    target: AnyTarget
    opt_level: int = 3
    input_shapes: Optional[tuple] = None  # ((name, shape), ...) sorted
    shape_hints: Optional[tuple] = None
    disabled_passes: frozenset = frozenset()
    instruments: tuple = ()
    name: str = "model"
    memory_limit: Optional[Union[int, str]] = None
    narrow: Optional[dict] = None
    cache: bool = True
    tuning_records: Optional[Mapping] = None
    precision: str = "fp32"
    saturating_int8: bool = False
    wait: bool = False
    offload: tuple = ()
    offload_groups: Optional[frozenset] = None  # (the groups the backends may take; None: all they match)

    @staticmethod
    def create(target: Any = None, opt_level: int = 3, **kwargs: Any) -> "CompileOptions":
        """Options from ``ember.compile``'s arguments: an unknown keyword is an ArgumentError
        that names the closest known one."""
        fields = {f.name for f in dataclasses.fields(CompileOptions)} - {"target", "opt_level"}
        unknown = sorted(set(kwargs) - fields)
        if "tuning_db" in unknown:
            raise ArgumentError("tuning_db is read by ember.compile (the front door), which turns it into "
                                "tuning_records: pass ember.tune.apply.best_records(db, target) as tuning_records here")
        if unknown:
            hints = []
            for k in unknown:
                close = difflib.get_close_matches(k, sorted(fields | {"target", "opt_level", "tuning_db"}), n=1)
                hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ArgumentError(f"unknown compile option(s) {', '.join(hints)}; the options are "
                                f"{', '.join(sorted(fields | {'target', 'opt_level', 'tuning_db'}))}")
        if opt_level not in (0, 1, 2, 3):
            raise ArgumentError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
        kwargs["input_shapes"] = _frozen_shapes(kwargs.get("input_shapes"), "input_shapes")
        kwargs["shape_hints"] = _frozen_shapes(kwargs.get("shape_hints"), "shape_hints")
        kwargs["disabled_passes"] = frozenset(kwargs.get("disabled_passes") or ())
        kwargs["instruments"] = tuple(kwargs.get("instruments") or ())
        off = kwargs.get("offload") or ()
        kwargs["offload"] = (off,) if isinstance(off, str) else tuple(off)
        if kwargs.get("offload_groups") is not None:
            kwargs["offload_groups"] = frozenset(kwargs["offload_groups"])
        target = as_target(target)
        if "precision" in kwargs:
            kwargs["precision"] = _precision(kwargs["precision"], target)
        return CompileOptions(target, opt_level, **kwargs)

    def replace(self, **changes: Any) -> "CompileOptions":
        """These options with ``changes``."""
        return dataclasses.replace(self, **changes)

    @property
    def input_shape_map(self) -> Optional[dict]:
        return None if self.input_shapes is None else dict(self.input_shapes)

    @property
    def shape_hint_map(self) -> Optional[dict]:
        return None if self.shape_hints is None else dict(self.shape_hints)
