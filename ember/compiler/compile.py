"""``ember.compile``: a model in, an :class:`~ember.runtime.executable.Executable` out."""
from __future__ import annotations

import os
import time
from typing import Mapping, Optional, Sequence, Union

from ..errors import ArgumentError, ShapeError, UnsupportedOpError
from ..graph import limits
from ..graph.infer import infer_types
from ..graph.ir import Function, Module, Var
from ..graph.ops.dims import collect_assumptions
from ..graph.passes import PassContext, PassTimer, default_pipeline
from ..graph.types import TensorType
from ..options import CompileOptions
from ..target import check_buildable
from .build import build_executable
from .fold import evaluate_constants
from .records import applying
from .specialize import guarded


def _bind_shapes(mod: Module, shapes: Mapping[str, Sequence[int]]) -> Module:
    """Give the named inputs static shapes (a model with a symbolic batch, say)."""
    main = mod.main
    names = [p.name for p in main.params]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise ShapeError(f"input_shapes names {', '.join(unknown)}, which are not inputs (inputs: {', '.join(names)})")
    mapping = {}
    for p in main.params:
        if p.name in shapes:
            shape = tuple(int(d) for d in shapes[p.name])
            if len(shape) != p.type.ndim:
                raise ShapeError(f"input {p.name!r} has rank {p.type.ndim} ({p.type}); input_shapes gives {shape}")
            for want, got in zip(p.type.shape, shape):
                if isinstance(want, int) and want != got:
                    raise ShapeError(f"input {p.name!r} has shape {p.type.shape}; input_shapes gives {shape}")
            mapping[p] = Var(p.name, TensorType(shape, p.type.dtype))
    if not mapping:
        return mod
    from ..graph.visit import substitute

    body = substitute(main.body, mapping)
    params = [mapping.get(p, p) for p in main.params]
    fn = infer_types(Function(params, _untyped(body)))
    return mod.with_function("main", fn)


def _untyped(body):
    from ..graph.ir import Call
    from ..graph.visit import rewrite

    return rewrite(body, lambda n: n.replace(type=None) if isinstance(n, Call) and n.type is not None else None)


