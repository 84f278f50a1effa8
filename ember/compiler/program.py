"""A fused graph module -> the program an Executable runs: slots, kernel calls, the memory
plan, the checks of symbolic shapes, binds of data sizes, and control flow (a subgraph's
function becomes a program of its own, run by an ``if`` between phases).

The program is data (JSON); its format is documented in :mod:`ember.runtime.executable`.
"""
from __future__ import annotations

import hashlib
from typing import Any, Optional, Sequence

import numpy as np

from ..codegen.llvm.metadata import dim_to_json
from ..errors import LoweringError, ShapeError
from ..graph.cost import function_dot, function_flops, function_ops
from ..graph.ir import Call, Constant, Function, Module, Tuple, TupleGetItem, Var
from ..graph.ops import dims as D
from ..graph.ops.control import CONTROL_OPS
from ..graph.printer import astext
from ..graph.types import Dim, TensorType, TupleType
from ..graph.visit import post_order
from ..loop import dtype as dt
from ..runtime.memory_plan import Interval, plan_memory
from ..runtime.shapes import shape_symbols, symbols_of
from .generic import enabled as generic_enabled
from .generic import mode as generic_mode
from .records import tuned_schedule
from .generic import generalize
from .group import group_anchor

_RELABEL = ("reshape", "squeeze", "unsqueeze", "flatten")


def is_relabel(fn: Function) -> bool:
    """A group that only gives its input a new shape (or reads its bits as another type of
    their width): a view of the same bytes, no kernel."""
    b = fn.body
    if isinstance(b, Call) and b.op == "bitcast":  # (the bytes read as another type of their width)
        return len(fn.params) == 1 and b.args == (fn.params[0],)
    return (isinstance(b, Call) and b.op in _RELABEL and len(fn.params) == 1 and b.args == (fn.params[0],)
            and b.type.dtype == fn.params[0].type.dtype)


def is_bind(fn: Function) -> bool:
    """A group that only declares data sizes (``bind_size``): no kernel, a bind in the program."""
    b = fn.body
    return isinstance(b, Call) and b.op == "bind_size" and b.args == tuple(fn.params)


def is_control(fn: Function) -> bool:
    """A group that runs subgraph functions (``if``, ``loop``, ``scan``): no kernel, a control
    step in the program."""
    b = fn.body
    return isinstance(b, Call) and b.op in CONTROL_OPS and all(a in fn.params for a in b.args)


def is_concat(fn: Function) -> bool:
    """A group that only concatenates its parameters, each once, in order."""
    b = fn.body
    return isinstance(b, Call) and b.op == "concat" and b.args == tuple(fn.params)


def needs_kernel(fn: Function) -> bool:
    return not (is_relabel(fn) or is_bind(fn) or is_control(fn))


def nbytes(t: TensorType):
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


def _tensor_types(t) -> list:
    return list(t.fields) if isinstance(t, TupleType) else [t]


class Shared:
    """What every program of one executable shares: the constants and the kernels (one per
    distinct group function, across the model and its subgraphs)."""

    def __init__(self):
        self.constants: list = []
        self.kernel_of: dict = {}  # group Function -> kernel name
        self.groups: list = []  # (kernel name, Function)

    def kernel(self, fn: Function, name: str) -> str:
        if fn not in self.kernel_of:
            taken = {g for g, _ in self.groups}
            k, base = 0, name
            while name in taken:
                k += 1
                name = f"{base}_{k}"
            self.kernel_of[fn] = name
            self.groups.append((name, fn))
        return self.kernel_of[fn]


