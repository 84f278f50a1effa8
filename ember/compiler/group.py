"""A fused group (a module function made by ``fuse_ops``) -> one scheduled tensor computation.

Every parameter becomes a placeholder; every call runs its op's registered compute; the
function's result (a tensor, or a tuple of tensors for a multi-output op) is the kernel's
output(s). Scheduling follows the group's shape:

- the *anchor* (at most one call whose pattern is out-elementwise-fusable, reduction or opaque)
  keeps its own stages; every stage of the other calls is inlined into its consumer, so an
  elementwise chain or an injective group becomes a single loop nest;
- the anchor's op schedule (``set_schedule(op, "llvm", fn)``) gets ``fn(s, anchor, out,
  target)`` with ``out`` the group's output, which is ``anchor`` or an elementwise epilogue of
  the same shape that the schedule computes in the anchor's write-back;
- a stage its compute marks a ``table`` (``attrs["table"]``) stays at the root, computed once;
- without an op schedule a generic one applies: injective inner stages are inlined,
  reductions stay at the root with their outer loop parallel, and the output is vectorized
  and parallel (:func:`schedule_root`).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ..errors import LoweringError, ShapeError, UnsupportedOpError
from ..graph.ir import Call, Constant, Function, Tuple, TupleGetItem, Var
from ..graph.ops import get_op
from ..graph.ops.compute.common import te_shape
from ..graph.ops.registry import Pattern
from ..graph.types import TensorType
from ..graph.visit import post_order
from ..kernels.elementwise import schedule_root
from ..kernels.gpu import schedule_gpu_root
from ..loop import compute as te
from ..loop.schedule import Schedule
from ..target import as_target

ANCHORS = (Pattern.OUT_ELEMWISE_FUSABLE, Pattern.REDUCTION, Pattern.OPAQUE)


@dataclasses.dataclass
class GroupKernel:
    """A group's schedule and kernel arguments (its inputs, then its outputs), or the loop
    program an op's kernel hook wrote (``func``; then no schedule)."""

    name: str
    schedule: Optional[Schedule]
    inputs: list
    outputs: list
    anchor: Optional[str]  # the anchor op's name, if any
    func: Optional[object] = None  # a PrimFunc
    # kernels of the same group for the calls whose sizes meet a condition, tried in order
    # before this one: ((condition on the size parameters, GroupKernel), ...)
    variants: tuple = ()
    # the group compiled for its likely sizes (:mod:`.twin`), for the calls at those sizes:
    # (condition on the size parameters, GroupKernel), tried before the variants
    twin: Optional[tuple] = None

    @property
    def source(self):
        """What ``ember.driver.build`` takes: ``(schedule, args, name)``, or the PrimFunc."""
        if self.func is None and not self.variants and self.twin is None:
            return (self.schedule, self.inputs + self.outputs, self.name)
        return self.lowered()

    def lowered(self):
        """The kernel's PrimFunc (before the loop passes): the schedule lowered, and with
        variants or a static twin one function that branches on its sizes to their loops."""
        if self.func is not None:
            return self.func
        from ..loop.lower import lower
        from ..loop.stmt import IfThenElse, PrimFunc

        f = lower(self.schedule, self.inputs + self.outputs, self.name)
        body = f.body
        for cond, k in reversed(self.variants):
            v = k.lowered()
            if v.params != f.params:  # (the same group: the same parameters, or no variant)
                continue
            body = IfThenElse(cond, v.body, body)
        if self.twin is not None:
            # the twin's buffers are the parameters' under their names, with static shapes:
            # its loads index with constant strides (the code generator binds buffers by name)
            cond, k = self.twin
            body = IfThenElse(cond, k.lowered().body, body)
        return PrimFunc(f.name, f.params, body, f.attrs)


def _te_shape(t: TensorType, what: str) -> tuple:
    """A parameter's shape for ``te.placeholder``: ints, and the expressions of symbolic dims
    (their symbols become the kernel's size parameters)."""
    if not isinstance(t, TensorType):
        raise ShapeError(f"{what} must be a tensor, got {t}")
    return te_shape(t)


