"""Operator fusion: partition ``main`` into groups that each become one kernel.

Groups grow in dataflow order by each op's fusion pattern:

- an *anchor* (conv, dense, matmul, pooling, softmax, layer norm: out-elementwise-fusable) starts a group that
  takes an elementwise epilogue: the elementwise and broadcast ops that follow it with the
  same output shape (bias, batch-norm shift, activation, residual add);
- elementwise, broadcast and injective ops (reshape, transpose, concat, ...) join the group
  of an operand that no other op reads, as long as that group has no anchor, so a chain of
  them is one loop nest; where an elementwise op's group has no anchor, the chains of its
  other operands that only it reads join too (the gates of an LSTM meet in one kernel);
- reductions start a group that takes an elementwise epilogue like an anchor, or anchor the
  elementwise chain before them that only they read (its prologue, computed as they read it);
  opaque ops and ops with several results stand alone;
- an epilogue ends at 8-bit codes that several kernels read dequantized, and each of those
  computes the dequantization itself (:func:`recompute_dequantizations`).

A value read outside its group ends the group there (it has to be written to memory anyway) --
unless all its readers meet again in one elementwise op after a few elementwise steps (a
*diamond*: SiLU's ``x * sigmoid(x)``, GELU's ``x * (1 + erf(x / sqrt 2)) / 2``): then the
readers and the op where they meet all join the group, and the value never leaves it. One
diamond per group: the kernel computes the shared value once per reader (it inlines), so
diamonds in a chain would double the work each time.
The result is a module whose ``main`` calls one function per group (``fused_<ops>``) with the
group's inputs: variables, constants and other groups' results. Structurally identical groups
are one function, so they become one kernel. At ``opt_level`` 0 every op is its own group.
"""
from __future__ import annotations

from ..ir import Call, Constant, Function, Module, Tuple, TupleGetItem, Var, merge_spans
from ..ops import get_op
from ..ops.registry import Pattern
from ..types import TensorType
from ..visit import post_order, use_counts
from .code_tables import is_lookup
from .context import graph_pass

MAX_GROUP = 24  # ops per group: beyond this, kernels grow without getting faster (32 made
# EfficientNet-B0's quantized file 1.1x slower); a dequantization an epilogue takes in does not count
DIAMOND = 12  # elementwise ops a diamond may span (GPT-2's tanh GELU: 10)
_FLOW = (Pattern.ELEMWISE, Pattern.BROADCAST)
_NARROW_STORED = ("uint8", "int8", "bfloat16")  # (activations an epilogue reads widened)
_ANCHOR = (Pattern.OUT_ELEMWISE_FUSABLE, Pattern.REDUCTION)


class _Group:
    def __init__(self, root: Call, kind: str):
        self.members = [root]
        self.kind = kind  # "anchor" (takes an epilogue), "flow" (injective chain), "closed"
        self.anchor = root if kind == "anchor" else None
        self.diamond = False  # took one: a second would inline shared values into each reader again
        self.absorbed = 0  # members that came in as an epilogue's dequantized operand (not counted)

    @property
    def output(self) -> Call:
        return self.members[-1]


def _pattern(call: Call) -> Pattern:
    if not isinstance(call.type, TensorType):
        return Pattern.OPAQUE  # several results: alone
    return get_op(call.op).pattern


def _readers(body) -> tuple:
    """(every node's readers, each once -- a Tuple or TupleGetItem reader included, so a
    model output is read outside any group; every node's position in dataflow order)."""
    readers: dict = {}
    order: dict = {}
    for i, n in enumerate(post_order(body)):
        order[n] = i
        operands = n.args if isinstance(n, Call) else n.fields if isinstance(n, Tuple) else \
            (n.tuple,) if isinstance(n, TupleGetItem) else ()
        for a in dict.fromkeys(operands):
            readers.setdefault(a, []).append(n)
    return readers, order


def _diamond(a: Call, shape, consumers: dict, order: dict):
    """The elementwise ops of ``shape`` through which every path from ``a`` runs until they
    all meet in one op (the last of them), or None: they are taken in dataflow order, each
    one's readers added, until one op is left to take."""
    inside: list = []
    pending = set(consumers.get(a, ()))
    while pending:
        m = min(pending, key=lambda c: order.get(c, -1))
        pending.discard(m)
        if not isinstance(m, Call) or _pattern(m) not in _FLOW or m.type.shape != shape:
            return None
        inside.append(m)
        if not pending:
            return inside if len(inside) > 1 else None  # m is where they meet
        if len(inside) >= DIAMOND:
            return None
        pending.update(consumers.get(m, ()))
    return None