class _Slots:
    """The slot table and the call list of one program, built while walking its function."""

    def __init__(self, shared: Shared):
        self.shared = shared
        self.slots: list = []
        self.types: list = []  # the graph type of each slot
        self.calls: list = []
        self.const_slot: dict = {}

    def slot(self, kind: str, t: TensorType, **extra) -> int:
        self.slots.append({"kind": kind, "shape": [dim_json(d) for d in t.shape], "dtype": t.dtype, **extra})
        self.types.append(t)
        return len(self.slots) - 1

    def constant(self, c: Constant) -> int:
        if c not in self.const_slot:
            self.shared.constants.append(np.asarray(c.value))
            self.const_slot[c] = self.slot("const", c.type, index=len(self.shared.constants) - 1)
        return self.const_slot[c]


def _generalize(fn: Function):
    """``generalize(fn)``; in the folding program each dim its own size first (``apart``: a
    square weight's kernel then serves every weight, not only square ones)."""
    return (generic_mode() == "all" and generalize(fn, apart=True)) or generalize(fn)


def make_program(mod: Module, shared: Shared, output_names: Optional[Sequence[str]] = None,
                 assumptions: Optional[dict] = None, subs: Optional[dict] = None, prefix: str = "",
                 check_memory=None) -> dict:
    """The program of ``mod``'s ``main`` (made by ``fuse_ops``). Its kernels are registered in
    ``shared`` (named with ``prefix``); ``subs`` maps the names of subgraph functions an ``if``
    runs to ``(fused module, assumptions)``, which become programs of their own
    (``program["functions"]``). ``check_memory(slots, values, arena_bytes, outputs)`` checks
    a static program's memory against the compile's limit."""
    main = mod.main
    prog = _Slots(shared)
    inputs = []
    slot_of: dict = {}  # graph node -> slot id or tuple of slot ids
    for p in main.params:
        if not isinstance(p.type, TensorType):
            raise ShapeError(f"input {p.name} must be a tensor, got {p.type}")
        s = prog.slot("input", p.type, name=p.name)
        slot_of[p] = s
        inputs.append({"name": p.name, "shape": prog.slots[s]["shape"], "dtype": p.type.dtype, "slot": s})
    symbols = _input_symbols(main)
    sizes_of: dict = {}  # group -> the sizes its shape-generic kernel takes
    # a group goes generic where that makes it share a kernel with another group (a generic
    # kernel is a little slower: sizes in registers, not folded into the index arithmetic),
    # or everywhere in the folding program ("all": its kernels serve every model)
    generic = {fn: _generalize(fn) for _, fn in mod.functions if generic_enabled() and fn is not main}
    shared_by: dict = {}
    for g in generic.values():
        if g is not None:
            shared_by[g[0]] = shared_by.get(g[0], 0) + 1

    def register(fn: Function, gname: str) -> str:
        g = generic.get(fn) if fn in generic else (_generalize(fn) if generic_enabled() else None)
        if g is None or tuned_schedule(fn) is not None or (shared_by.get(g[0], 0) < 2 and generic_mode() != "all"):
            return shared.kernel(fn, prefix + gname)
        sizes_of[fn] = g[1]
        if generic_mode() == "all":
            # (the folding program's kernels are named by what they compute, like tier 0's, so
            # the cached object of one model's fold serves every model's: a name of its own
            # would key it apart)
            gname = f"{gname.rstrip('_0123456789')}_{hashlib.sha256(astext(g[0]).encode()).hexdigest()[:12]}"
        return shared.kernel(g[0], prefix + gname)
    kernel_of = {fn: register(fn, gname) for gname, fn in mod.functions
                 if gname != "main" and needs_kernel(fn) and not is_concat(fn)}
    # concats whose parts the producers write straight into their place (static programs)
    in_place = _InPlaceConcat(prog, out_exprs=main.body.fields if isinstance(main.body, Tuple) else [main.body]) \
        if not symbols and not any(is_bind(f) or is_control(f) for _, f in mod.functions) else None
    functions: list = []  # the subgraph programs
    function_index: dict = {}
    controls: list = []
    out_exprs = list(main.body.fields) if isinstance(main.body, Tuple) else [main.body]
    produced_at: dict = {}
    binds: list = []  # data sizes: {after: call, symbol, slot, index or axis}
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
                src = prog.slots[args[0]]
                base = src.get("base", args[0])
                extra = {"offset": src["offset"]} if src["kind"] == "view" and "offset" in src else {}
                slot_of[n] = prog.slot("view", n.type, base=base, **extra)
                continue
            if is_bind(fn):  # the sizes are read from the value once its producer has run
                slot_of[n] = args[0]
                base = prog.slots[args[0]].get("base", args[0])
                for i, d in enumerate(fn.body.attr("symbols")):
                    binds.append({"after": produced_at.get(base, -1), "symbol": d.expr.name, "slot": args[0],
                                  "index": i})
                continue
            if is_concat(fn):
                if in_place is not None:
                    out = in_place.try_place(n, fn.body.attr("axis"), args, produced_at)
                    if out is not None:
                        slot_of[n] = out
                        continue
                if fn not in kernel_of:
                    kernel_of[fn] = register(fn, n.op)
            if is_control(fn):
                args = [args[list(fn.params).index(a)] for a in fn.body.args]  # (the group dedups them)
                slot_of[n] = _control(fn.body, n, args, prog, subs or {}, shared, functions, function_index,
                                      controls, binds, produced_at, prefix)
                continue
            outs = tuple(prog.slot("arena", t) for t in _tensor_types(n.type))
            slot_of[n] = outs if isinstance(n.type, TupleType) else outs[0]
            all_args = args + list(outs)
            moved = 0
            for a in dict.fromkeys(all_args):
                moved = D.dim_add(moved, nbytes(prog.types[a]))
            # what the profiler reports: the source nodes, the ops, the work and the traffic
            prog.calls.append({"kernel": kernel_of[fn], "args": all_args, "group": n.op,
                               "nodes": "+".join(n.span) or n.op, "ops": function_ops(fn),
                               "anchor": group_anchor(fn),
                               "flops": dim_json(function_flops(fn)), "bytes": dim_json(moved)})
            if function_dot(fn):  # (its speed is measured against that instruction's peak)
                prog.calls[-1]["dot"] = function_dot(fn)
            if fn in sizes_of:
                prog.calls[-1]["scalars"] = dict(sizes_of[fn])
            for o in outs:
                produced_at[o] = len(prog.calls) - 1
        elif isinstance(n, TupleGetItem):
            slot_of[n] = slot_of[n.tuple][n.index]
        elif isinstance(n, Tuple) and n is not main.body:
            raise LoweringError("tuples inside the model body are not supported")
    # a kernel writes a model output straight into the caller's new array; outputs it does not
    # write (an input, a constant, a view, a repeat, a subgraph's result) are copied at the end
    outputs = []
    names = list(output_names or [])
    for k, e in enumerate(out_exprs):
        s = slot_of[e]
        direct = prog.slots[s]["kind"] == "arena"
        if direct:
            prog.slots[s]["kind"] = "output"
        outputs.append({"name": names[k] if k < len(names) else f"output_{k}", "shape": prog.slots[s]["shape"],
                        "dtype": e.type.dtype, "slot": s, "copy": not direct})

    if in_place is not None and in_place.placed:
        _views_after_bases(prog, inputs, outputs, produced_at)

    # memory plan over the arena slots
    last_use: dict = {}
    for i, c in enumerate(prog.calls):
        for a in c["args"]:
            last_use[prog.slots[a].get("base", a)] = i  # a view keeps its base alive
    for c in controls:  # a subgraph's arguments live until it has run
        for a in c["args"] + ([c["cond"]] if "cond" in c else []):
            b = prog.slots[a].get("base", a)
            last_use[b] = max(last_use.get(b, -1), c["after"])
    # outputs are copied after the last call: a view's base (a squeeze of an intermediate) must
    # not share its bytes with a value made after it
    for o in outputs:
        if o["copy"]:
            b = prog.slots[o["slot"]].get("base", o["slot"])
            last_use[b] = max(last_use.get(b, -1), len(prog.calls) - 1)
    values = []
    for s, info in enumerate(prog.slots):
        if info["kind"] == "arena":
            live = (produced_at[s], max(last_use.get(s, produced_at[s]), produced_at[s]))
            info["live"] = list(live)
            values.append(Interval(s, nbytes(prog.types[s]), *live))
    _value_binds(prog, inputs, binds)
    symbols += [b["symbol"] for b in binds if b["symbol"] not in symbols]
    for s, info in enumerate(prog.slots):
        unknown = shape_symbols(info["shape"]) - set(symbols)
        if unknown:
            raise ShapeError(f"a value of type {prog.types[s]} depends on {', '.join(sorted(unknown))}, which "
                             f"no input's shape gives")
    checks = _checks(assumptions or {}, symbols)
    if symbols or controls:  # the memory plan is made per run, for the sizes the run binds
        arena_bytes = total_bytes = None
        if check_memory is not None:
            check_memory(prog, [], 0, [])
    else:
        plan = plan_memory(values)
        for s, off in plan.offsets.items():
            prog.slots[s]["offset"] = off
        arena_bytes, total_bytes = plan.arena_bytes, plan.total_bytes
        if check_memory is not None:
            check_memory(prog, values, plan.arena_bytes, outputs)
    program = {"inputs": inputs, "outputs": outputs, "slots": prog.slots, "calls": prog.calls,
               "arena_bytes": arena_bytes, "intermediate_bytes": total_bytes}
    if symbols:
        program["symbols"] = symbols
        program["checks"] = checks
    if binds:
        program["binds"] = binds
    if controls:
        program["controls"] = controls
        program["functions"] = functions
    return program


