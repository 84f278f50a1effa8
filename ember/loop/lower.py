"""Lowering: a scheduled tensor computation becomes a loop program (a PrimFunc).

For each stage, the leaf loops of its schedule become ``For`` loops; each original axis is
rebuilt from the leaves (a split axis is ``outer * factor + inner``, a fused one is taken apart
with ``//`` and ``%``); a split that leaves a tail guards the store with a predicate. A
reduction gets an init nest over the spatial loops inside its first reduction loop, then the
update nest. A stage computed at a consumer's loop gets a buffer just large enough for the
region the consumer reads inside that loop (found by bound analysis), allocated there.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..errors import LoweringError
from . import dtype as dt
from .arith import Param, bounds, can_prove, simplify
from .compute import IterVar, Reduce, Tensor, TensorLoad, combine
from .expr import Expr, IntImm, Load, Max, Min, Var, as_expr, logical_and
from .schedule import Schedule, Split, Stage
from .stmt import Allocate, Buffer, For, IfThenElse, PrimFunc, Store, seq
from .visit import expr_children, free_vars, rewrite, substitute, walk

SIZE_MAX = 1 << 40  # a symbolic size lies in [1, SIZE_MAX] (ember.runtime.layout.SYMBOL_MAX)


class _Names:
    def __init__(self, reserved=()):
        self.used = set(reserved)

    def fresh(self, name: str) -> str:
        base, k = name, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name


class _Lowerer:
    def __init__(self, sch: Schedule, args: Sequence[Tensor]):
        self.sch = sch
        self.args = list(args)
        self.names = _Names()
        self.buffers: dict[Stage, Buffer] = {}
        self.region_min: dict[Stage, list] = {}
        self.children: dict[Stage, dict] = {}
        for st in sch.stages:
            if st.attach[0] == "at":
                _, parent, iv = st.attach
                self.children.setdefault(parent, {}).setdefault(iv, []).append(st)
        for t in self.args:
            st = sch[t]
            # arguments only promise natural alignment, so any numpy array can be passed
            self.buffers[st] = Buffer(self.names.fresh(t.name), t.shape, t.dtype,
                                      align=dt.nbytes(t.dtype))
            self.region_min[st] = [IntImm(0)] * len(t.shape)
        arg_ops = {id(t.op) for t in self.args}
        for st in sch.stages:
            if st.is_placeholder and id(st.op) not in arg_ops and sch.consumers(st):
                raise LoweringError(f"input {st.name} is read but not among the kernel's arguments "
                                    f"{[t.name for t in self.args]}")
            if st.is_output and id(st.op) not in arg_ops:
                raise LoweringError(f"output {st.name} is not among the kernel's arguments")

    # -- expressions ----------------------------------------------------------------------
    def to_loads(self, e: Expr) -> Expr:
        """Replace tensor reads by buffer loads (inlining inlined stages)."""
        def fn(n):
            if not isinstance(n, TensorLoad):
                return None
            st = self.sch[n.tensor]
            if st.attach[0] == "inline":
                body = substitute(st.body, {iv.var: i for iv, i in zip(st.axis, n.indices)})
                return self.to_loads(body)
            if st not in self.buffers:
                raise LoweringError(f"stage {st.name} is read before it is computed (is it computed "
                                    f"at a loop that does not enclose its consumer?)")
            mins = self.region_min[st]
            idx = tuple(simplify(i - m) if not (isinstance(m, IntImm) and m.value == 0) else i
                        for i, m in zip(n.indices, mins))
            return Load(self.buffers[st], idx)
        return rewrite(e, fn)

    # -- one stage ------------------------------------------------------------------------
    def _reads_in_bounds(self, body, ranges) -> bool:
        """Every load of ``body`` provably inside its buffer while ``ranges`` vary -- a load in
        an arm of a select where that arm's condition holds: the loop passes predicate such a
        load by it (:mod:`.passes.guard_loads`), so it never reads where the condition fails (a
        padded read, ``select(0 <= y < H, x[y], 0)``, over rows past a symbolic ``H``)."""
        from .expr import Not, Select

        body = self.to_loads(body.source if isinstance(body, Reduce) else body)
        sized = self.sized(ranges)

        def ok(e, given: tuple) -> bool:
            if isinstance(e, Select):
                return (ok(e.condition, given) and ok(e.true_value, given + (e.condition,))
                        and ok(e.false_value, given + (Not(e.condition),)))
            if isinstance(e, Load):
                for i, extent in zip(e.indices, e.buffer.shape):
                    if not (can_prove(i >= 0, sized, given) and can_prove(i < extent, sized, given)):
                        return False
            return all(ok(c, given) for c in expr_children(e))
        return ok(body, ())

    def stage_stmt(self, st: Stage, region: list, outer_ranges: Optional[dict] = None) -> object:
        """The loop nest computing ``st`` over ``region`` [(min, extent) per axis]; the loops
        enclosing it range over ``outer_ranges``."""
        outer_ranges = outer_ranges or {}
        ext: dict[IterVar, Expr] = {}
        for iv, (_, e) in zip(st.axis, region):
            ext[iv] = e
        for iv in st.reduce_axis:
            ext[iv] = iv.extent
        split_of, fused_into = {}, {}
        for rel in st.relations:
            if isinstance(rel, Split):
                p = ext[rel.parent]
                if rel.factor is not None:
                    ext[rel.outer], ext[rel.inner] = simplify((p + (rel.factor - 1)) // rel.factor), IntImm(rel.factor)
                else:
                    ext[rel.outer] = IntImm(rel.nparts)
                    ext[rel.inner] = simplify((p + (rel.nparts - 1)) // rel.nparts)
                split_of[rel.parent] = rel
            else:
                ext[rel.fused] = simplify(ext[rel.outer] * ext[rel.inner])
                fused_into[rel.outer] = rel
                fused_into[rel.inner] = rel
        var = {iv: Var(self.names.fresh(iv.name)) for iv in st.leaf}

        memo: dict[IterVar, Expr] = {}

        def value(iv: IterVar) -> Expr:
            if iv in memo:
                return memo[iv]
            if iv in var:
                v = var[iv]
            elif iv in split_of:
                rel = split_of[iv]
                v = value(rel.outer) * ext[rel.inner] + value(rel.inner)
            elif iv in fused_into:
                rel = fused_into[iv]
                f = value(rel.fused)
                v = f // ext[rel.inner] if iv is rel.outer else f % ext[rel.inner]
            else:
                raise LoweringError(f"stage {st.name}: loop {iv.name} is no longer reachable")
            memo[iv] = v
            return v

        # predicates: split tails, and the stage's true extent when it covers a region
        spatial_preds, reduce_preds = [], []
        leaf_ranges = {var[iv]: (IntImm(0), simplify(ext[iv] - 1)) for iv in st.leaf}
        for rel in st.relations:
            if isinstance(rel, Split):
                cond = value(rel.parent) < ext[rel.parent]
                if not can_prove(cond, self.sized(leaf_ranges)):
                    (reduce_preds if rel.parent.kind == "reduce" else spatial_preds).append(cond)
        glob, region_preds = [], []
        for d, (iv, (m, e)) in enumerate(zip(st.axis, region)):
            g = simplify(m + value(iv)) if not _is_zero(m) else value(iv)
            glob.append(g)
            if st.attach[0] == "at":
                full = st.tensor.shape[d]
                for cond in (g < full, g >= 0):
                    if not can_prove(cond, self.sized({**outer_ranges, **leaf_ranges})):
                        region_preds.append(cond)
        sub = {iv.var: g for iv, g in zip(st.axis, glob)}
        sub.update({iv.var: value(iv) for iv in st.reduce_axis})

        buf = self.buffers[st]
        local_idx = tuple(value(iv) for iv in st.axis)
        body = st.body
        # producers computed inside this stage: their regions come from this stage's reads
        kids = self.children.get(st, {})
        # plan the deepest producers first: a shallower one may be read by a deeper one
        planned = []  # (body, ranges) of producers already planned, in their own coordinates
        for iv in sorted(kids, key=st.leaf.index, reverse=True):
            inner = st.leaf[st.leaf.index(iv) + 1:]
            ranges = {var[l]: (IntImm(0), simplify(ext[l] - 1)) for l in inner}
            # siblings at one loop run in producer order, so plan consumers first
            for kid in reversed(kids[iv]):
                readers = [(substitute(body, sub), ranges)] + [(b, {**ranges, **r}) for b, r in planned]
                self.plan_region(kid, readers, st)
                planned.append(self.region_view(kid))

        # A region rounded up past the tensor's end computes a few extra elements into the
        # scratch buffer, which is harmless unless one of its reads would leave its buffer.
        all_ranges = {**outer_ranges, **leaf_ranges}
        # (a compute that says ``columns_past_end`` reads in bounds past its last column by
        # construction -- a window conv's columns clamped to the last -- which a proof over
        # run-time sizes misses: its weights' channels are its input's by an assumption the
        # shape rule made, not by their sizes)
        if region_preds and not (getattr(st.tensor.op, "attrs", {}).get("columns_past_end")
                                 or self._reads_in_bounds(substitute(body, sub), all_ranges)):
            spatial_preds += region_preds
        if isinstance(body, Reduce):
            src = self.to_loads(substitute(body.source, sub))
            cond = None if body.condition is None else self.to_loads(substitute(body.condition, sub))
            upd = Store(buf, combine(body.combiner, Load(buf, local_idx), src), local_idx)
            upd = _guard(upd, spatial_preds + reduce_preds + ([cond] if cond is not None else []))
            init = _guard(Store(buf, body.init, local_idx), spatial_preds)
        else:
            upd = _guard(Store(buf, self.to_loads(substitute(body, sub)), local_idx), spatial_preds)
            init = None

        first_red = next((k for k, iv in enumerate(st.leaf) if iv.kind == "reduce"), len(st.leaf))
        outer, inner = st.leaf[:first_red], st.leaf[first_red:]
        self._kid_ranges = {**outer_ranges, **leaf_ranges}
        stmt = self.nest(st, inner, upd, var, ext, kids)
        if init is not None:
            init_nest = init
            for iv in reversed([l for l in inner if l.kind == "spatial"]):
                init_nest = For(var[iv], IntImm(0), ext[iv], st.kinds.get(iv, "serial"), init_nest)
            stmt = seq(init_nest, stmt)
        return self.nest(st, outer, stmt, var, ext, kids)

    def nest(self, st, leaves, body, var, ext, kids):
        ranges = self._kid_ranges
        for iv in reversed(leaves):
            for kid in reversed(kids.get(iv, [])):
                body = Allocate(self.buffers[kid], seq(self.stage_stmt(kid, self.regions[kid], ranges), body))
            body = For(var[iv], IntImm(0), ext[iv], st.kinds.get(iv, "serial"), body)
        return body

    def region_view(self, st: Stage):
        """``st``'s body over its planned region, with fresh vars ranging over that region."""
        sub, ranges = {}, {}
        for iv, (lo, e) in zip(st.axis, self.regions[st]):
            t = Var(self.names.fresh(f"{iv.name}_r"))
            sub[iv.var] = lo + t
            ranges[t] = (IntImm(0), simplify(e - 1))
        for iv in st.reduce_axis:
            ranges[iv.var] = (IntImm(0), simplify(iv.extent - 1))
        body = st.body
        if isinstance(body, Reduce):  # reads happen in the source and the condition
            body = (body.source, body.condition)
        return substitute(body, sub), ranges

    def sized(self, ranges: dict) -> dict:
        """``ranges`` with the kernel's symbolic sizes in [1, SIZE_MAX] (what the runtime binds),
        so that index arithmetic over them can be proved in bounds."""
        if not self._size_vars():
            return ranges
        return {**size_ranges(self._size_vars()), **ranges}

    def _size_vars(self) -> set:
        """The kernel's symbolic sizes: the variables in its tensors' shapes."""
        if getattr(self, "_sizes", None) is None:
            self._sizes = {v for st in self.sch.stages for e in st.tensor.shape for v in walk(as_expr(e))
                           if isinstance(v, Var)}
        return self._sizes

    def plan_region(self, kid: Stage, readers: list, parent: Stage):
        """Bound the part of ``kid`` that ``readers`` [(body, ranges)] read while ranges vary."""
        accesses = []
        for consumer_body, ranges in readers:
            bodies, pending = [], [consumer_body]
            # reads through inlined stages count too, through chains of them
            while pending:
                b = pending.pop()
                bodies.append(b)
                for n in walk(b):
                    if isinstance(n, TensorLoad) and self.sch[n.tensor].attach[0] == "inline":
                        inl = self.sch[n.tensor]
                        pending.append(substitute(inl.body, {iv.var: i for iv, i in zip(inl.axis, n.indices)}))
            for b in bodies:
                accesses += [(m.indices, ranges) for m in walk(b)
                             if isinstance(m, TensorLoad) and m.tensor == kid.tensor]
        if not accesses:
            raise LoweringError(f"stage {kid.name} is computed at {parent.name} but not read there")
        region = []
        for d in range(len(kid.axis)):
            los, his = [], []
            for idx, ranges in accesses:
                lo, hi = bounds(idx[d], self.sized(ranges))
                los.append(lo)
                his.append(hi)
            lo = los[0] if len(set(los)) == 1 else simplify(_fold_minmax(Min, los))
            hi = his[0] if len(set(his)) == 1 else simplify(_fold_minmax(Max, his))
            extent = simplify(hi - lo + 1)
            if not isinstance(extent, IntImm) and not all(v in self._size_vars() for v in walk(extent)
                                                          if isinstance(v, Var)):
                raise LoweringError(
                    f"stage {kid.name} computed at {parent.name}: the region of axis {d} it must "
                    f"provide has a size that changes from iteration to iteration ({extent}); "
                    f"compute it at an outer loop")
            region.append((lo, extent))
        self.regions[kid] = region
        shape = tuple(e for _, e in region)
        # small scratch lives on the stack (no allocator call inside the loop it is computed
        # at); a size that depends on the kernel's symbolic sizes is allocated where it is used
        size = 1
        for e in shape:
            size = size * e.value if isinstance(e, IntImm) and size is not None else None
        small = size is None or size * dt.nbytes(kid.tensor.dtype) <= (128 << 10)  # a symbolic
        # size is local too: the code generator puts it on the stack when it is small at run time
        self.buffers[kid] = Buffer(self.names.fresh(kid.name), shape, kid.tensor.dtype,
                                   scope="shared" if kid.scope == "shared" else
                                   "local" if kid.scope == "local" or small else "global")
        self.region_min[kid] = [lo for lo, _ in region]

    # -- whole function -------------------------------------------------------------------
    def run(self, name: str, attrs) -> PrimFunc:
        self.regions: dict = {}
        stmts, allocs = [], []
        for st in self.sch.stages:
            if st.is_placeholder or st.attach[0] != "root":
                continue
            if st not in self.buffers:
                self.buffers[st] = Buffer(self.names.fresh(st.name), st.tensor.shape, st.tensor.dtype,
                                          scope=st.scope)
                self.region_min[st] = [IntImm(0)] * len(st.tensor.shape)
                allocs.append(self.buffers[st])
            region = [(IntImm(0), e) for e in st.tensor.shape]
            stmts.append(self.stage_stmt(st, region))
        body = seq(*stmts)
        for b in reversed(allocs):
            body = Allocate(b, body)
        params = [self.buffers[self.sch[t]] for t in self.args]
        scalars = []
        for b in params:
            for s in b.shape:
                for v in walk(s):
                    if isinstance(v, Var) and v not in scalars:
                        scalars.append(v)
        # a size the computation uses but no buffer's shape holds (a range from ``past`` to
        # ``past + seq`` writes seq elements): a parameter too, after those of the shapes
        scalars += sorted((v for v in free_vars(body) if v not in scalars), key=lambda v: v.name)
        return PrimFunc(name, tuple(params) + tuple(scalars), body, tuple(sorted((attrs or {}).items())))


