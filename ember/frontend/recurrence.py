"""The recurrence of RNN, GRU and LSTM layers, shared by the ONNX and PyTorch frontends.

A frontend hands :func:`layer` a whole layer, its weights stacked direction after direction and
its gates in ONNX's order (LSTM: input, output, forget, cell; GRU: update, reset, hidden). The
inputs of every step are projected at once (one matmul: ``xw``, ``(seq, batch, dirs *
gates*hidden)``). A layer without peepholes is then one ``nn.recurrence`` op
(:mod:`ember.graph.ops.recurrent`; a float16 or bfloat16 one computes in float32), over a
static or a symbolic length: its steps a loop in its kernel, its directions in parallel. Unrolled, a 512-step LSTM was thousands of nodes (12 s to
compile) and two kernel calls a step. The others go direction by direction through
:func:`recur`: each step a small matmul by the recurrence weights and the gates' elementwise
ops, which fuse; over a static length the steps are unrolled, over a symbolic one the step
becomes a module function that a ``scan`` runs once per position.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from ..graph import Constant, Expr, Function, TensorType, Tuple, TupleGetItem, Var
from ..graph.visit import free_vars

__all__ = ["Cell", "RELU", "SIGMOID", "TANH", "activate", "layer", "project", "recur"]


@dataclasses.dataclass
class Cell:
    """What a step computes: ``op`` ("RNN", "GRU" or "LSTM"), its activations (in ONNX's order:
    f, g[, h]; each a chain of elementwise ops, ``((op, attrs, constant), ...)``, see
    :mod:`ember.graph.ops.recurrent`), an optional ``clip`` of the gates' inputs, and GRU's
    ``linear_before_reset`` (PyTorch's GRU always is)."""

    op: str
    acts: list
    hidden: int
    clip: Optional[float] = None
    linear_before_reset: bool = False


SIGMOID, TANH, RELU = (("sigmoid", (), None),), (("tanh", (), None),), (("nn.relu", (), None),)
PANEL = 32  # columns of a panel of nn.recurrence's weights


def activate(call: Callable, act: tuple, x):
    """``x`` through the activation chain ``act`` (graph calls)."""
    for op, attrs, k in act:
        x = call(op, x, *([] if k is None else [_const(k, x.type.dtype)]), **dict(attrs))
    return x


def project(call: Callable, x: Expr, wt: Expr) -> Expr:
    """Every step's input projection, ``x`` (seq, batch, inputs) by ``wt`` (inputs, gates *
    hidden), as one 2-D product of seq * batch rows: as a 3-D product its rows would be the
    batch, one at a time (a 512-step LSTM's projection ran at a quarter of its speed)."""
    seq, batch, n_in = x.type.shape
    rows = call("nn.matmul", call("reshape", x, newshape=(-1, n_in)), wt)
    return call("reshape", rows, newshape=(seq, batch, wt.type.shape[1]))


def _rows(call, x, begin, end, axis: int = -1):
    return call("strided_slice", x, begin=(begin,), end=(end,), axes=(axis,))


def _const(v, dtype: str) -> Constant:
    return Constant(np.array(v, dtype=dtype))


def step(call: Callable, cell: Cell, xt, h, c, rt, rb, p) -> tuple:
    """One step from the projected input ``xt`` (batch, gates*hidden) and the state ``h``
    (and ``c``): the new ``(h, c)`` (``c`` None but for LSTM). ``rt``: the recurrence weights
    (hidden, gates*hidden); ``rb`` their bias, ``p`` LSTM's peepholes (3*hidden), or None."""
    hidden, dtype = cell.hidden, xt.type.dtype

    def gate(v, k):
        return _rows(call, v, k * hidden, (k + 1) * hidden)

    def clipped(v):
        if cell.clip is None:
            return v
        return call("minimum", call("maximum", v, _const(-cell.clip, dtype)), _const(cell.clip, dtype))

    hr = call("nn.matmul", h, rt)  # (batch, gates*hidden)
    if rb is not None:
        hr = call("add", hr, rb)
    f, g_act, h_act = ([(lambda a: lambda v: activate(call, a, v))(a) for a in cell.acts] + [None, None])[:3]
    if cell.op == "RNN":
        return f(clipped(call("add", xt, hr))), None
    if cell.op == "GRU":
        z = f(clipped(call("add", gate(xt, 0), gate(hr, 0))))
        rg = f(clipped(call("add", gate(xt, 1), gate(hr, 1))))
        if cell.linear_before_reset:
            cand = call("add", gate(xt, 2), call("multiply", rg, gate(hr, 2)))
        else:
            rh = call("nn.matmul", call("multiply", rg, h), gate(rt, 2))
            if rb is not None:
                rh = call("add", rh, gate(rb, 2))
            cand = call("add", gate(xt, 2), rh)
        hh = g_act(clipped(cand))
        one_minus = call("subtract", _const(1, dtype), z)
        return call("add", call("multiply", one_minus, hh), call("multiply", z, h)), None
    pre = call("add", xt, hr)  # gates i, o, f, c
    i_pre, o_pre, f_pre = gate(pre, 0), gate(pre, 1), gate(pre, 2)
    if p is not None:
        i_pre = call("add", i_pre, call("multiply", _rows(call, p, 0, hidden), c))
        f_pre = call("add", f_pre, call("multiply", _rows(call, p, 2 * hidden, 3 * hidden), c))
    i, fg = f(clipped(i_pre)), f(clipped(f_pre))
    cand = g_act(clipped(gate(pre, 3)))
    c_new = call("add", call("multiply", fg, c), call("multiply", i, cand))
    if p is not None:
        o_pre = call("add", o_pre, call("multiply", _rows(call, p, hidden, 2 * hidden), c_new))
    o = f(clipped(o_pre))
    return call("multiply", o, h_act(c_new)), c_new


def _frozen(call, live, h_new, c_new, h, c) -> tuple:
    """Past a batch's length its state stays and its output is 0: ``(output, h, c)``."""
    out = call("where", live, h_new, _const(0, h_new.type.dtype))
    h_new = call("where", live, h_new, h)
    if c is not None:
        c_new = call("where", live, c_new, c)
    return out, h_new, c_new


def recur(call: Callable, functions: dict, cell: Cell, xw: Expr, h: Expr, c: Optional[Expr], rt: Expr,
          rb: Optional[Expr] = None, p: Optional[Expr] = None, reverse: bool = False,
          lens: Optional[Expr] = None) -> tuple:
    """One direction of one layer over the projected inputs ``xw`` (seq, batch, gates*hidden):
    ``(outputs (seq, batch, hidden), last h, last c)``. ``call`` makes a typed call;
    ``functions`` receives the step's module function when the length is symbolic. ``lens``
    (batch,): each batch's length (its outputs past it are 0, its state stays)."""
    seq, batch = xw.type.shape[0], xw.type.shape[1]
    hidden = cell.hidden
    if not isinstance(seq, int):
        return _scanned(call, functions, cell, xw, h, c, rt, rb, p, reverse, lens)
    outs = {}
    for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
        xt = call("reshape", _rows(call, xw, t, t + 1, 0), newshape=(batch, xw.type.shape[2]))
        h_new, c_new = step(call, cell, xt, h, c, rt, rb, p)
        if lens is not None:
            live = call("reshape", call("less", _const(t, lens.type.dtype), lens), newshape=(batch, 1))
            outs[t], h_new, c_new = _frozen(call, live, h_new, c_new, h, c)
        else:
            outs[t] = h_new
        h, c = h_new, c_new
    y = call("concat", *[call("reshape", outs[t], newshape=(1, batch, hidden)) for t in range(seq)], axis=0)
    return y, h, c


def layer(call: Callable, functions: dict, cells: list, x: Expr, wt: Expr, wb: Optional[Expr], rt: Expr,
          rb: Optional[Expr], h0: Expr, c0: Optional[Expr], direction: str = "forward", lens: Optional[Expr] = None,
          p: Optional[Expr] = None) -> tuple:
    """A layer, every direction: ``x`` (seq, batch, inputs), the input weights ``wt`` (inputs,
    dirs * gates*hidden) and their bias ``wb`` (dirs * gates*hidden), the recurrence weights
    ``rt`` (dirs, hidden, gates*hidden) and bias ``rb`` (dirs, gates*hidden), the states ``h0``
    and ``c0`` (dirs, batch, hidden), ``cells`` one per direction; ``lens`` (batch,) the rows'
    lengths, ``p`` LSTM's peepholes (dirs, 3*hidden). Returns ONNX's ``(y (seq, dirs, batch,
    hidden), last h (dirs, batch, hidden), last c or None)``."""
    cell, dirs = cells[0], len(cells)
    gh = rt.type.shape[2]
    xw = project(call, x, wt)
    if wb is not None:
        xw = call("add", xw, wb)
    floats = ("float32", "float16", "bfloat16")
    if p is None and all(v.type.dtype in floats for v in (xw, rt, rb, h0, c0) if v is not None):
        # (a half-precision layer computes in float32, its results cast back: the kernel's
        # accumulators are float32 anyway, and unrolled it was ~12 s to compile)
        def f32(v):
            return v if v is None or v.type.dtype == "float32" else call("cast", v, dtype="float32")
        xw, rt, rb, h0, c0 = (f32(v) for v in (xw, rt, rb, h0, c0))
        if rb is None:
            rb = Constant(np.zeros((dirs, gh), dtype="float32"))
        hidden = cell.hidden
        if hidden % PANEL == 0:  # (the weights in panels of columns: each block of the kernel's a contiguous run)
            rt = call("transpose", call("reshape", rt, newshape=(dirs, hidden, gh // PANEL, PANEL)), axes=(0, 2, 1, 3))
        args = [xw, h0] + ([c0] if cell.op == "LSTM" else []) + [rt, rb] + ([lens] if lens is not None else [])
        r = call("nn.recurrence", *args, cell=cell.op, acts=tuple(a for c in cells for a in c.acts),
                 clip=float(cell.clip or 0.0), linear_before_reset=bool(cell.linear_before_reset), direction=direction)
        dtype = x.type.dtype

        def back(k):
            v = TupleGetItem(r, k)
            return v if dtype == "float32" else call("cast", v, dtype=dtype)
        return back(0), back(1), (back(2) if cell.op == "LSTM" else None)
    seq, batch, hidden = x.type.shape[0], x.type.shape[1], cell.hidden

    def take(v, d, shape):
        return None if v is None else call("reshape", _rows(call, v, d, d + 1, 0), newshape=shape)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        y, h, c = recur(call, functions, cells[d], _rows(call, xw, d * gh, (d + 1) * gh), take(h0, d, (batch, hidden)),
                        take(c0, d, (batch, hidden)), take(rt, d, (hidden, gh)), take(rb, d, (gh,)),
                        take(p, d, (3 * hidden,)), reverse=direction == "reverse" or d == 1, lens=lens)
        ys.append(call("reshape", y, newshape=(seq, 1, batch, hidden)))
        hs.append(call("reshape", h, newshape=(1, batch, hidden)))
        if c is not None:
            cs.append(call("reshape", c, newshape=(1, batch, hidden)))

    def joined(vs, axis):
        return vs[0] if len(vs) == 1 else call("concat", *vs, axis=axis)
    return joined(ys, 1), joined(hs, 0), (joined(cs, 0) if cs else None)


def _scanned(call, functions: dict, cell: Cell, xw, h, c, rt, rb, p, reverse: bool, lens) -> tuple:
    """:func:`recur` over a symbolic length: the step a function that ``scan`` runs."""
    seq, batch = xw.type.shape[0], xw.type.shape[1]
    dtype = xw.type.dtype
    states = [h] + ([c] if c is not None else [])
    scan_in = [xw]
    if lens is not None:  # each step's position, to freeze the batches past their lengths
        scan_in.append(call("range", start=0, stop=seq, dtype=lens.type.dtype))
    # the weights the step reads: an expression of constants goes into the step itself (its
    # matmul then packs the weights once, at compile time); any other is passed in
    captured = [v for v in (rt, rb, p, lens) if v is not None and free_vars(v)]
    s_vars = [Var(f"state{k}", v.type) for k, v in enumerate(states)]
    x_var = Var("xt", TensorType((batch, xw.type.shape[2]), dtype))
    t_var = Var("t", TensorType((), lens.type.dtype)) if lens is not None else None
    c_vars = [Var(f"w{k}", v.type) for k, v in enumerate(captured)]
    inner = dict(zip((id(v) for v in captured), c_vars))

    def var(v):
        return None if v is None else inner.get(id(v), v)
    h_v, c_v = s_vars[0], (s_vars[1] if c is not None else None)
    h_new, c_new = step(call, cell, x_var, h_v, c_v, var(rt), var(rb), var(p))
    out = h_new
    if lens is not None:
        live = call("reshape", call("less", t_var, var(lens)), newshape=(batch, 1))
        out, h_new, c_new = _frozen(call, live, h_new, c_new, h_v, c_v)
    body = Tuple([h_new] + ([c_new] if c_v is not None else []) + [out])
    name = f"subgraph{len(functions)}"
    functions[name] = Function(s_vars + [x_var] + ([t_var] if t_var is not None else []) + c_vars, body, body.type)
    n, m = len(states), len(scan_in)
    types = tuple(v.type for v in states) + (TensorType((seq, batch, cell.hidden), dtype),)
    result = call("scan", *states, *scan_in, *captured, body=name, n_states=n, n_scan_in=m, in_axes=(0,) * m,
                  in_dirs=(int(reverse),) * m, out_axes=(0,), out_dirs=(int(reverse),), types=types)
    got = [TupleGetItem(result, k) for k in range(len(types))]
    return got[-1], got[0], (got[1] if c is not None else None)
