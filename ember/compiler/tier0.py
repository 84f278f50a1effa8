"""Tier 0: a kernel for every fused group that is cheap to compile and shared across models.

A model's first run should not wait for its specialized kernels (tier 1: blocked, tiled,
unrolled, optimized by LLVM at O3; 0.1-0.3 s of CPU each, 141 of them in GhostNetV2). Tier 0
makes each group a kernel that costs a fraction of that and that other models reuse:

- the group is made shape-generic where it can be (:func:`ember.compiler.generic.generalize`
  in its ``"all"`` mode: elementwise and injective groups, their sizes passed per call), so one
  kernel serves every group of that form, in this model and in any later one;
- its schedule is the plain one (:func:`schedule_plain`): injective stages inlined, each root
  stage's outer loops fused and parallel, its innermost spatial axis vectorized -- inside the
  reduction for a product or a convolution, whose lanes are then output channels or columns;
- LLVM compiles it at :data:`TIER0_OPT` (O1);
- it is named by a digest of what it computes (``tier0_<op>_<digest>``), so its object in the
  kernel cache is found by any model whose group computes the same.

:func:`tier0_kernels` makes the compile jobs of a model's groups; :func:`remap_program` points
a program's calls at them (their kernel, and the sizes a generic one takes).
"""
from __future__ import annotations

import functools
import hashlib
from typing import Optional

from ..errors import EmberError
from ..graph.ir import Call, Function
from ..graph.ops import get_op
from ..graph.visit import post_order, rewrite
from ..graph.printer import astext
from ..kernels.common import const_int, parallel_outer, vector_lanes, vectorize_inner
from ..kernels.elementwise import schedule_elementwise
from ..loop import compute as te
from ..loop.arith import can_prove
from ..loop.expr import EQ, FloorMod, IntImm
from ..loop.schedule import Schedule
from .generic import generalize, generic_kernels
from .group import ANCHORS, GroupKernel, compute_group, group_anchor, own_outputs, _inlinable, _materialized
from .tier0_collapse import ALONG, Viewed, collapse
from .tier0_ops import Steps, op_steps
from .tier0_split import PerCall, Split, choice_of, sizes_key, split_calls, split_group
from .twin import specialize_group

__all__ = ["TIER0_OPT", "call_sizes", "constant_params", "kernel_names", "make_tier0_kernel", "remap_program", "schedule_plain",
           "tier0_kernels"]

# LLVM's level for tier-0 kernels: O1 (no unrolling or vectorizers; the schedule vectorizes).
# Measured on ResNet-18 and GhostNetV2's tier-0 kernels: a lighter pipeline (SROA, instcombine,
# CFG simplification, GVN) saved 20-25% of their build and ran 3.5x and 2x slower; fast
# instruction selection (LLVM's -O0 code generation) saved 15% more and ran 9x slower
TIER0_OPT = 1


# a shape-generic tier-1 kernel called with more distinct sizes than this keeps its own generic
# function at tier 0 (each call's binding is ~1.5 ms of Python: DenseNet-121's 58 sizes of its
# BN-ReLU cost its tier-0 naming 0.11 -> 0.2 s for one kernel fewer; Swin-T's have 2-8)
PER_CALL_MAX = 8

# size arguments a tier-0 kernel takes at most (the native program runner takes fewer than 64
# a call: a concat of 25 parts of rank 3 had 75 with a symbol per dim; by value it has 3)
MAX_SIZES = 32


def schedule_plain(s: Schedule, t: te.Tensor) -> None:
    """Tier 0's schedule of a root stage: an injective one vectorized along its last axis with
    its outer loops parallel; a reduction with its last spatial axis moved inside the reduction
    and vectorized there (a product's columns, a blocked convolution's output channels: each
    step of the reduction is one vector multiply-add), the other spatial loops fused and
    parallel."""
    st = s[t]
    if not t.op.reduce_axis:
        schedule_elementwise(s, t)
        return
    spatial = [iv for iv in st.leaf if iv in t.op.axis]
    reduce = [iv for iv in st.leaf if iv not in t.op.axis]
    if not spatial:
        return
    last = spatial[-1]
    ext = const_int(last.extent)
    lanes = vector_lanes(None, t.dtype)
    outer = spatial[:-1]
    if ext is not None and ext > 1 and reduce:
        st.reorder(*outer, *reduce, last)
        vo, _ = vectorize_inner(st, last, lanes)
        if vo is not None:  # (a long axis: its vectors' loop joins the parallel ones)
            st.reorder(*outer, vo, *reduce, st.leaf[-1])
            outer = outer + [vo]
    extents = [const_int(iv.extent) for iv in outer]
    if outer and (None in extents or max(extents) > 1):
        parallel_outer(st, outer)