def partition(body, fuse: bool = True) -> dict:
    """Map every Call of ``body`` to its group (calls of one group share the object)."""
    uses = use_counts(body)
    consumers, order = _readers(body) if fuse else ({}, {})
    promised: dict = {}  # a call -> the group a diamond it belongs to joins
    group_of: dict = {}
    for n in post_order(body):
        if not isinstance(n, Call):
            continue
        pat = _pattern(n)
        joined = promised.get(n)  # (a diamond joins whole: its members never exceed DIAMOND)
        if joined is None and fuse and pat in _FLOW + (Pattern.INJECTIVE,):
            for a in n.args:
                g = group_of.get(a)
                if g is None or a is not g.output or len(g.members) - g.absorbed >= MAX_GROUP:
                    continue
                if g.kind == "anchor" and _widens_codes(n) and len(_dequantized(n, consumers)[1]) > 1:
                    continue  # (an epilogue stores the 8-bit codes; their readers widen them: below)
                same = g.kind == "anchor" and (pat in _FLOW or is_lookup(n)) and n.type.shape == g.anchor.type.shape
                if not (g.kind == "flow" or same):
                    continue
                if uses[a] != sum(x is a for x in n.args):  # read by another op too
                    diamond = _diamond(a, a.type.shape, consumers, order) if pat in _FLOW and not g.diamond else None
                    # a diamond takes only ops not yet placed: an op another group's diamond
                    # counts on, or one already in a group (a reader that came first in dataflow
                    # order and joined an anchor's epilogue), stays where it is, and the value
                    # read by both leaves this group as its output
                    if (diamond is None or n not in diamond or n.type.shape != a.type.shape
                            or any(m in promised or m in group_of for m in diamond)):
                        continue
                    for m in diamond:
                        promised[m] = g
                    g.diamond = True
                joined = g
                break
        if joined is None and fuse and pat == Pattern.REDUCTION:
            joined = _prologue(n, group_of, uses, promised)
        if joined is not None:
            joined.members.append(n)
            group_of[n] = joined
        else:
            kind = "anchor" if pat in _ANCHOR else "flow" if pat in _FLOW + (Pattern.INJECTIVE,) else "closed"
            group_of[n] = _Group(n, kind if fuse else "closed")
        if fuse and pat in _FLOW and group_of[n].kind == "flow":
            _absorb(n, group_of, uses, order, set(promised.values()))
        elif fuse and pat in _FLOW and group_of[n].kind == "anchor" and n is not group_of[n].anchor:
            _absorb(n, group_of, uses, order, set(promised.values()), shape=group_of[n].anchor.type.shape)
    return group_of


def _widens_codes(n: Call) -> bool:
    """``n`` turns 8-bit codes into floats (the first step of a dequantization)."""
    return (n.op == "cast" and isinstance(n.type, TensorType) and n.type.dtype in ("float32", "float16", "bfloat16")
            and isinstance(n.args[0].type, TensorType) and n.args[0].type.dtype in ("uint8", "int8"))


def _dequantized(n: Call, consumers: dict) -> tuple:
    """(the last call of the dequantization ``n`` starts -- steps by constants, each the only
    reader of the one before --, its readers)."""
    while True:
        r = consumers.get(n, [])
        if not (len(r) == 1 and isinstance(r[0], Call) and _pattern(r[0]) in _FLOW and len(r[0].args) == 2
                and any(a is n for a in r[0].args) and any(isinstance(a, Constant) for a in r[0].args)):
            return n, r
        n = r[0]


def recompute_dequantizations(group_of: dict, consumers: dict) -> dict:
    """Groups that read a dequantization that is a kernel of its own (codes widened, then
    steps by constants; read by several groups) -> the dequantization's calls, which each of
    them then computes itself from the codes: a few instructions an element in each reader
    against writing the floats (4 bytes an element, where the codes are 1) and reading them
    back. (EfficientNet's squeeze-excitation: its mean and its scale both read a SiLU's
    dequantized output.) Readers take it where they read it elementwise, or as the input of
    their reduction."""
    extra: dict = {}
    for g in dict.fromkeys(group_of.values()):
        m = g.members
        if not (g.kind == "flow" and len(m) <= 4 and _widens_codes(m[0])
                and all(_pattern(c) in _FLOW for c in m)
                and all(all(a is prev or isinstance(a, Constant) for a in c.args) for prev, c in zip(m, m[1:]))):
            continue
        readers = consumers.get(g.output, [])
        groups = [group_of.get(r) for r in readers]
        if len(set(map(id, groups))) < 2 or not all(
                isinstance(r, Call) and h is not None and h.kind in ("flow", "anchor")
                and (_pattern(r) in _FLOW or (r is h.anchor and _pattern(r) == Pattern.REDUCTION and h.members[0] is r))
                for r, h in zip(readers, groups)):
            continue
        for h in groups:
            extra.setdefault(h, []).extend(c for c in m if c not in extra.get(h, []))
        for c in m:
            del group_of[c]
    return extra