class _InPlaceConcat:
    """Concatenation without a copy: where every axis before the concat's is 1, its parts lie
    one after another in its bytes, so each part's producer can write its value in place --
    the part becomes a view of the concat at a byte offset, and the concat is no call at all
    (SqueezeNet's fire modules, Inception's branches, DenseNet's growing blocks, where one
    concat's result is itself a part of the next). A part qualifies when a kernel of this
    program wrote it into the arena (not an input, constant, view or model output) and no
    earlier concat took it; the concat's result must be an arena value too."""

    def __init__(self, prog: _Slots, out_exprs):
        self.prog = prog
        self.outputs = set(out_exprs)
        self.taken: set = set()
        self.placed = 0

    def try_place(self, n: Call, axis: int, args: list, produced_at: dict) -> Optional[int]:
        """The slot of concat call ``n`` (along ``axis``, of parts in slots ``args``) with its
        parts made views of it, or None where it must copy."""
        prog, t = self.prog, n.type
        if n in self.outputs or not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
            return None
        if any(d != 1 for d in t.shape[:axis % t.ndim]) or len(set(args)) != len(args):
            return None
        for a, node in zip(args, n.args):
            s = prog.slots[a]
            if s["kind"] != "arena" or a not in produced_at or a in self.taken or node in self.outputs \
                    or not all(isinstance(d, int) for d in prog.types[a].shape):
                return None
        out = prog.slot("arena", t)
        offset = 0
        for a in args:
            for k, s in enumerate(prog.slots):  # views of the part (reshapes, an earlier concat's parts)
                if s["kind"] == "view" and s.get("base") == a:
                    s["base"], s["offset"] = out, s.get("offset", 0) + offset
            prog.slots[a] = {**prog.slots[a], "kind": "view", "base": out, "offset": offset}
            offset += nbytes(prog.types[a])
            self.taken.add(a)
        produced_at[out] = min(produced_at[a] for a in args)
        self.placed += 1
        return out