def _plain_kernel(fn: Function, name: str) -> GroupKernel:
    """``fn``'s computes with the plain schedule (:func:`schedule_plain`)."""
    inputs, outputs, stages_of, anchor, env = compute_group(fn, name)
    outputs = own_outputs(outputs)
    s = Schedule(outputs)
    out_set = set(outputs)
    for stages in stages_of.values():
        for t in stages:
            if t not in out_set and _inlinable(t):
                s[t].compute_inline()
    roots = [st.tensor for st in s.stages if not st.is_placeholder and st.attach[0] != "inline"]
    # (a value the compute materializes for its sum -- a window conv's padded input -- is a
    # stage before it, scheduled plain, not one of the sum's)
    before = [t for t in roots if _materialized(t) and t not in out_set]
    roots = [t for t in roots if t not in before]
    reductions = [t for t in roots if t.op.reduce_axis]
    one_sum = len(reductions) == 1 and len(outputs) == 1 and len(roots) <= 2 \
        and tuple(outputs[0].shape) == tuple(reductions[0].shape)
    for t in before:
        schedule_plain(s, t)
    if not (one_sum and _accumulate(s, reductions[0], outputs[0])):
        for t in roots:
            schedule_plain(s, t)
    return GroupKernel(name, s, inputs, outputs, anchor.op if anchor is not None else None)