def _new_stages(result, known: set) -> list:
    """The compute stages ``result`` reaches that are not already known (one call's stages)."""
    outs = result if isinstance(result, (tuple, list)) else [result]
    found, stack = [], list(outs)
    seen = set()
    while stack:
        t = stack.pop()
        if t in seen or t in known or not isinstance(t.op, te.ComputeOp):
            continue
        seen.add(t)
        found.append(t)
        stack.extend(t.op.input_tensors())
    return found


def compute_group(fn: Function, name: str):
    """Placeholders, outputs, the stages of each call, and the anchor call of ``fn``."""
    env: dict = {}
    inputs = []
    for i, p in enumerate(fn.params):
        t = te.placeholder(_te_shape(p.type, f"parameter {p.name} of {name}"), p.type.dtype, f"p{i}")
        env[p] = t
        inputs.append(t)
    known: set = set(inputs)
    stages_of: dict = {}
    anchors = []
    for n in post_order(fn.body):
        if isinstance(n, Var):
            continue
        if isinstance(n, Constant):
            raise LoweringError(f"{name}: constants must be parameters of a fused group")
        if isinstance(n, Call):
            op = get_op(n.op)
            if op.compute is None:
                raise UnsupportedOpError(f"{n.op} has no compute yet (in {name})")
            args = [env[a] for a in n.args]
            result = op.compute(dict(n.attrs), args, n.type)
            if isinstance(result, list):
                result = tuple(result)
            stages_of[n] = _new_stages(result, known)
            known.update(stages_of[n])
            env[n] = result
            if op.pattern in ANCHORS:
                anchors.append(n)
        elif isinstance(n, TupleGetItem):
            env[n] = env[n.tuple][n.index]
        elif isinstance(n, Tuple):
            env[n] = tuple(env[f] for f in n.fields)
    if len(anchors) > 1:
        raise LoweringError(f"{name}: a fused group has at most one anchor op, got "
                            f"{', '.join(a.op for a in anchors)}")
    result = env[fn.body]
    outputs = list(result) if isinstance(result, tuple) else [result]
    return inputs, outputs, stages_of, (anchors[0] if anchors else None), env


def group_anchor(fn: Function) -> str:
    """What a fused group is, in one op name: its anchor op (``nn.conv2d``), else its last op."""
    calls = [n for n in post_order(fn.body) if isinstance(n, Call)]
    anchors = [c.op for c in calls if get_op(c.op).pattern in ANCHORS]
    return anchors[0] if anchors else (calls[-1].op if calls else "")


def _copy(t: te.Tensor, name: str) -> te.Tensor:
    return te.compute(tuple(s.value for s in t.shape), lambda *i: t[i], name)


def own_outputs(outputs: list) -> list:
    """A group's outputs, each a stage of its own written once: inputs and repeats copied."""
    fixed: list = []
    for i, t in enumerate(outputs):
        if not isinstance(t.op, te.ComputeOp) or t in fixed:
            t = _copy(t, f"out{i}")
        fixed.append(t)
    return fixed


def _materialized(t: te.Tensor) -> bool:
    """Whether ``t``'s compute marked it ``materialize``: an intermediate result (a resize's
    pass over one axis) kept at the root and scheduled like an output."""
    return bool(t.op.attrs.get("materialize"))


def _inlinable(t: te.Tensor) -> bool:
    """An injective stage is inlined into its readers -- unless its compute marked it a
    ``table`` (a few values per output index along one axis, like resize's taps) or it is
    :func:`_materialized`: computing it once at the root is what it is for."""
    return not t.op.reduce_axis and not t.op.attrs.get("table") and not _materialized(t)