def _views_after_bases(prog: _Slots, inputs: list, outputs: list, produced_at: dict) -> None:
    """Renumber the slots so that every view comes after its base (in-place concats made
    views of slots made later), updating every reference to a slot."""
    order = [k for k, s in enumerate(prog.slots) if s["kind"] != "view"] + \
            [k for k, s in enumerate(prog.slots) if s["kind"] == "view"]
    new = {old: i for i, old in enumerate(order)}
    prog.slots = [prog.slots[k] for k in order]
    prog.types = [prog.types[k] for k in order]
    for s in prog.slots:
        if "base" in s:
            s["base"] = new[s["base"]]
    for c in prog.calls:
        c["args"] = [new[a] for a in c["args"]]
    for e in inputs + outputs:
        e["slot"] = new[e["slot"]]
    moved = {new[k]: v for k, v in produced_at.items()}
    produced_at.clear()
    produced_at.update(moved)


def _value_binds(prog: _Slots, inputs: list, binds: list) -> None:
    """Binds, before the run, of the data sizes that are elements of a model input's value
    (``?x#3``: :func:`ember.graph.ops.dims.value_source`)."""
    bound = {b["symbol"] for b in binds}
    by_name = {i["name"]: i["slot"] for i in inputs}
    seen = set()
    for s in prog.slots:
        for sym in sorted(shape_symbols(s["shape"])):
            src = D.value_source(sym)
            if src is None or sym in bound or sym in seen or src[0] not in by_name:
                continue
            seen.add(sym)
            binds.append({"after": -1, "symbol": sym, "slot": by_name[src[0]], "index": src[1]})


