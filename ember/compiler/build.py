"""Fused graph module -> Executable: one kernel per distinct fused group, a program of calls,
constants as read-only arrays, and a static memory plan for the intermediates."""
from __future__ import annotations

import time
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import LoweringError, ShapeError
from ..graph.cost import function_flops, function_ops
from ..graph.ir import Call, Constant, Function, Module, Tuple, TupleGetItem, Var
from ..graph.ops import dims as D
from ..graph.types import Dim, TensorType, TupleType
from ..graph.visit import post_order
from ..loop import dtype as dt
from ..codegen.llvm.metadata import dim_to_json
from ..runtime.executable import Executable
from ..runtime.shapes import symbols_of
from ..driver import index_lookup, index_store, source_digest
from .group import group_anchor, lower_group
from ..runtime.memory_plan import Interval, plan_memory


_RELABEL = ("reshape", "squeeze", "unsqueeze", "flatten")


def is_relabel(fn: Function) -> bool:
    """A group that only gives its input a new shape: a view of the same bytes, no kernel."""
    b = fn.body
    return (isinstance(b, Call) and b.op in _RELABEL and len(fn.params) == 1 and b.args == (fn.params[0],)
            and b.type.dtype == fn.params[0].type.dtype)


def _nbytes(t: TensorType):
    """Bytes of a value of type ``t`` (a symbolic dim when its shape is symbolic)."""
    n = dt.nbytes(t.dtype)
    for d in t.shape:
        n = D.dim_mul(n, d)  # Python ints: a huge shape must not wrap around
    return n


def dim_json(d) -> Any:
    """A dim as the runtime's JSON dimension (:mod:`ember.runtime.shapes`)."""
    if isinstance(d, int):
        return d
    out = dim_to_json(d.expr)
    if out is None:
        raise LoweringError(f"the dimension {d} cannot be evaluated by the runtime")
    return out


def is_bind(fn: Function) -> bool:
    """A group that only declares data sizes (``bind_size``): no kernel, a bind in the program."""
    b = fn.body
    return isinstance(b, Call) and b.op == "bind_size" and b.args == tuple(fn.params)


def _tensor_types(t) -> list:
    return list(t.fields) if isinstance(t, TupleType) else [t]


class _Program:
    """Builds the slot table and the call list while walking ``main``."""

    def __init__(self):
        self.slots: list = []
        self.types: list = []  # the graph type of each slot
        self.calls: list = []
        self.constants: list = []
        self.const_slot: dict = {}

    def slot(self, kind: str, t: TensorType, **extra) -> int:
        self.slots.append({"kind": kind, "shape": [dim_json(d) for d in t.shape], "dtype": t.dtype, **extra})
        self.types.append(t)
        return len(self.slots) - 1

    def constant(self, c: Constant) -> int:
        if c not in self.const_slot:
            self.constants.append(np.asarray(c.value))
            self.const_slot[c] = self.slot("const", c.type, index=len(self.constants) - 1)
        return self.const_slot[c]