def _accumulate(s: Schedule, red: te.Tensor, out: te.Tensor) -> bool:
    """A product's or a convolution's plain schedule with its sums in a register: for each
    vector of the output's last axis (in parallel over the other axes, the vectors' loop
    outermost), the whole reduction accumulates into one vector, then the epilogue (``out``,
    if not ``red`` itself) stores it.
    False (nothing scheduled) where the last axis has one element."""
    if red.ndim < 2:
        return False
    last = const_int(red.shape[-1])
    if last is not None and last < 2:
        return False
    lanes = vector_lanes(None, red.dtype)
    acc = s.cache_write(red, "local") if out is red else red
    so = s[out]
    axes = list(so.leaf)
    # a blocked window convolution: its chains are neighbouring columns too, each FMA of a
    # column sharing the loads of the filter block's weights (a window conv computes columns
    # past a row's end safely, ``columns_past_end``, their stores guarded) -- one chain per
    # vector of the block ran ResNet-50's and DenseNet-121's tier 0 at half the FMA rate
    if red.ndim == 5 and red.op.attrs.get("columns_past_end") and last is not None and last % lanes == 0 \
            and out is red and const_int(red.shape[3]) != 1:
        return _accumulate_columns(s, red, acc, lanes, last // lanes)
    # a few output vectors side by side in registers, where the last axis has them: one
    # accumulator is one chain of dependent FMAs, latency-bound at a quarter of the FMA rate;
    # several share each broadcast of the data (a product's columns, a 32-channel block)
    # (a symbolic last axis -- a batched product of runtime sizes, attention's -- has one,
    # its tail masked)
    # (a symbolic one a multiple of vectors, a product's columns ``64*s``, has them too)
    chains = next((u for u in (4, 3, 2) if can_prove(EQ(FloorMod(red.shape[-1], IntImm(u * lanes, "int64")),
                                                        IntImm(0, "int64")))), 1)
    if chains > 1:
        vo, vi = so.split(axes[-1], factor=chains * lanes)
        vu, vl = so.split(vi, factor=lanes)
        so.vectorize(vl)
        vi = None
    else:
        vo, vi = vectorize_inner(so, axes[-1], lanes)
    outer = axes[:-1]
    if vo is not None:  # (columns outermost: a product's rows then reuse one panel of weights from cache)
        so.reorder(vo, *outer, *((vu, vl) if vi is None else (vi,)))
        outer = [vo] + outer
    extents = [const_int(iv.extent) for iv in outer]
    if outer and (None in extents or max(extents) > 1):
        attach = parallel_outer(so, outer)
    else:
        attach = None
    st = s[acc]
    if attach is not None:
        st.compute_at(so, attach)
    spatial = [iv for iv in st.leaf if iv in acc.op.axis]
    reduce = [iv for iv in st.leaf if iv not in acc.op.axis]
    if chains > 1:
        cu, cl = st.split(spatial[-1], factor=lanes)
        st.reorder(*spatial[:-1], *reduce, cu, cl)
        st.unroll(cu)
        st.vectorize(cl)
    else:
        st.reorder(*spatial[:-1], *reduce, spatial[-1])
        vectorize_inner(st, spatial[-1], lanes)
    return True


# the vector accumulators a window conv's tier-0 kernel keeps (of the 16 or 32 registers: the
# rest hold a broadcast input and the weights), in up to 4 neighbouring output columns
ACCUMULATORS = {8: 8, 16: 16}  # vector lanes of float32 (AVX2, AVX-512) -> accumulators
COLUMNS = 4


def _accumulate_columns(s: Schedule, red: te.Tensor, acc: te.Tensor, lanes: int, vectors: int) -> bool:
    """:func:`_accumulate` for a blocked window convolution (``N F/FB OH OW FB``, FB
    ``vectors`` vectors): up to :data:`COLUMNS` columns of one row accumulate side by side in
    registers (each a vector per lanes of the block) over the channels and taps, then are
    stored, a column past the row's end not. ``acc``: ``red``'s sums as written to registers
    (its ``cache_write``). In parallel over the rows alone: fused with the filter blocks, their
    division chain was in every guard of the columns, which tripled the kernel's IR and its
    LLVM time (ResNet-50's three tier-0 conv kernels: 0.2 s more of its first result from an
    empty cache); the blocks alone were too few (DenseNet's 32 filters, one block)."""
    columns = max(1, min(COLUMNS, ACCUMULATORS.get(lanes, 8) // vectors))
    so = s[red]
    n, fo, y, x, fb = so.leaf
    xo, xi = so.split(x, factor=columns)
    so.reorder(n, y, fo, xo, xi, fb)
    so.vectorize(fb)
    so.parallel(y)
    st = s[acc]
    st.compute_at(so, xo)
    spatial = [iv for iv in st.leaf if iv in acc.op.axis]
    reduce = [iv for iv in st.leaf if iv not in acc.op.axis]
    fo, fl = st.split(spatial[-1], factor=lanes)
    st.reorder(*spatial[:-2], *reduce, spatial[-2], fo, fl)
    st.unroll(spatial[-2])
    st.unroll(fo)
    st.vectorize(fl)
    return True


def make_tier0_kernel(payload: Function, name: str, target) -> tuple:
    """A compile job's maker (``ember.codegen.llvm.build_made``): the tier-0 kernel of group
    ``payload`` -> (PrimFunc, stats), like :func:`ember.compiler.group.make_group_kernel`.
    A group whose computes the plain schedule cannot lower (an op's kernel hook, a packed dot
    that needs its vector axis) takes its default schedule instead."""
    import time

    from ..loop.visit import loop_nest
    from .group import lower_group

    from ..loop.passes import quick_pipeline

    t0 = time.perf_counter()
    try:
        k = _plain_kernel(payload, name)
        t1 = time.perf_counter()
        func = k.lowered()
    except EmberError:
        k = lower_group(payload, name, target)
        t1 = time.perf_counter()
        func = k.lowered()
    t2 = time.perf_counter()
    nest = loop_nest(func)
    func = quick_pipeline(func)
    return func, dict(schedule=t1 - t0, lower=t2 - t1, loop_passes=time.perf_counter() - t2, passes_done=True,
                      trace=k.schedule.trace.text() if k.func is None else "(a loop program written directly)",
                      **nest)


def _tier0_function(fn: Function, weights: frozenset = frozenset()) -> tuple:
    """``(function, sizes)``: the group as its tier-0 kernel computes it -- shape-generic where
    it generalizes (``sizes``: this call's values of its size symbols), else as it is. The
    parameters at the positions in ``weights`` keep their sizes from their third axis on (a
    packed convolution weight's window and block: its filters and channels go generic, so one
    kernel serves convolutions of every width), or from their second (a grouped one's group
    width), or else all of them (the shape rule wants them static), so its activations' sizes
    go generic alone. A short last axis goes generic where the group's computes take it so
    (:func:`generalize`'s ``short``), and a reshape's sizes that no parameter has do too."""
    if len(fn.params) > MAX_SIZES:
        # (a concat of an unrolled recurrence's 512 steps: its symbolic sum of sizes cost 2.6 s a
        # try, 8 tries, for sizes past MAX_SIZES anyway)
        return fn, {}
    # (only an anchor's weights keep their sizes: a bias, a constant the epilogue reads, goes
    # generic like the activations, or a grouped conv's kernel would be one per width)
    weights = frozenset(i for i in weights if _anchor_weight(fn, fn.params[i]))
    calls = [c for c in post_order(fn.body) if isinstance(c, Call)]
    # (a blocked conv's packed weights keep their window whatever else goes generic: its
    # weights all generic never take, and were a third of EfficientNet-B0's generalizations)
    conv = weights and any(c.op == "nn.conv2d_nchwc" for c in calls)
    tries = ([] if conv else [(frozenset(), 0)]) + ([(weights, 2), (weights, 1), (weights, 0)] if weights else [])
    if conv and len(calls) == 1:  # (a conv alone: its window first, ember.kernels.conv_window)
        tries.insert(0, (weights, 4))
    # (an anchor alone -- a split group's, :mod:`.tier0_split` --, or an op along axes collapsed
    # to ``(outer, n, inner)``, :mod:`.tier0_collapse`: its 1s go generic first)
    along = len(calls) == 1 and calls[0].op in ALONG
    alone = along or len(calls) == 1 and get_op(calls[0].op).pattern in ANCHORS
    with generic_kernels("any"):
        for ones in (True, False) if alone else (False,):
            for keep, from_axis in tries:
                for apart in (True, False):  # (a symbol per dim shares most; per value where rules need it)
                    for short in (False, True):
                        g = generalize(fn, keep, from_axis, apart, short, ones, lead=along)
                        if g is not None and len(g[1]) <= MAX_SIZES and _computes(g[0]):
                            return _grouped_alike(g[0]), g[1]
    return fn, {}


def _anchor_weight(fn: Function, param) -> bool:
    """Whether ``param`` is an operand of ``fn``'s anchor other than its data (its weights)."""
    return any(isinstance(c, Call) and get_op(c.op).pattern in ANCHORS and any(a is param for a in c.args[1:])
               for c in post_order(fn.body))


def _grouped_alike(fn: Function) -> Function:
    """``fn`` with every grouped blocked conv's ``groups`` written alike: its packed weights
    say how its channels group (depthwise: one channel each), and its compute asks only
    whether it is grouped, so depthwise convs of every width share a kernel."""
    def one(n):
        if isinstance(n, Call) and n.op == "nn.conv2d_nchwc" and n.attr("groups", 1) > 2:
            return n.replace(attrs={**dict(n.attrs), "groups": 2})
        return None
    body = rewrite(fn.body, one)
    return fn if body is fn.body else Function(fn.params, body, fn.ret_type)


@functools.lru_cache(maxsize=4096)
def _computes(fn: Function) -> bool:
    """Whether every op of a generalized group has a compute over its symbolic sizes (a shape
    rule may take sizes its compute cannot: a grouped conv's channel count). Remembered: the
    groups that share a tier-0 kernel generalize to one function (EfficientNet-B0's 58 conv
    groups: 194 checks, 0.14 s)."""
    if all(get_op(c.op).pattern not in ANCHORS for c in post_order(fn.body) if isinstance(c, Call)):
        return True  # (elementwise and injective computes take any sizes)
    try:
        compute_group(fn, "check")
        return True
    except EmberError:
        return False


def constant_params(program: dict) -> dict:
    """Kernel name -> the positions of its parameters that every call of it in ``program``
    passes a constant (its weights)."""
    slots = program["slots"]
    found: dict = {}
    for c in program["calls"]:
        here = {i for i, a in enumerate(c["args"]) if slots[a]["kind"] == "const"}
        found[c["kernel"]] = found[c["kernel"]] & here if c["kernel"] in found else here
    return {k: frozenset(v) for k, v in found.items()}


def call_sizes(program: dict) -> dict:
    """Kernel name -> the sizes each of its calls in ``program`` passes (a list of dicts; a
    shape-generic kernel's), for :func:`tier0_kernels`."""
    sizes: dict = {}
    for c in program["calls"]:
        if c.get("scalars"):
            sizes.setdefault(c["kernel"], []).append(c["scalars"])
    return sizes


def _short(op: str) -> str:
    return op.split(".")[-1].replace("_nchwc", "") or "group"


def tier0_kernels(groups: list, weights: Optional[dict] = None, split: bool = False,
                  sizes: Optional[dict] = None) -> tuple:
    """The tier-0 compile jobs of ``groups`` ((kernel name, group Function) pairs) and, per
    group name, ``(tier-0 kernel name, sizes)``: groups that compute the same share one job.
    ``weights``: kernel name -> positions of constant parameters (:func:`constant_params`).
    ``split`` (a static program's groups): an anchor and its epilogue become two kernels, a
    :class:`~.tier0_split.Split` in place of the pair (:mod:`.tier0_split`), and an
    elementwise group or epilogue runs over its collapsed shapes, a
    :class:`~.tier0_collapse.Viewed` in place of the pair (:mod:`.tier0_collapse`).
    ``sizes`` (with ``split``): kernel name -> the sizes its calls pass (a list, one dict per
    call): a shape-generic tier-1 group is bound to each call's and made generic again the
    tier-0 way (each dim its own size, a slice's bounds too, collapsed), its choice a
    :class:`~.tier0_split.PerCall` where its calls' differ."""
    jobs: dict = {}
    chosen: dict = {}

    def job(fn: Function, weights: frozenset) -> tuple:
        f0, sizes = _tier0_function(fn, weights)
        text = astext(f0)
        name = f"tier0_{_short(group_anchor(f0))}_{hashlib.sha256(text.encode()).hexdigest()[:16]}"
        if name not in jobs:
            jobs[name] = (name, f"tier0\n{name}\n{text}", make_tier0_kernel, f0, TIER0_OPT)
        return name, dict(sizes)

    def viewed(fn: Function, weights: frozenset) -> tuple:
        """(name, sizes, shapes): over its collapsed shapes where it collapses (shapes None
        where not)."""
        c = collapse(fn) if split else None
        return (*job(fn, weights), None) if c is None else (*job(c[0], frozenset()), c[1])

    def steps(fn: Function, w: frozenset) -> Optional[Steps]:
        found = op_steps(fn) if split else None
        if found is None:
            return None
        out = []
        for f, refs, anchor in found[0]:
            # (an anchor's weights keep their window and blocks, as a group's do)
            ws = frozenset(k for k, r in enumerate(refs[:-1]) if r[0] == "p" and r[1] in w) if anchor else frozenset()
            name, sizes, shapes = viewed(f, ws)
            shapes = shapes or tuple(tuple(p.type.shape) for p in f.params) + (tuple(f.body.type.shape),)
            out.append((name, sizes, refs, shapes, anchor))
        return Steps(tuple(out), found[1])

    def choice(fn: Function, w: frozenset):
        apart = steps(fn, w)
        if apart is not None:
            return apart
        parts = split_group(fn) if split else None
        if parts is None:
            name, sizes, shapes = viewed(fn, w)
            return (name, sizes) if shapes is None else Viewed(name, sizes, shapes)
        fa, pa, fe, pe = parts
        aname, asizes, ashapes = viewed(fa, frozenset(pa.index(i) for i in w if i in pa))
        ename, esizes, eshapes = viewed(fe, frozenset())
        return Split((aname, asizes, pa, ashapes), (ename, esizes, pe, eshapes), fa.body.type)

    for g, fn in groups:
        w = (weights or {}).get(g, frozenset())
        calls = {sizes_key(s): s for s in (sizes or {}).get(g, ())} if split else {}
        if len(calls) > PER_CALL_MAX:
            calls = {}
        bound = {k: specialize_group(fn, s, attrs=True) for k, s in calls.items()}
        if not bound or None in bound.values():
            chosen[g] = choice(fn, w)
            continue
        each = tuple((k, choice(b, w)) for k, b in bound.items())
        chosen[g] = each[0][1] if len(each) == 1 else PerCall(each)
    return list(jobs.values()), chosen


def kernel_names(choice) -> tuple:
    """The tier-0 kernels a group's choice (of :func:`tier0_kernels`) runs."""
    return choice.names if isinstance(choice, (Split, PerCall, Steps)) else (choice.name,) if isinstance(choice, Viewed) \
        else (choice[0],)


def remap_program(program: dict, chosen: dict) -> dict:
    """A copy of ``program`` whose calls of the kernels in ``chosen`` (tier-1 kernel name ->
    (tier-0 kernel name, sizes), a :class:`~.tier0_split.Split`, a :class:`~.tier0_ops.Steps`
    or a :class:`~.tier0_collapse.Viewed`) call those instead, with their sizes; subgraph
    programs too."""
    splits = {g: c for g, c in chosen.items() if isinstance(c, (Split, Viewed, PerCall, Steps))}
    if splits:
        program = split_calls(program, splits)
    out = dict(program)
    calls = []
    for c in program["calls"]:
        this = choice_of(chosen, c) if "tier0_of" not in c else None
        if this is not None and not isinstance(this, (Split, Viewed, Steps)):
            name, sizes = this
            c = dict(c, kernel=name, tier0_of=c["kernel"])  # (what the profiler names it by)
            if sizes:
                c["scalars"] = {**c.get("scalars", {}), **sizes}
        calls.append(c)
    out["calls"] = calls
    if program.get("functions"):
        out["functions"] = [remap_program(f, chosen) for f in program["functions"]]
    return out