def _control(call: Call, n: Call, args: list, prog: _Slots, subs: dict, shared: Shared, functions: list,
             function_index: dict, controls: list, binds: list, produced_at: dict, prefix: str):
    """A control step (``if``, ``loop``, ``scan``) after the last call so far: the programs of its
    subgraphs, its results in ``value`` slots (set when it runs), and binds of its results'
    data sizes."""
    def program_of(name: str) -> int:
        if name not in function_index:
            if name not in subs:
                raise LoweringError(f"if: no compiled subgraph {name!r}")
            sub_mod, sub_assumed = subs[name]
            functions.append(make_program(sub_mod, shared, None, sub_assumed, subs, prefix=f"{name}_"))
            function_index[name] = len(functions) - 1
        return function_index[name]

    after = len(prog.calls) - 1
    outs = [prog.slot("value", t) for t in _tensor_types(n.type)]
    step = {"after": after, "kind": call.op, "outs": outs, "nodes": "+".join(n.span) or call.op}
    if call.op == "if":
        step.update({"cond": args[0], "then": program_of(call.attr("then")), "n_then": call.attr("n_then"),
                     "args": args[1:]})
        if call.attr("else"):
            step["else"] = program_of(call.attr("else"))
        else:  # no else branch: taking it is an error
            step.update({"else": -1, "else_error": call.attr("else_error") or "no branch for this condition"})
    else:  # loop, scan: the body's program, the arguments, and how they split
        step.update({"body": program_of(call.attr("body")), "args": args})
        keys = (("has_trip", "has_cond", "n_carried", "n_scan") if call.op == "loop" else
                ("n_states", "n_scan_in", "in_axes", "in_dirs", "out_axes", "out_dirs"))
        for key in keys:
            v = call.attr(key)
            step[key] = list(v) if isinstance(v, tuple) else v
    controls.append(step)
    for s, t in zip(outs, _tensor_types(n.type)):
        for axis, d in enumerate(t.shape):
            if isinstance(d, Dim) and d.is_symbol and D.is_data_symbol(d.expr.name) and \
                    not any(b["symbol"] == d.expr.name for b in binds):
                binds.append({"after": after, "symbol": d.expr.name, "slot": s, "axis": axis})
    return tuple(outs) if isinstance(n.type, TupleType) else outs[0]


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




__all__ = ["Shared", "dim_json", "is_bind", "is_control", "is_relabel", "make_program", "nbytes", "needs_kernel"]