def lower_group(fn: Function, name: str, target, tuned: Optional[tuple] = None,
                likely: Optional[dict] = None, twin_tuned: Optional[tuple] = None) -> GroupKernel:
    """Compute and schedule the fused group ``fn`` as kernel ``name``: by its default
    schedule, or by ``tuned`` = (decisions JSON, trace JSON), a tuning record's schedule (its
    computes made under its decisions, then its trace replayed; a trace of None: the default
    schedule under those decisions). A record that no longer replays (Ember's computes
    changed since it was measured) gives the default schedule. ``likely``: symbolic sizes' likely
    values (:func:`group_likely`), which the default schedule's heuristics choose for; a group
    over symbolic sizes that all have one also gets its static twin (:mod:`.twin`), scheduled
    by ``twin_tuned`` where a tuning record of the static workload gives one."""
    from ..kernels.common import likely_sizes
    from .twin import specialize_group, twin_condition

    with likely_sizes(likely):
        k = _lower_group_tuned(fn, name, target, tuned)
    # (a loop program an op's kernel hook wrote names its buffers itself: no twin for it)
    static = specialize_group(fn, likely) if likely and k.func is None else None
    if static is not None:
        k.twin = (twin_condition(likely), _lower_group_tuned(static, name, target, twin_tuned))
    return k


def _lower_group_tuned(fn: Function, name: str, target, tuned: Optional[tuple]) -> GroupKernel:
    if tuned is not None:
        import json
        import warnings

        from ..errors import EmberError
        from ..loop.schedule import Trace
        from ..loop.knobs import decisions

        try:
            with decisions(json.loads(tuned[0])):
                k = _lower_group(fn, name, target, schedule=tuned[1] is None)
            if tuned[1] is not None:
                Trace.from_json(tuned[1]).apply(k.schedule)
            k.variants = _variants(fn, name, target, k.schedule)
            return k
        except (EmberError, ValueError, KeyError, TypeError, IndexError) as e:
            warnings.warn(f"{name}: its tuning record does not apply ({e}); the default schedule is used",
                          stacklevel=2)
    return _lower_group(fn, name, target)


def group_likely(fn: Function, likely: Optional[dict]) -> Optional[dict]:
    """The likely values (of ``likely``, symbol name -> int) of the symbols in ``fn``'s
    parameter shapes, or None where it has none: what its kernel's schedule is made for."""
    if not likely:
        return None
    names = {n for p in fn.params for d in getattr(p.type, "shape", ()) or () if not isinstance(d, int)
             for n in d.symbols}
    got = {k: likely[k] for k in sorted(names) if k in likely}
    return got or None


def _params_in_order(func, args: tuple, params: list):
    """A kernel hook's loop program, whose first buffers are its op's arguments ``args`` in
    turn, taking the group's ``params`` instead (each argument's buffer that of its parameter)."""
    from ..loop.stmt import Buffer
    from ..loop.visit import rewrite as loop_rewrite

    bufs = func.buffers
    index = [next(k for k, p in enumerate(params) if p is a) for a in args]
    own = {k: dataclasses.replace(bufs[i], name=f"p{k}") for i, k in reversed(list(enumerate(index)))}
    mapping = {bufs[i]: own[k] for i, k in enumerate(index)}
    body = loop_rewrite(func.body, lambda n: mapping.get(n) if isinstance(n, Buffer) else None)
    rest = tuple(p for p in func.params if not any(p is b for b in bufs[:len(args)]))
    return dataclasses.replace(func, params=tuple(own[k] for k in range(len(params))) + rest, body=body)


