"""Fused graph module -> Executable: the program (:mod:`.program`), one kernel per distinct
fused group across the model and its subgraphs, and the constants as read-only arrays."""
from __future__ import annotations

import functools
import time
from typing import Optional, Sequence

from ..codegen.index import index_lookup, index_store
from ..graph.ir import Module
from ..graph.printer import astext
from ..graph.types import TensorType
from ..version import source_digest
from .executable import Executable
from .group import group_likely, lower_group, make_group_kernel
from .program import Shared, make_program, nbytes as _nbytes

__all__ = ["build_executable"]


def build_executable(mod: Module, target, output_names: Optional[Sequence[str]] = None,
                     name: str = "model", timings: Optional[dict] = None,
                     stats: Optional[dict] = None, assumptions: Optional[dict] = None,
                     subs: Optional[dict] = None, narrow: Optional[dict] = None,
                     likely: Optional[dict] = None, tiers: Optional[dict] = None, offload: tuple = (),
                     offload_groups: Optional[frozenset] = None):
    """Compile every fused group of ``mod`` (made by ``fuse_ops``) and lay out the program.

    ``timings`` gets seconds per phase; ``stats`` per kernel (see ``ember.driver.build``, plus
    ``schedule``: the group's computes and schedule). ``assumptions``: what the shape rules
    assumed of the symbolic dims (``ember.graph.ops.dims.collect_assumptions``); the program
    checks them when a run binds the symbols. ``subs``: the fused modules (and assumptions) of
    the subgraph functions control flow runs, by name. ``narrow``: the narrow types of inputs
    and outputs that the program takes and gives as bytes (``"view"`` in its entries).
    ``likely``: symbol name -> the likely value of a symbolic size, which the default
    schedules choose for (:func:`ember.compiler.likely.likely_sizes_of`). ``tiers`` (``{"t0":
    the compile's start, "progress": bool}``): where many kernels are not in the cache, return a
    :class:`~.tiered.TieredExecutable` that runs now on tier-0 kernels and switches to these
    as they compile in the background (:func:`_tiered`); None: wait for them all. ``offload``:
    the backends (``ember.offload``) whose kernels run the groups they take (those in
    ``offload_groups`` only, when given)."""
    from ..codegen.llvm import build_made  # (llvmlite's IR builder: only on a cache miss)

    shared = Shared()
    program = make_program(mod, shared, output_names, assumptions, subs,
                           check_memory=functools.partial(_check_memory, shared=shared, name=name))
    groups = shared.groups
    for entry in program["inputs"]:
        if narrow and entry["name"] in narrow.get("inputs", {}):
            entry["view"] = narrow["inputs"][entry["name"]]
    for entry, kind in zip(program["outputs"], (narrow or {}).get("outputs", [])):
        if kind:
            entry["view"] = kind
    # kernels (after the checks: no lowering for a model that cannot run); a warm compile finds
    # the library by the groups alone: no computes, schedules or lowering
    t0 = time.perf_counter()
    tuned = _tuned(groups)  # (kernel name -> a tuning record's schedule, when a compile applies records)
    per_group = {g: h for g, h in ((g, group_likely(fn, likely)) for g, fn in groups) if h}
    twin_tuned = _twin_tuned(groups, per_group)  # (the records of static twins' workloads)
    offloaded = _offloaded([(g, fn) for g, fn in groups if offload_groups is None or g in offload_groups], offload)
    key = groups_key(groups, target, per_group, twin_tuned, offloaded) if groups else None
    cached = index_lookup(key) if key else None

    def finish(module, prog: dict = program) -> Executable:
        exe = Executable(module, prog, shared.constants)
        if offloaded:
            from .external import forget_when_freed

            forget_when_freed(exe)
        # what a profiler needs to rebuild the kernels differently (loop instrumentation): the
        # groups are scheduled here again only when it asks
        exe.kernel_sources_thunk = lambda: [_source(lower_group(fn, g, target, tuned.get(g), per_group.get(g),
                                                                twin_tuned.get(g)))
                                            for g, fn in groups]
        exe.target = target
        exe.groups = list(groups)  # (kernel name, group Function): what the tuner extracts as tasks
        exe.likely_sizes = dict(likely or {})
        exe.tuned_kernels = sorted({g for g, t in tuned.items() if t[1] is not None} | set(twin_tuned))  # (by a record)
        return exe

    result = None
    if cached is not None:
        from ..runtime.module import Module as KernelModule

        module = KernelModule(cached)
        if stats is not None:
            stats.update({gname: {"cached": True} for gname, _ in groups})
    elif groups:
        # each group's whole back end (computes, schedule, lowering, loop passes, LLVM) is one
        # job for the compile workers, on every core
        jobs = _group_kernels(groups, tuned, per_group, twin_tuned, offloaded)
        if tiers:
            result = _tiered(jobs, groups, program, finish, target, stats, key, tiers)
        if result is None:
            module = build_made(jobs, target, stats)
            index_store(key, module.path)
    else:
        module = None
    t1 = time.perf_counter()
    if timings is not None:
        timings["lower groups"] = 0.0
        timings["codegen"] = t1 - t0
    return result if result is not None else finish(module)