def _prologue(n: Call, group_of: dict, uses, promised: dict):
    """The group of an elementwise chain that only reduction ``n`` reads, which ``n`` then
    anchors (None if there is none): the reduction reads each element once, so computing the
    chain inside it costs nothing and saves writing and reading the chain's result. An RMS
    norm's ``x * x`` then meets its mean in one kernel (a decoder step: one call fewer per norm)."""
    for a in dict.fromkeys(n.args):
        g = group_of.get(a)
        if (g is None or g.kind != "flow" or a is not g.output or g.diamond or g in promised.values()
                or uses[a] != sum(x is a for x in n.args) or len(g.members) - g.absorbed >= MAX_GROUP
                or any(_pattern(m) not in _FLOW for m in g.members)):
            continue
        g.kind, g.anchor = "anchor", n
        return g
    return None


def _absorb(n: Call, group_of: dict, uses, order: dict, promising: set, shape=None) -> None:
    """Where elementwise ``n`` joins chains that only it reads (an LSTM's gates: the products of
    the sigmoid of one slice and the tanh of another), their groups join ``n``'s: one loop nest
    computes them all. (No cycle can form: what such a chain reads, it reads from outside.)

    ``shape``: ``n`` is in an anchor's epilogue, and only a dequantization joins -- a chain of
    elementwise ops of that shape from an 8-bit integer tensor (a quantized residual, read
    from its bytes as the epilogue stores: a quarter of the float copy's traffic, and no
    kernel to make it), or a bfloat16 one widened (a residual stored in bf16:
    ``bf16_activations``). Other chains stay apart: inlined into a conv's epilogue they ran
    slower than their own kernel (EfficientNet-B0's, 1.09x the model's time)."""
    g = group_of[n]
    for a in dict.fromkeys(n.args):
        other = group_of.get(a)
        if (other is None or other is g or other.kind != "flow" or a is not other.output or other.diamond
                or other in promising or uses[a] != sum(x is a for x in n.args)
                or len(g.members) - g.absorbed + (0 if shape is not None else len(other.members)) > MAX_GROUP):
            continue
        if shape is not None and (any(_pattern(m) not in _FLOW or m.type.shape != shape for m in other.members)
                                  or not any(m.op == "cast" and m.args[0].type.dtype in _NARROW_STORED
                                             for m in other.members)):
            continue
        for m in other.members:
            group_of[m] = g
        if shape is not None:
            g.absorbed += len(other.members)
        g.members = sorted(g.members + other.members, key=order.__getitem__)


def _short(op: str) -> str:
    return op.split(".")[-1]


def _group_function(g: _Group, extra: list = ()) -> tuple:
    """(Function over p0..pn, the outside values passed for p0..pn); ``extra``: calls it
    computes before its members (:func:`recompute_dequantizations`)."""
    members = set(g.members) | set(extra)
    outside: list = []
    params: dict = {}

    def param_for(v):
        if v not in params:
            params[v] = Var(f"p{len(params)}", v.type)
            outside.append(v)
        return params[v]

    def visit(n):
        if n in members:
            return None
        if isinstance(n, (Var, Constant, Call, TupleGetItem)):
            return param_for(n)
        return None

    memo: dict = {}
    for m in list(extra) + g.members:  # members are in dataflow order
        args = []
        for a in m.args:
            if a in memo:
                args.append(memo[a])
            else:
                args.append(visit(a) or a)
        memo[m] = m.replace(args=tuple(args))
    body = memo[g.output]
    return Function(list(params.values()), body, g.output.type), outside


@graph_pass("fuse_ops", opt_level=0)
def fuse_ops(mod: Module, ctx) -> Module:
    """Partition ``main`` into fused groups, one module function each (see the module doc)."""
    main = mod.main
    group_of = partition(main.body, fuse=ctx.opt_level >= 1)
    extra = recompute_dequantizations(group_of, _readers(main.body)[0]) if ctx.opt_level >= 1 else {}
    functions: dict = {}
    names: dict = {}  # Function -> its global name (identical groups share one)
    result: dict = {}  # group output -> the call of its function
    counts: dict = {}
    for g in dict.fromkeys(group_of.values()):
        fn, outside = _group_function(g, extra.get(g, ()))
        if fn not in names:
            base = "fused_" + "_".join(dict.fromkeys(_short(m.op) for m in g.members))[:48]
            k = counts.get(base, 0)
            counts[base] = k + 1
            names[fn] = f"{base}_{k}" if k else base
            functions[names[fn]] = fn
        result[g.output] = (names[fn], outside)

    new: dict = {}
    for n in post_order(main.body):
        if isinstance(n, Call):
            if n in result:
                name, outside = result[n]
                span = merge_spans(*(m for m in group_of[n].members))
                new[n] = Call(name, tuple(new.get(o, o) for o in outside), {}, n.type, span)
        elif isinstance(n, TupleGetItem):
            new[n] = TupleGetItem(new.get(n.tuple, n.tuple), n.index)
        elif isinstance(n, Tuple):
            new[n] = Tuple([new.get(f, f) for f in n.fields])
    body = new.get(main.body, main.body)
    functions["main"] = Function(main.params, body, main.ret_type)
    return Module(functions)


__all__ = ["fuse_ops", "partition"]
