"""Schedules: *how* a tensor computation runs, as a trace of primitive calls.

    s = Schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 32)
    s[C].parallel(io)
    s[C].vectorize(ji)

Each primitive checks its preconditions and raises :class:`ScheduleError` naming the stage, the
loop and the reason. Every call is recorded in ``s.trace`` (primitive, stage, loop names and
decisions such as split factors); :meth:`Trace.apply` replays it on a fresh schedule of the same
computation, which is what the tuner searches and the database stores.

Primitives act on a stage's loop structure (leaf loops derived from its axes by splits and
fuses, their order and kinds, where the stage is computed); :func:`ember.loop.lower` turns
the result into a loop program.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Optional, Sequence, Union

from ..errors import ScheduleError
from .compute import ComputeOp, IterVar, PlaceholderOp, Reduce, Tensor, TensorLoad, topo_order
from .expr import IntImm, Var, as_expr
from .stmt import THREAD_KINDS
from .visit import rewrite, walk



@dataclasses.dataclass(frozen=True)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: Optional[int]
    nparts: Optional[int]


@dataclasses.dataclass(frozen=True)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One recorded primitive call: names, not objects, so it can be stored and replayed."""

    primitive: str
    stage: str
    args: tuple
    kwargs: tuple = ()

    def to_json(self) -> list:
        return [self.primitive, self.stage, list(self.args), dict(self.kwargs)]

    def __str__(self) -> str:
        """``conv.split('oc', 8)``: the call as one reads it."""
        args = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{self.stage}.{self.primitive}({', '.join(args)})"

    @staticmethod
    def from_json(item) -> "Instruction":
        p, st, args, kw = item
        return Instruction(p, st, tuple(args), tuple(sorted(kw.items())))


class Trace(list):
    """The primitive calls that made a schedule, in order."""

    def to_json(self) -> str:
        return json.dumps([i.to_json() for i in self])

    def text(self) -> str:
        """One primitive call per line."""
        return "\n".join(str(i) for i in self)

    @staticmethod
    def from_json(text: str) -> "Trace":
        return Trace(Instruction.from_json(x) for x in json.loads(text))

    def apply(self, sch: "Schedule") -> "Schedule":
        """Replay these calls on ``sch`` (a fresh schedule of the same computation)."""
        for ins in self:
            kwargs = dict(ins.kwargs)
            if ins.primitive in ("cache_read", "cache_write"):
                tensor = sch.tensor(ins.args[0])
                if ins.primitive == "cache_read":
                    sch.cache_read(tensor, ins.args[1], [sch.tensor(r) for r in ins.args[2]])
                else:
                    sch.cache_write(tensor, ins.args[1])
                continue
            stage = sch.stage(ins.stage)
            if ins.primitive == "compute_at":  # its loop belongs to the parent stage
                parent = sch.stage(ins.args[0][1:])
                stage.compute_at(parent, parent.loop(ins.args[1]))
                continue
            args = [stage.loop(a) if isinstance(a, str) else a for a in ins.args]
            getattr(stage, ins.primitive)(*args, **kwargs)
        return sch