# a build of fewer new kernels than this waits for them all (tier 0 would save less than a
# second and cost a second build)
TIER_MIN_KERNELS = 8
# a group doing this many floating-point operations per run compiles at tier 1 at once: at
# tier 0's ~10 GFLOP/s on products it would take longer to run than its tier-1 kernel (~0.2 s
# of CPU) takes to compile
HEAVY_FLOPS = 1_000_000_000
# ... and a convolution this many times as many: tier 0 runs them ~5x faster (ResNet-50's 7
# GFLOP in ~0.15 s: its plain schedule streams the packed weights into register accumulators),
# so compiling ResNet-50's heaviest conv (1.2 GFLOP) first cost its first result ~0.2 s to
# save ~25 ms of its first run
CONV_HEAVY_FACTOR = 5


def _batches(missing: int) -> int:
    """How many batches a tiered build switches over in: each costs a link and a new
    executable (~50 ms) and idles the workers at its end; four at most, of 16 kernels or more."""
    return min(4, max(1, missing // 16))


def _tiered(jobs: list, groups: list, program: dict, finish, target, stats: Optional[dict], key: str,
            tiers: dict):
    """A :class:`~.tiered.TieredExecutable` whose groups run on their tier-1 kernel where the
    cache has its object and on a tier-0 kernel (:mod:`.tier0`) elsewhere, the tier-1 kernels
    compiled in the background in a few batches (the groups that do the most work first), each
    batch switched over when it lands; None where fewer than :data:`TIER_MIN_KERNELS` are
    missing, heavy groups (:data:`HEAVY_FLOPS`, built in the first library) aside: the build
    waits for them. ``tiers``: ``{"t0": compile start, "progress": bool}``."""
    from ..codegen.llvm import build_made
    from ..codegen.llvm.objects import compile_made_objects, in_background, made_object_cached
    from .tier0 import call_sizes, constant_params, kernel_names, remap_program, tier0_kernels
    from .tier0_split import splittable
    from .tiered import TieredExecutable

    missing = [k for k, j in enumerate(jobs) if not made_object_cached(j[1], target)]
    if len(missing) < TIER_MIN_KERNELS:
        return None
    work: dict = {}  # kernel -> floating-point operations per run (static programs), a conv's discounted
    for c in program["calls"]:
        if isinstance(c.get("flops"), int):
            conv = any(str(op).startswith("nn.conv2d") for op in (c.get("ops") or ()))
            work[c["kernel"]] = work.get(c["kernel"], 0) + c["flops"] // (CONV_HEAVY_FACTOR if conv else 1)
    # a group heavy enough that its tier-0 kernel would run longer than its tier-1 kernel takes
    # to compile gets its tier-1 kernel now (ViT-B/16's products: 8 GFLOP/s at tier 0, 6.8 s
    # for the first run)
    missing = [k for k in missing if work.get(jobs[k][0], 0) < HEAVY_FLOPS]
    if len(missing) < TIER_MIN_KERNELS:  # (little left for tier 0: the build waits for them all)
        return None
    fns = dict(groups)
    t0_jobs, chosen = tier0_kernels([(jobs[k][0], fns[jobs[k][0]]) for k in missing], constant_params(program),
                                    split=splittable(program), sizes=call_sizes(program))
    t0_by_name = {j[0]: j for j in t0_jobs}

    def mixed(pending: set, kernel_stats: Optional[dict] = None):
        use = [j for j in jobs if j[0] not in pending]
        use += [t0_by_name[n] for n in dict.fromkeys(n for g in pending for n in kernel_names(chosen[g]))]
        module = build_made(use, target, kernel_stats)
        prog = remap_program(program, {g: chosen[g] for g in pending})
        return finish(module, prog), {g: 0 if g in pending else 1 for g, _ in groups}

    pending = {jobs[k][0] for k in missing}
    first, at = mixed(pending, stats)
    # the groups doing the most work run first at tier 1 (tier 0 is slowest on products and convs)
    order = sorted(missing, key=lambda k: -work.get(jobs[k][0], 0))
    size = -(-len(order) // _batches(len(order)))

    def steps():
        left = set(pending)
        with in_background():
            for b in range(0, len(order) - size, size):  # (the last batch: the final build below)
                batch = [jobs[k] for k in order[b:b + size]]
                compile_made_objects(batch, target)
                left -= {j[0] for j in batch}
                yield mixed(left)
            module = build_made(jobs, target)
        index_store(key, module.path)
        yield finish(module), {g: 1 for g, _ in groups}

    return TieredExecutable(first, at, steps(), tiers["t0"], progress=tiers.get("progress", False))


def _offloaded(groups: list, offload: tuple) -> dict:
    """Kernel name -> (backend name, its version) for the groups an offload backend takes."""
    if not offload:
        return {}
    from ..offload import backend_for, get_backend

    found = {g: backend_for(fn, offload) for g, fn in groups}
    return {g: (b, get_backend(b).version) for g, b in found.items() if b is not None}


def _group_kernels(groups: list, tuned: dict, likely: dict, twin_tuned: dict, offloaded: dict = None) -> list:
    """The fused groups as kernels made in their compile jobs (``build_made``): each job's
    text (its object's key) is the group's, with the record and likely sizes it is scheduled
    by; a group an offload backend takes is made by it (:mod:`.external`)."""
    from .external import backend_module, make_external_kernel

    out = []
    for g, fn in groups:
        if offloaded and g in offloaded:
            b, version = offloaded[g]
            out.append((g, f"{g}\noffload {b} {version}\n{astext(fn)}", make_external_kernel,
                        (b, fn, backend_module(b))))
            continue
        text = (f"{g}\n{astext(fn)}" + (f"\ntuned {tuned[g][0]} {tuned[g][1]}" if g in tuned else "")
                + (f"\nlikely {sorted(likely[g].items())}" if likely.get(g) else "")
                + (f"\ntwin tuned {twin_tuned[g][0]} {twin_tuned[g][1]}" if g in twin_tuned else ""))
        out.append((g, text, make_group_kernel, (fn, tuned.get(g), likely.get(g), twin_tuned.get(g))))
    return out


def _tuned(groups: list) -> dict:
    """Kernel name -> (decisions, trace) of the groups a tuning record schedules; inside the
    tuner's :func:`~ember.loop.knobs.decisions` (an experiment), the others too: (those
    decisions, no trace), which their compile jobs, in other processes, schedule under."""
    from .records import tuned_schedule

    found = {g: tuned_schedule(fn) for g, fn in groups}
    chosen = _decisions_digest()
    if chosen:
        found = {g: t or (chosen, None) for g, t in found.items()}
    return {g: t for g, t in found.items() if t is not None}


def _twin_tuned(groups: list, likely: dict) -> dict:
    """Kernel name -> the tuning record of its static twin's workload (``ember tune
    --input-shape`` tunes a dynamic model at those sizes), while a compile applies records."""
    from .records import active, tuned_schedule
    from .twin import specialize_group

    if not active():
        return {}
    found = {}
    for g, fn in groups:
        static = specialize_group(fn, likely[g]) if g in likely else None
        t = tuned_schedule(static) if static is not None else None
        if t is not None:
            found[g] = t
    return found


def _source(k) -> tuple:
    """``(schedule or PrimFunc, args, name)``: what a profiler rebuilds a kernel from."""
    src = k.source
    return (src, None, k.name) if not isinstance(src, tuple) else src


def _ops(call: dict) -> str:
    ops = call["ops"]
    return ", ".join(ops) if isinstance(ops, (list, tuple)) else str(ops)


def _check_memory(prog, values: list, arena_bytes: int, outputs: list, shared: Shared, name: str) -> None:
    """What the executable holds (its constants) and what one run adds (the arena of the
    intermediates and the outputs) against the compile's memory limit."""
    from ..graph.limits import check_bytes, format_bytes

    const_bytes = sum(int(c.nbytes) for c in shared.constants)
    out_bytes = sum(_nbytes(TensorType(tuple(o["shape"]), o["dtype"])) for o in outputs)
    what = (f"model {name!r}: its constants ({format_bytes(const_bytes)}), the arena of its intermediates "
            f"({format_bytes(arena_bytes)}) and its outputs ({format_bytes(out_bytes)})")
    biggest = []  # (bytes, what) of the largest intermediate and output
    if values:
        big = max(values, key=lambda v: v.nbytes)
        call, slot = prog.calls[big.start], prog.slots[big.key]
        biggest.append((big.nbytes, f"the result of {call['nodes']} ({_ops(call)}) of shape "
                                    f"{tuple(slot['shape'])} {slot['dtype']}"))
    for o in outputs:
        n = _nbytes(TensorType(tuple(o["shape"]), o["dtype"]))
        made = [c for c in prog.calls if o["slot"] in c["args"]]
        src = f"{made[-1]['nodes']} ({_ops(made[-1])}), " if made else ""
        biggest.append((n, f"output {o['name']!r} ({src}shape {tuple(o['shape'])} {o['dtype']})"))
    if biggest:
        n, which = max(biggest, key=lambda b: b[0])
        what += f"; the largest single value is {which}, {format_bytes(n)}"
    check_bytes(const_bytes + arena_bytes + out_bytes, what)


def _decisions_digest() -> str:
    """The tuner's active decisions as JSON (``""`` outside them), as a compile inside them
    applies them to every group and keys its library."""
    import json

    from ..loop.knobs import active_values

    chosen = active_values()
    return json.dumps(chosen, sort_keys=True) if chosen else ""


def groups_key(groups: list, target, likely: Optional[dict] = None, twin_tuned: Optional[dict] = None,
               offloaded: Optional[dict] = None) -> str:
    """The cache key of a model's kernels: the printed group functions (types included, so
    shapes and dtypes), the target, and a digest of Ember's own sources -- the default
    schedules are a function of exactly these, so any change to Ember misses the cache --
    and the groups offloaded, to which backend."""
    import hashlib

    from ..config import opt_level
    from .records import records_digest

    h = hashlib.sha256(b"groups\0")
    for part in [source_digest(), target.triple, target.cpu, target.features, str(target.cores), str(opt_level()),
                 *(f"{g}\n{astext(fn)}" for g, fn in groups), records_digest(groups), _decisions_digest(),
                 repr(sorted((likely or {}).items())), repr(sorted((twin_tuned or {}).items())),
                 repr(sorted((offloaded or {}).items()))]:
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