def compile_model(model: Union[str, os.PathLike, bytes, Module, "onnx.ModelProto"], target=None,  # noqa: F821
                  opt_level: int = 3, *, options: Optional[CompileOptions] = None, **kwargs):
    """Compile ``model`` (an ONNX path, bytes or ModelProto, or a graph Module) with ``options``
    (a :class:`~ember.options.CompileOptions`; or made from ``target``, ``opt_level`` and the
    keywords, see :meth:`CompileOptions.create`) and return an Executable. ``target`` defaults
    to the host CPU.

    ``input_shapes`` fixes symbolic input dims (``{"data": (1, 3, 224, 224)}``), before the
    model's shape computations are imported; without it a symbolic dim (a dynamic batch)
    stays symbolic, and one executable runs every size.
    ``memory_limit`` (bytes, or a size like ``"4GiB"``; default: the memory available to the
    process) bounds every constant the compile materializes (initializers, folded values) and
    the executable's constants plus one run's arena and outputs: beyond it the compile raises
    ResourceError naming what needs the memory, before allocating it.
    ``exe.compile_times`` holds seconds per phase (import, each pass, lowering, codegen);
    ``exe.compile_profile`` the same per kernel (``.table()`` prints it).
    ``narrow``: for a Module imported with ``from_onnx(..., io_narrow=d)``, that ``d`` (its
    float8/int4 inputs and outputs, which the executable takes and gives as ml_dtypes arrays).
    A model file compiled before with the same settings (and the same Ember) loads the
    executable kept then (:mod:`ember.compiler.cache`) unless ``cache=False``.
    ``tuning_records``: workload -> the best tuning record, which schedules each fused group
    that has one (``ember.compile(..., tuning_db=...)`` reads them from a database); groups
    without a record keep the defaults.
    ``shape_hints`` (``{"x": (1, 3, 512, 512)}``): the sizes a model with symbolic dims will
    mostly run at, which its kernels' schedules are made for; they still run at every size.
    Default: a batch of 1, images of 224x224, sequences of 128 (:mod:`ember.compiler.likely`).
    Each kernel over symbolic sizes also holds its group compiled for those sizes, which the
    calls at them take (:mod:`ember.compiler.twin`): at the hinted shape a dynamic model runs
    as its static export would, and the tuning records of that shape apply.
    """
    if options is None:
        options = CompileOptions.create(target, opt_level, **kwargs)
    elif target is not None or opt_level != 3 or kwargs:
        raise ArgumentError("compile_model takes options or the keywords that make them, not both")
    if options.target.kind == "cuda":
        from .cuda import compile_cuda

        return compile_cuda(model, options)
    check_buildable(options.target)
    if options.offload == ("auto",):
        from .offload import compile_auto

        return compile_auto(model, options)
    if options.offload:
        from ..offload import get_backend

        for b in options.offload:  # (an unknown or unavailable backend said before any work)
            get_backend(b)
    t0 = time.perf_counter()
    marker = _compiled_before(model, options)
    key = os.path.basename(marker)[len("model-"):] if marker is not None else None
    from ..loop.knobs import deciding

    # (a compile under the tuner's decisions makes other kernels than the defaults: neither
    # loaded from nor kept as this model's executable)
    use_cache = (options.cache and marker is not None and not options.instruments and options.memory_limit is None
                 and options.tuning_records is None and not deciding())
    if use_cache and os.path.exists(marker):
        from . import cache as kept

        def recompile():
            return compile_model(model, options=options.replace(cache=False))
        exe = kept.load(key, recompile)
        if exe is not None:
            from ..profile.compile import CompileProfile

            exe.target = options.target
            exe.graph = None
            exe.compile_times = {"load kept executable": time.perf_counter() - t0,
                                 "total": time.perf_counter() - t0}
            exe.compile_profile = CompileProfile.collect(options.name, exe.compile_times, {}, [])
            return guarded(model, options, exe)  # (runs whose values the program refuses: per value)
    if marker is not None and not os.path.exists(marker):
        # a model file this Ember has not compiled: its kernels will miss the cache, so the
        # compile worker starts now, on the core the import and the passes leave idle
        from ..codegen.llvm.objects import warm_up_workers

        warm_up_workers()
    # (fresh: the constant-folding program compiled inside a model's passes keeps what its own
    # kernels assume to itself)
    with (limits.memory_limit(options.memory_limit), collect_assumptions(fresh=True),
          applying(options.tuning_records, options.target)):
        try:
            exe = _compile(model, options)
        except (UnsupportedOpError, ShapeError) as e:
            if isinstance(model, Module):
                raise
            # inputs whose values decide what no one program can (an axis, an output size from
            # a scale): compiled per value as runs give them
            from .specialize import specializing

            spec = specializing(model, options, e)
            if spec is None:
                raise
            return spec
    if marker is not None:
        def keep(done) -> None:
            with open(marker, "w"):
                pass
            if use_cache:
                from . import cache as kept

                kept.save(done, key)  # (in the background: this compile returns now)
        from .tiered import TieredExecutable

        if isinstance(exe, TieredExecutable):  # (what is kept is the all-tier-1 executable)
            exe.when_done(keep)
        else:
            keep(exe)
    return guarded(model, options, exe)


def _on_terminal() -> bool:
    import sys

    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _compiled_before(model, options: CompileOptions) -> Optional[str]:
    """The marker file saying this model file (by path, size and modification time) was
    compiled with these settings by this Ember; None for a model that is not a file."""
    if not isinstance(model, (str, os.PathLike)) or not os.path.isfile(model):
        return None
    import hashlib

    from ..config import cache_dir
    from ..version import source_digest

    st = os.stat(model)
    key = repr((os.path.abspath(model), st.st_size, st.st_mtime_ns, source_digest(), repr(options.target),
                options.opt_level, options.input_shapes, sorted(options.disabled_passes), options.shape_hints,
                options.precision, options.saturating_int8, options.offload, options.offload_groups))
    d = os.path.join(cache_dir(), "index")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, "model-" + hashlib.sha256(key.encode()).hexdigest())