class Stage:
    """The schedule of one operation: its loops, their order and kinds, and where it runs."""

    def __init__(self, sch: "Schedule", op, body=None):
        self.sch = sch
        self.op = op
        self.name = op.name
        self.tensor = op.output()
        self.is_placeholder = isinstance(op, PlaceholderOp)
        self.body = None if self.is_placeholder else (body if body is not None else op.body)
        self.axis = () if self.is_placeholder else tuple(op.axis)
        self.reduce_axis = self.body.axis if isinstance(self.body, Reduce) else ()
        self.leaf: list[IterVar] = list(self.axis) + list(self.reduce_axis)
        self.relations: list = []
        self.kinds: dict[IterVar, str] = {}
        self.attach: tuple = ("root",)
        self.scope = "global"
        self.is_output = False

    # -- helpers --------------------------------------------------------------------------
    def __repr__(self):
        return f"Stage({self.name})"

    def loop(self, ref: Union[str, IterVar]) -> IterVar:
        """The leaf loop called ``ref`` (or ``ref`` itself), else a ScheduleError listing them."""
        if isinstance(ref, IterVar):
            if ref in self.leaf:
                return ref
            name = ref.name
        else:
            name = ref
        for iv in self.leaf:
            if iv.name == name:
                return iv
        loops = ", ".join(iv.name for iv in self.leaf) or "none"
        raise ScheduleError(f"stage {self.name}: {name!r} is not one of its loops ({loops})")

    def _record(self, primitive: str, *args, **kwargs):
        enc = [a.name if isinstance(a, IterVar) else f"@{a.name}" if isinstance(a, Stage) else a
               for a in args]
        self.sch.trace.append(Instruction(primitive, self.name, tuple(enc), tuple(sorted(kwargs.items()))))

    def _fresh(self, name: str, extent, kind: str) -> IterVar:
        taken = {iv.name for iv in self.leaf} | {iv.name for iv in self.axis + self.reduce_axis}
        for r in self.relations:
            taken |= {iv.name for iv in dataclasses.astuple(r) if isinstance(iv, IterVar)}
        base, k = name, 1
        while name in taken:
            name, k = f"{base}{k}", k + 1
        return IterVar(Var(name), as_expr(extent), kind)

    def _check_not_attach_point(self, what: str, iv: IterVar):
        kids = [st.name for st in self.sch.stages if st.attach[0] == "at" and st.attach[2] is iv]
        if kids:
            raise ScheduleError(f"{what} of {self.name}.{iv.name}: stages {kids} are computed at this "
                                f"loop; transform the loop before compute_at")

    def _check_mutable(self, what: str):
        if self.is_placeholder:
            raise ScheduleError(f"{what}: {self.name} is an input placeholder; it has no loops")
        if self.attach[0] == "inline":
            raise ScheduleError(f"{what}: stage {self.name} was inlined; it has no loops any more")

    # -- loop transformations -------------------------------------------------------------
    def split(self, axis, factor: Optional[int] = None, nparts: Optional[int] = None):
        """Split ``axis`` into (outer, inner) with ``inner`` of ``factor`` iterations (or
        ``outer`` of ``nparts``). A factor that does not divide the extent leaves a tail,
        guarded by a predicate (which the simplifier drops where it can prove it true)."""
        self._check_mutable("split")
        iv = self.loop(axis)
        self._check_not_attach_point("split", iv)
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split of {self.name}.{iv.name}: give exactly one of factor, nparts")
        amount = factor if factor is not None else nparts
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            raise ScheduleError(f"split of {self.name}.{iv.name}: factor/nparts must be a positive "
                                f"int, got {amount!r}")
        if factor is not None:
            outer_ext, inner_ext = (iv.extent + (factor - 1)) // factor, factor
        else:
            outer_ext, inner_ext = nparts, (iv.extent + (nparts - 1)) // nparts
        outer = self._fresh(f"{iv.name}_o", _fold(outer_ext), iv.kind)
        inner = self._fresh(f"{iv.name}_i", _fold(inner_ext), iv.kind)
        self.relations.append(Split(iv, outer, inner, factor, nparts))
        pos = self.leaf.index(iv)
        self.leaf[pos:pos + 1] = [outer, inner]
        self.kinds.pop(iv, None)
        self._record("split", iv, **({"factor": factor} if factor is not None else {"nparts": nparts}))
        return outer, inner

    def fuse(self, *axes) -> IterVar:
        """Fuse consecutive loops (outermost first) into one."""
        self._check_mutable("fuse")
        ivs = [self.loop(a) for a in axes]
        if len(ivs) < 2:
            raise ScheduleError(f"fuse on {self.name}: needs at least two loops")
        pos = [self.leaf.index(iv) for iv in ivs]
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise ScheduleError(f"fuse on {self.name}: loops {[iv.name for iv in ivs]} are not "
                                f"adjacent in order outer->inner (order: {[iv.name for iv in self.leaf]})")
        for iv in ivs:
            self._check_not_attach_point("fuse", iv)
        kinds = {iv.kind for iv in ivs}
        if len(kinds) > 1:
            raise ScheduleError(f"fuse on {self.name}: cannot fuse a reduction loop with a spatial loop "
                                f"({[iv.name for iv in ivs]})")
        self._record("fuse", *ivs)
        fused = ivs[0]
        for nxt in ivs[1:]:
            new = self._fresh(f"{fused.name}_{nxt.name}", _fold(fused.extent * nxt.extent), nxt.kind)
            self.relations.append(Fuse(fused, nxt, new))
            i = self.leaf.index(fused)
            self.leaf[i:i + 2] = [new]
            fused = new
        return fused

    def reorder(self, *axes):
        """Put the given loops in this order (the positions they occupy are kept)."""
        self._check_mutable("reorder")
        ivs = [self.loop(a) for a in axes]
        if len(set(ivs)) != len(ivs):
            raise ScheduleError(f"reorder on {self.name}: a loop is named twice ({[iv.name for iv in ivs]})")
        pos = sorted(self.leaf.index(iv) for iv in ivs)
        for p, iv in zip(pos, ivs):
            self.leaf[p] = iv
        self._record("reorder", *ivs)

    def tile(self, x, y, x_factor: int, y_factor: int):
        """Split ``x`` and ``y`` and order the result ``xo, yo, xi, yi``."""
        xo, xi = self.split(x, factor=x_factor)
        yo, yi = self.split(y, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    # -- loop kinds -----------------------------------------------------------------------
    def _annotate(self, axis, kind: str):
        self._check_mutable(kind)
        iv = self.loop(axis)
        if (kind in ("parallel", "vectorized") or kind in THREAD_KINDS) and iv.kind == "reduce":
            what = {"parallel": "parallelize", "vectorized": "vectorize"}.get(kind, f"bind to {kind}")
            raise ScheduleError(
                f"cannot {what} {self.name}.{iv.name}: it is a reduction loop, and its iterations all "
                f"update the same outputs (a race/carried dependence); {what} a spatial loop instead")
        # a stage computed at a consumer's loop runs the region that loop needs, whose extents
        # bound inference knows only when lowering (a conv's columns over a symbolic length
        # are a block of 16 there): the lowering passes check those
        bounded_later = self.attach[0] == "at"
        if kind in ("vectorized", "unrolled") and not isinstance(_fold(iv.extent), IntImm) and not bounded_later:
            raise ScheduleError(f"cannot make {self.name}.{iv.name} {kind}: its extent {iv.extent} is not "
                                f"a constant (split it by a constant factor first)")
        if kind == "vectorized" and isinstance(_fold(iv.extent), IntImm) and _fold(iv.extent).value > 64 \
                and not bounded_later:
            raise ScheduleError(f"cannot vectorize {self.name}.{iv.name}: extent {iv.extent} is over 64 "
                                f"lanes; split it by the vector width first")
        if self.kinds.get(iv, "serial") != "serial":
            raise ScheduleError(f"{self.name}.{iv.name} is already {self.kinds[iv]}")
        if kind in THREAD_KINDS and kind in self.kinds.values():
            raise ScheduleError(f"{self.name}: a loop is already bound to {kind}")
        self.kinds[iv] = kind
        if kind in THREAD_KINDS:
            self._record("bind", iv, thread=kind)
        else:
            self._record({"parallel": "parallel", "vectorized": "vectorize", "unrolled": "unroll"}[kind], iv)

    def parallel(self, axis):
        """Run iterations of ``axis`` on all cores (a spatial loop only)."""
        self._annotate(axis, "parallel")

    def bind(self, axis, thread: str):
        """Run the iterations of ``axis`` (a spatial loop) on a GPU's blocks or threads, all at
        once: ``thread`` is ``block_x``/``_y``/``_z`` (``blockIdx``) or ``thread_x``/``_y``/``_z``
        (``threadIdx``)."""
        if thread not in THREAD_KINDS:
            raise ScheduleError(f"{self.name}: cannot bind to {thread!r}; choose one of {', '.join(THREAD_KINDS)}")
        self._annotate(axis, thread)

    def vectorize(self, axis):
        """Run ``axis`` (constant extent, spatial) as SIMD lanes."""
        self._annotate(axis, "vectorized")

    def unroll(self, axis):
        """Replicate the body of ``axis`` (constant extent) with no loop left."""
        self._annotate(axis, "unrolled")

    # -- where the stage is computed -------------------------------------------------------
    def compute_inline(self):
        """Substitute this elementwise stage's expression into its consumers (no buffer)."""
        if self.is_placeholder:
            raise ScheduleError(f"compute_inline: {self.name} is an input placeholder")
        if isinstance(self.body, Reduce):
            raise ScheduleError(f"compute_inline: {self.name} is a reduction; only elementwise stages "
                                f"can be inlined (use compute_at)")
        if self.is_output:
            raise ScheduleError(f"compute_inline: {self.name} is an output of the schedule")
        if self.relations or self.kinds:
            raise ScheduleError(f"compute_inline: {self.name} already has loop transformations")
        self.attach = ("inline",)
        self._record("compute_inline")

    def compute_at(self, parent: "Stage", axis):
        """Compute the part of this stage that ``parent`` needs inside its loop ``axis``."""
        self._check_mutable("compute_at")
        if self.is_output:
            raise ScheduleError(f"compute_at: {self.name} is an output of the schedule")
        iv = parent.loop(axis)
        consumers = self.sch.readers(self)
        bad = [c.name for c in consumers if not _inside(c, parent)]
        if bad or not consumers:
            raise ScheduleError(
                f"compute_at: {self.name} is read by {[c.name for c in consumers]}; it can only be "
                f"computed at a loop of {parent.name} if every reader runs inside {parent.name} "
                f"(readers outside: {bad})")
        if parent.attach[0] == "inline":
            raise ScheduleError(f"compute_at: target {parent.name} was inlined")
        self.attach = ("at", parent, iv)
        self._record("compute_at", parent, iv)


def _inside(stage: "Stage", parent: "Stage") -> bool:
    """``stage`` is ``parent`` or is computed (transitively) at one of its loops."""
    while True:
        if stage is parent:
            return True
        if stage.attach[0] != "at":
            return False
        stage = stage.attach[1]


def _fold(e):
    from .arith import simplify

    return simplify(as_expr(e))


class Schedule:
    """The schedule of a computation: one :class:`Stage` per operation, and its trace."""

    def __init__(self, outputs: Union[Tensor, Sequence[Tensor]]):
        self.outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
        self.stages: list[Stage] = []
        self.trace = Trace()
        for op in topo_order(self.outputs):
            st = Stage(self, op)
            # (two ops of one name -- a bias add and a residual add -- get distinct stage
            # names: a trace names its stages, and must replay on the same ones)
            st.name = self._unique(st.name)
            self.stages.append(st)
        for t in self.outputs:
            if isinstance(t.op, PlaceholderOp):
                raise ScheduleError(f"output {t.name} is an input placeholder")
            self[t].is_output = True

    def __getitem__(self, tensor: Tensor) -> Stage:
        for st in self.stages:
            if st.tensor == tensor:
                return st
        raise ScheduleError(f"tensor {tensor.name} is not part of this schedule")

    def stage(self, name: str) -> Stage:
        for st in self.stages:
            if st.name == name:
                return st
        raise ScheduleError(f"no stage named {name!r} (stages: {[s.name for s in self.stages]})")

    def tensor(self, name: str) -> Tensor:
        return self.stage(name).tensor

    def consumers(self, stage: Stage) -> list:
        out = []
        for st in self.stages:
            if st.body is not None and any(isinstance(n, TensorLoad) and n.tensor == stage.tensor
                                           for n in walk(st.body)):
                out.append(st)
        return out

    def readers(self, stage: Stage) -> list:
        """The stages that read ``stage`` where it is computed: its consumers, with an inlined
        consumer replaced by the stages that read it (it has no loops of its own)."""
        out = []
        for c in self.consumers(stage):
            for r in (self.readers(c) if c.attach[0] == "inline" else [c]):
                if r not in out:
                    out.append(r)
        return out

    def _unique(self, name: str) -> str:
        names = {s.name for s in self.stages}
        base, k = name, 1
        while name in names:
            name, k = f"{base}{k}", k + 1
        return name

    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Tensor]) -> Tensor:
        """Copy ``tensor`` into a ``scope`` buffer that ``readers`` read instead."""
        src = self[tensor]
        name = self._unique(f"{tensor.name}_{scope}")
        op = ComputeOp(name, tuple(IterVar(Var(f"ax{k}"), e) for k, e in enumerate(tensor.shape)),
                       TensorLoad(tensor, ()), "cache_read")
        op.body = TensorLoad(tensor, tuple(iv.var for iv in op.axis))
        new = Stage(self, op)
        new.scope = scope
        reader_stages = [self[r] for r in readers]
        for rs in reader_stages:
            if tensor not in [n.tensor for n in walk(rs.body) if isinstance(n, TensorLoad)]:
                raise ScheduleError(f"cache_read: {rs.name} does not read {tensor.name}")
            rs.body = _retarget(rs.body, tensor, op.output())
        pos = max(self.stages.index(src), -1) + 1
        self.stages.insert(pos, new)
        self.trace.append(Instruction("cache_read", src.name, (tensor.name, scope,
                                                               [r.name for r in readers])))
        return op.output()

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into a ``scope`` buffer first, then copy it out once.

        Typical use: the local stage accumulates a register block (``compute_at`` the
        output's tile loop) and the output stage writes it back once."""
        st = self[tensor]
        st._check_mutable("cache_write")
        if st.relations or st.kinds or st.attach[0] != "root":
            raise ScheduleError(f"cache_write: schedule {tensor.name} only after cache_write")
        name = self._unique(f"{tensor.name}_{scope}")
        axis = tuple(IterVar(Var(iv.name), iv.extent) for iv in st.axis)
        body = st.body
        # (it computes what ``tensor`` did: its attrs, what the lowering reads of it, go with it)
        op = ComputeOp(name, axis, rewrite(body, lambda n: None), "cache_write", tensor.op.attrs)
        new = Stage(self, op)
        new.scope = scope
        st.body = TensorLoad(op.output(), tuple(iv.var for iv in st.axis))
        st.reduce_axis = ()
        st.leaf = list(st.axis)
        self.stages.insert(self.stages.index(st), new)
        self.trace.append(Instruction("cache_write", st.name, (tensor.name, scope)))
        return op.output()


def _retarget(body, old: Tensor, new: Tensor):
    return rewrite(body, lambda n: TensorLoad(new, n.indices)
                   if isinstance(n, TensorLoad) and n.tensor == old else None)


def create_schedule(outputs) -> Schedule:
    return Schedule(outputs)