def build_executable(mod: Module, target, output_names: Optional[Sequence[str]] = None,
                     name: str = "model", timings: Optional[dict] = None,
                     stats: Optional[dict] = None, assumptions: Optional[dict] = None) -> Executable:
    """Compile every fused group of ``mod`` (made by ``fuse_ops``) and lay out the program.

    ``timings`` gets seconds per phase; ``stats`` per kernel (see ``ember.driver.build``, plus
    ``schedule``: the group's computes and schedule). ``assumptions``: what the shape rules
    assumed of the symbolic dims (``ember.graph.ops.dims.collect_assumptions``); the program
    checks them when a run binds the symbols."""
    from ..driver import build

    main = mod.main
    prog = _Program()
    inputs = []
    slot_of: dict = {}  # graph node -> slot id or tuple of slot ids
    for p in main.params:
        if not isinstance(p.type, TensorType):
            raise ShapeError(f"input {p.name} must be a tensor, got {p.type}")
        s = prog.slot("input", p.type, name=p.name)
        slot_of[p] = s
        inputs.append({"name": p.name, "shape": prog.slots[s]["shape"], "dtype": p.type.dtype, "slot": s})
    symbols = _input_symbols(main)

    # kernels: one per distinct group function (identical groups share one)
    kernel_of: dict = {}
    groups = []
    for gname, fn in mod.functions:
        if gname != "main" and fn not in kernel_of and not is_relabel(fn) and not is_bind(fn):
            kernel_of[fn] = gname
            groups.append((gname, fn))
    # the program: calls in dataflow order, values in fresh slots
    out_exprs = list(main.body.fields) if isinstance(main.body, Tuple) else [main.body]
    produced_at: dict = {}
    binds: list = []  # data sizes: {after: call, symbol, slot, index}
    for n in post_order(main.body):
        if isinstance(n, Var):
            continue
        if isinstance(n, Constant):
            slot_of[n] = prog.constant(n)
        elif isinstance(n, Call):
            fn = mod.get(n.op)
            if fn is None or n.op == "main":
                raise LoweringError(f"{n.op} in main is not a fused group (run fuse_ops before building)")
            args = [slot_of[a] for a in n.args]
            if any(isinstance(a, tuple) for a in args):
                raise LoweringError(f"{n.op}: tuple-valued arguments are not supported")
            if is_relabel(fn):
                base = prog.slots[args[0]].get("base", args[0])
                slot_of[n] = prog.slot("view", n.type, base=base)
                continue
            if is_bind(fn):  # the sizes are read from the value once its producer has run
                slot_of[n] = args[0]
                base = prog.slots[args[0]].get("base", args[0])
                for i, d in enumerate(fn.body.attr("symbols")):
                    binds.append({"after": produced_at.get(base, -1), "symbol": d.expr.name, "slot": args[0],
                                  "index": i})
                continue
            outs = tuple(prog.slot("arena", t) for t in _tensor_types(n.type))
            slot_of[n] = outs if isinstance(n.type, TupleType) else outs[0]
            all_args = args + list(outs)
            moved = 0
            for a in dict.fromkeys(all_args):
                moved = D.dim_add(moved, _nbytes(prog.types[a]))
            # what the profiler reports: the source nodes, the ops, the work and the traffic
            prog.calls.append({"kernel": kernel_of[fn], "args": all_args, "group": n.op,
                               "nodes": "+".join(n.span) or n.op, "ops": function_ops(fn),
                               "anchor": group_anchor(fn),
                               "flops": dim_json(function_flops(fn)), "bytes": dim_json(moved)})
            for o in outs:
                produced_at[o] = len(prog.calls) - 1
        elif isinstance(n, TupleGetItem):
            slot_of[n] = slot_of[n.tuple][n.index]
        elif isinstance(n, Tuple) and n is not main.body:
            raise LoweringError("tuples inside the model body are not supported")
    # a kernel writes a model output straight into the caller's new array; outputs it does not
    # write (an input, a constant, a view, a repeat) are copied at the end of a run
    outputs = []
    names = list(output_names or [])
    for k, e in enumerate(out_exprs):
        s = slot_of[e]
        direct = prog.slots[s]["kind"] == "arena"
        if direct:
            prog.slots[s]["kind"] = "output"
        outputs.append({"name": names[k] if k < len(names) else f"output_{k}", "shape": prog.slots[s]["shape"],
                        "dtype": e.type.dtype, "slot": s, "copy": not direct})

    # memory plan over the arena slots
    last_use: dict = {}
    for i, c in enumerate(prog.calls):
        for a in c["args"]:
            last_use[prog.slots[a].get("base", a)] = i  # a view keeps its base alive
    values = []
    for s, info in enumerate(prog.slots):
        if info["kind"] == "arena":
            live = (produced_at[s], last_use.get(s, produced_at[s]))
            info["live"] = list(live)
            values.append(Interval(s, _nbytes(prog.types[s]), *live))
    symbols += [b["symbol"] for b in binds if b["symbol"] not in symbols]
    for s, info in enumerate(prog.slots):
        unknown = set(symbols_of(info["shape"], set())) - set(symbols)
        if unknown:
            raise ShapeError(f"a value of type {prog.types[s]} depends on {', '.join(sorted(unknown))}, which "
                             f"no input's shape gives")
    checks = _checks(assumptions or {}, symbols)
    if symbols:  # the memory plan is made per run, for the sizes the run binds
        arena_bytes = total_bytes = None
        _check_memory(prog, [], 0, [], name)
    else:
        plan = plan_memory(values)
        for s, off in plan.offsets.items():
            prog.slots[s]["offset"] = off
        arena_bytes, total_bytes = plan.arena_bytes, plan.total_bytes
        _check_memory(prog, values, plan.arena_bytes, outputs, name)

    # kernels (after the checks: no lowering for a model that cannot run); a warm compile finds
    # the library by the groups alone: no computes, schedules or lowering
    t0 = time.perf_counter()
    key = groups_key(groups, target) if groups else None
    cached = index_lookup(key) if key else None
    kernels = []
    if cached is None:
        for gname, fn in groups:
            t = time.perf_counter()
            kernels.append(lower_group(fn, gname, target))
            if stats is not None:
                stats[gname] = {"schedule": time.perf_counter() - t}
    elif stats is not None:
        stats.update({gname: {"cached": True} for gname, _ in groups})
    t1 = time.perf_counter()

    if cached is not None:
        from ..runtime.module import Module as KernelModule

        module = KernelModule(cached)
    elif kernels:
        module = build([k.source for k in kernels], name=name, target=target, stats=stats)
        index_store(key, module.path)
    else:
        module = None
    t2 = time.perf_counter()
    if timings is not None:
        timings["lower groups"] = t1 - t0
        timings["codegen"] = t2 - t1
    program = {"inputs": inputs, "outputs": outputs, "slots": prog.slots, "calls": prog.calls,
               "arena_bytes": arena_bytes, "intermediate_bytes": total_bytes}
    if symbols:
        program["symbols"] = symbols
        program["checks"] = checks
    if binds:
        program["binds"] = binds
    exe = Executable(module, program, prog.constants)
    # what a profiler needs to rebuild the kernels differently (loop instrumentation); after a
    # warm compile they are scheduled only when asked for
    if kernels:
        exe.kernel_sources = [_source(k) for k in kernels]
    else:
        exe.kernel_sources_thunk = lambda: [_source(lower_group(fn, g, target)) for g, fn in groups]
    exe.target = target
    return exe