def _lower_group(fn: Function, name: str, target, schedule: bool = True, variants: bool = True) -> GroupKernel:
    """The group's computes and (with ``schedule``) its default schedule; else a fresh one."""
    b = fn.body
    if isinstance(b, Call) and get_op(b.op).kernel is not None:  # a loop program written directly
        kind = as_target(target).kind
        if get_op(b.op).kernel_kind != kind:
            raise UnsupportedOpError(f"{name}: {b.op}'s kernel is a loop program for the "
                                     f"{get_op(b.op).kernel_kind!r} kind; it has none for {kind!r} yet")
        if not all(any(a is p for p in fn.params) for a in b.args):
            raise LoweringError(f"{name}: {b.op} must be alone in its group")
        func = get_op(b.op).kernel(dict(get_op(b.op).check_attrs(b.attrs)), [a.type for a in b.args],
                                   b.type, name)
        if b.args != tuple(fn.params):  # (an argument given twice -- an LSTM's zero h and c -- is one parameter)
            func = _params_in_order(func, b.args, fn.params)
        return GroupKernel(name, None, [], [], b.op, func)
    inputs, outputs, stages_of, anchor, env = compute_group(fn, name)
    outputs = own_outputs(outputs)
    s = Schedule(outputs)
    if not schedule:
        return GroupKernel(name, s, inputs, outputs, anchor.op if anchor is not None else None)
    out_set = set(outputs)
    anchor_stages = set(stages_of.get(anchor, ())) if anchor is not None else set()
    for call, stages in stages_of.items():
        if call is anchor:
            continue
        for t in stages:
            if t not in out_set and _inlinable(t):
                s[t].compute_inline()
    anchor_t = env[anchor] if anchor is not None else None
    sched = get_op(anchor.op).schedule.get(as_target(target).kind) if anchor is not None else None
    found: tuple = ()
    if (sched is not None and isinstance(anchor_t, te.Tensor) and len(outputs) == 1
            and tuple(outputs[0].shape) == tuple(anchor_t.shape)):
        sched(s, anchor_t, outputs[0], target)
        for st in list(s.stages):
            if not st.is_placeholder and st.attach[0] == "root" and _materialized(st.tensor):
                _root(s, st.tensor, target)
        found = _variants(fn, name, target, s) if variants else ()
    else:
        for t in anchor_stages:
            if t not in out_set and _inlinable(t):
                s[t].compute_inline()
        for st in list(s.stages):
            if st.is_placeholder or st.attach[0] == "inline":
                continue
            if st.tensor in anchor_stages or st.tensor in out_set or _materialized(st.tensor):
                _root(s, st.tensor, target)
    return GroupKernel(name, s, inputs, outputs, anchor.op if anchor is not None else None,
                       variants=found)


def _root(s: Schedule, t: te.Tensor, target) -> None:
    """The generic schedule of a root stage on ``target``'s kind: the CPU's (vectorized,
    parallel), or the GPU's (blocks of threads)."""
    if as_target(target).kind == "cuda":
        if s[t].attach[0] == "root":  # (a stage computed at another's loop runs in its thread)
            schedule_gpu_root(s, t)
    else:
        schedule_root(s, t)


def _variants(fn: Function, name: str, target, s: Schedule) -> tuple:
    """The group's kernels for the sizes its kernel ``s`` serves badly (a product over a
    symbolic row count called with fewer rows than its block; a dilated conv over a symbolic
    plane no larger than its dilation, all taps but the center in padding), each the group
    lowered under the default decisions but those that suit these sizes."""
    from ..kernels.conv_center import center_tap_variant
    from ..kernels.matmul import few_rows_variant
    from ..loop.knobs import decisions

    stages = [st.tensor for st in s.stages if not st.is_placeholder]
    found = next((v for rule in (few_rows_variant, center_tap_variant) for v in map(rule, stages) if v is not None),
                 None)
    if found is None:
        return ()
    cond, chosen = found
    with decisions(chosen):
        k = _lower_group(fn, name, target, variants=False)
    return ((cond, k),)


def make_group_kernel(payload: tuple, name: str, target) -> tuple:
    """A compile job's maker (``ember.codegen.llvm.build_made``): the fused group of
    ``payload`` = (group, tuned, likely, twin_tuned), as :func:`lower_group` makes it, lowered
    -> (PrimFunc, stats: seconds to ``schedule`` and ``lower``, the loop nest, the trace)."""
    import time

    from ..loop.visit import loop_nest

    t0 = time.perf_counter()
    group, tuned, likely, twin_tuned = payload
    k = lower_group(group, name, target, tuned, likely, twin_tuned)
    t1 = time.perf_counter()
    func = k.lowered()
    return func, dict(schedule=t1 - t0, lower=time.perf_counter() - t1, **loop_nest(func),
                      trace=k.schedule.trace.text() if k.func is None else "(a loop program written directly)")


__all__ = ["GroupKernel", "compute_group", "group_anchor", "lower_group", "make_group_kernel", "own_outputs"]