def size_ranges(sizes) -> dict:
    """The ranges of a kernel's symbolic sizes: [1, SIZE_MAX], what the runtime binds, as
    parameters (bounded, never substituted); "?" names a size that may be 0
    (ember.graph.ops.dims.DATA_PREFIX): one computed while running, or an input's a model
    starts at 0 (a decoder's past)."""
    return {v: Param((0 if v.name.startswith("?") else 1, SIZE_MAX)) for v in sizes}


def _is_zero(e) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _fold_minmax(cls, xs):
    out = xs[0]
    for x in xs[1:]:
        out = cls(out, x)
    return out


def _guard(stmt, preds):
    preds = [p for p in preds if p is not None]
    return IfThenElse(logical_and(*preds), stmt) if preds else stmt


def lower(sch, args: Optional[Sequence[Tensor]] = None, name: str = "kernel",
          attrs: Optional[dict] = None) -> PrimFunc:
    """Lower a schedule (or output tensors, with the default naive schedule) to a PrimFunc.

    ``args`` are the tensors that become the kernel's buffer parameters, in order (default:
    the inputs in the order they are first used, then the outputs). Symbolic dimensions of
    their shapes become trailing scalar parameters."""
    if isinstance(sch, Tensor) or (isinstance(sch, (list, tuple)) and sch and isinstance(sch[0], Tensor)):
        sch = Schedule(sch)
    if args is None:
        args = [st.tensor for st in sch.stages if st.is_placeholder] + list(sch.outputs)
    low = _Lowerer(sch, args)
    return simplify(low.run(name, attrs), low.sized({}) or None)