def _source(k) -> tuple:
    """``(schedule or PrimFunc, args, name)``: what a profiler rebuilds a kernel from."""
    return (k.func, None, k.name) if k.func is not None else (k.schedule, k.inputs + k.outputs, k.name)


def _input_symbols(main: Function) -> list:
    """The symbols the inputs' shapes bind (a bare symbolic dim of an input), in input order."""
    out: list = []
    for p in main.params:
        for d in p.type.shape:
            if isinstance(d, Dim) and d.is_symbol and d.expr.name not in out:
                out.append(d.expr.name)
    return out


def _checks(assumptions: dict, symbols: list) -> list:
    """The assumptions over the program's symbols, as the runtime's conditions."""
    out = []
    for a in assumptions.values():
        cond = dim_to_json(a.cond)
        if cond is None or not symbols_of(cond, set()) <= set(symbols):
            raise ShapeError(f"the model's shapes assume {a.cond}, which the runtime cannot check ({a.why})")
        out.append({"cond": cond, "what": a.why})
    return out


def _ops(call: dict) -> str:
    ops = call["ops"]
    return ", ".join(ops) if isinstance(ops, (list, tuple)) else str(ops)


def _check_memory(prog: _Program, values: list, arena_bytes: int, outputs: list, name: str) -> None:
    """What the executable holds (its constants) and what one run adds (the arena of the
    intermediates and the outputs) against the compile's memory limit."""
    from ..graph.limits import check_bytes, format_bytes

    const_bytes = sum(int(c.nbytes) for c in prog.constants)
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


def groups_key(groups: list, target) -> str:
    """The cache key of a model's kernels: the printed group functions (types included, so
    shapes and dtypes), the target, and a digest of Ember's own sources -- the default
    schedules are a function of exactly these, so any change to Ember misses the cache."""
    import hashlib

    from ..graph.printer import astext

    h = hashlib.sha256(b"groups\0")
    for part in [source_digest(), target.triple, target.cpu, target.features, str(target.cores),
                 *(f"{g}\n{astext(fn)}" for g, fn in groups)]:
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


__all__ = ["build_executable"]