def _offload_layout(options: CompileOptions) -> dict:
    """What the offload backends' kernels read, for block_layout: ``channel_block``, the
    channel block of their blocked data (None: Ember's choice), and ``int8_channels_last``, the
    packed dots of the quantized convs they take channels last."""
    if not options.offload:
        return {"channel_block": None, "int8_channels_last": ()}
    from ..offload import int8_channels_last, layout_block

    return {"channel_block": layout_block(options.offload, options.target),
            "int8_channels_last": int8_channels_last(options.offload)}


def _optimize(mod: Module, ctx: PassContext) -> tuple:
    """``mod`` (a ``main`` alone) typed and through the pass pipeline, with what its shape rules
    assume of its symbolic dims (checked by its program per run)."""
    with collect_assumptions(fresh=True) as assumed:
        mod = ctx.run(infer_types(mod), default_pipeline())
    return mod, assumed


def _compile(model, options: CompileOptions):
    times: dict = {}
    input_shapes, name = options.input_shape_map, options.name
    t0 = time.perf_counter()
    output_names = None
    narrow = dict(options.narrow or {})  # narrow-typed inputs and outputs (float8, int4, ...): their bytes as uint8
    if isinstance(model, Module):
        mod = model
    else:
        from ..frontend.onnx.checks import load_model_lean
        from ..frontend.onnx.importer import from_onnx

        proto, _, weights = load_model_lean(model)  # (a file's large weights read straight into arrays)
        output_names = [o.name for o in proto.graph.output]
        mod = from_onnx(proto, input_shapes=input_shapes, io_narrow=narrow, weights=weights)  # bound before the shape computations
        del proto, weights  # the graph holds the weights now: the proto's copy of them goes
        input_shapes = None
    times["import"] = time.perf_counter() - t0
    if input_shapes:
        mod = _bind_shapes(mod, input_shapes)
    import ember.graph.ops.compute  # noqa: F401  (registers the op computes)

    target = options.target
    timer = PassTimer()
    # (the constant folder computes with this compiler: a pass below it cannot name it)
    ctx = PassContext(opt_level=options.opt_level, disabled=options.disabled_passes,
                      instruments=[timer, *options.instruments],
                      config={"target": target, "options": options, "evaluate": evaluate_constants,
                              **_offload_layout(options)})
    # the model's main, and each subgraph function control flow runs, go through the pipeline
    # on their own: each becomes a program of its own
    from ..kernels.common import likely_sizes
    from .likely import likely_sizes_of

    likely = likely_sizes_of(mod.main, options.shape_hint_map)
    with likely_sizes(likely):  # (passes that choose by size: ember.graph.passes.fold_channel_scale)
        subs = {fname: _optimize(Module({"main": fn}), ctx) for fname, fn in mod.functions if fname != "main"}
        mod, assumed = _optimize(Module({"main": mod.main}), ctx)
    for pname, t in timer.times:
        times[f"pass {pname}"] = times.get(f"pass {pname}", 0.0) + t
    stats: dict = {}
    from ..loop.knobs import deciding

    # (tiers: not for a build the caller measures or instruments, or asked to wait)
    tiers = None if options.wait or options.instruments or deciding() else {"t0": t0, "progress": _on_terminal()}
    exe = build_executable(mod, target, output_names, name=name, timings=times, stats=stats, assumptions=assumed,
                           offload=options.offload, offload_groups=options.offload_groups,
                           subs=subs, narrow=narrow, likely=likely, tiers=tiers)
    times["total"] = time.perf_counter() - t0
    exe.compile_times = times
    exe.graph = mod
    from ..profile.compile import CompileProfile

    exe.compile_profile = CompileProfile.collect(name, times, stats, exe._kernel_sources)
    return exe


__all__ = ["compile_model"]
