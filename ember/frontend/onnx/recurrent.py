"""Converters of ONNX's recurrent layers (RNN, GRU, LSTM): the input projection of every step
is one matmul, each step then a small matmul by the recurrence weights and the gates'
elementwise ops, which fuse. Over a static sequence length the steps are unrolled (each step's
kernels are planned with the rest of the model); over a symbolic one the step is a module
function that a ``scan`` runs once per position.

Every attribute of the ops is read: direction (forward, reverse, bidirectional), layout (seq-
or batch-major), activations with their alpha/beta, clip, GRU's linear_before_reset, LSTM's
peepholes and input_forget; ``sequence_lens`` freezes a batch's state past its length (and
zeroes its outputs there), in the forward direction.
"""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...graph import Constant, TensorType, TupleGetItem
from .table import converter

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _f32(v, dtype):
    return Constant(np.array(v, dtype=dtype))


def _activation(node, name: str, alpha, beta):
    """The activation ``name`` (ONNX's spelling) as a function of an expression."""
    def c(v, x):
        return _f32(v, x.type.dtype)
    key = name.lower()
    simple = {"tanh": "tanh", "sigmoid": "sigmoid", "relu": "nn.relu", "softsign": "nn.softsign",
              "softplus": "nn.softplus"}
    if key in simple:
        return lambda x: node.call(simple[key], x)
    if key == "leakyrelu":
        return lambda x: node.call("nn.leaky_relu", x, alpha=0.01 if alpha is None else alpha)
    if key == "thresholdedrelu":
        return lambda x: node.call("nn.thresholded_relu", x, alpha=1.0 if alpha is None else alpha)
    if key == "elu":
        return lambda x: node.call("nn.elu", x, alpha=1.0 if alpha is None else alpha)
    if key == "hardsigmoid":
        return lambda x: node.call("nn.hard_sigmoid", x, alpha=0.2 if alpha is None else alpha,
                                   beta=0.5 if beta is None else beta)
    if key == "affine":
        return lambda x: node.call("add", node.call("multiply", x, c(1.0 if alpha is None else alpha, x)),
                                   c(0.0 if beta is None else beta, x))
    if key == "scaledtanh":
        return lambda x: node.call("multiply", node.call("tanh", node.call("multiply", x, c(
            1.0 if beta is None else beta, x))), c(1.0 if alpha is None else alpha, x))
    raise UnsupportedOpError(f"recurrent activation {name!r} is not supported")


def _activations(node, op: str, dirs: int) -> list:
    """Per direction, the op's activations (ONNX lists them direction after direction)."""
    names = [a if isinstance(a, str) else a.decode() for a in (node.attr("activations") or [])]
    n = len(DEFAULT_ACTS[op])
    if not names:
        names = DEFAULT_ACTS[op] * dirs
    if len(names) == n and dirs == 2:
        names = names * 2
    if len(names) != n * dirs:
        raise ShapeError(f"{op} needs {n * dirs} activations for {dirs} direction(s), got {names}")
    alphas = list(node.attr("activation_alpha") or [])
    betas = list(node.attr("activation_beta") or [])
    fns = []
    for k, name in enumerate(names):
        fns.append(_activation(node, name, alphas[k] if k < len(alphas) else None,
                               betas[k] if k < len(betas) else None))
    return [fns[d * n:(d + 1) * n] for d in range(dirs)]


def _rows(node, x, begin: int, end: int, axis: int = -1):
    return node.call("strided_slice", x, begin=(begin,), end=(end,), axes=(axis,))


def _take(node, x, d: int):
    """``x[d]`` of a per-direction tensor."""
    part = _rows(node, x, d, d + 1, 0)
    return node.call("reshape", part, newshape=tuple(x.type.shape[1:]))


@converter("RNN", "GRU", "LSTM", since=7)
def _recurrent(node):
    op = node.op_type
    g = GATES[op]
    x, w, r = node.input(0), node.input(1), node.input(2)
    dtype = x.type.dtype
    direction = node.attr("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = 2 if direction == "bidirectional" else 1
    hidden = node.attr("hidden_size") or r.type.shape[-1]
    layout = node.attr("layout", 0)
    if layout:
        x = node.call("transpose", x, axes=(1, 0, 2))  # (seq, batch, input)
    seq, batch = x.type.shape[0], x.type.shape[1]
    if node.attr("input_forget", 0):
        raise UnsupportedOpError("LSTM with input_forget is not supported")
    clip = node.attr("clip")
    lens = node.input(4) if node.has(4) else None
    if lens is not None and direction != "forward":
        raise UnsupportedOpError(f"{op} with sequence_lens is supported in the forward direction only")
    acts = _activations(node, op, dirs)
    zero_state = node.call("expand", Constant(np.zeros((1, hidden), dtype=dtype)), shape=(batch, hidden))

    ys, hs, cs = [], [], []
    for d in range(dirs):
        wd, rd = _take(node, w, d), _take(node, r, d)
        xw = node.call("nn.matmul", x, node.call("transpose", wd, axes=(1, 0)))  # (seq, batch, g*hidden)
        rb = None
        if node.has(3):
            bd = _take(node, node.input(3), d)
            xw = node.call("add", xw, _rows(node, bd, 0, g * hidden))
            rb = _rows(node, bd, g * hidden, 2 * g * hidden)
        rt = node.call("transpose", rd, axes=(1, 0))  # (hidden, g*hidden)
        h = _take(node, node.input(5), d) if node.has(5) else zero_state
        c = (_take(node, node.input(6), d) if node.has(6) else zero_state) if op == "LSTM" else None
        p = _take(node, node.input(7), d) if op == "LSTM" and node.has(7) else None
        reverse = direction == "reverse" or d == 1
        if not isinstance(seq, int):
            y, h, c = _scanned(node, op, xw, h, c, rt, rb, p, acts[d], hidden, clip, dtype, reverse, lens)
            ys.append(node.call("reshape", y, newshape=(seq, 1, batch, hidden)))
            hs.append(node.call("reshape", h, newshape=(1, batch, hidden)))
            if c is not None:
                cs.append(node.call("reshape", c, newshape=(1, batch, hidden)))
            continue
        steps = range(seq - 1, -1, -1) if reverse else range(seq)
        outs = {}
        for t in steps:
            xt = node.call("reshape", _rows(node, xw, t, t + 1, 0), newshape=(batch, g * hidden))
            h_new, c_new = _step(node, op, xt, h, c, rt, rb, p, acts[d], hidden, clip, dtype)
            if lens is not None:  # past a batch's length its state stays and its output is 0
                live = node.call("reshape", node.call("less", Constant(np.array(t, lens.type.dtype)), lens),
                                 newshape=(batch, 1))
                outs[t] = node.call("where", live, h_new, _f32(0, dtype))
                h_new = node.call("where", live, h_new, h)
                if c is not None:
                    c_new = node.call("where", live, c_new, c)
            else:
                outs[t] = h_new
            h, c = h_new, c_new
        ys.append(node.call("concat", *[node.call("reshape", outs[t], newshape=(1, 1, batch, hidden))
                                        for t in range(seq)], axis=0))  # (seq, 1, batch, hidden)
        hs.append(node.call("reshape", h, newshape=(1, batch, hidden)))
        if c is not None:
            cs.append(node.call("reshape", c, newshape=(1, batch, hidden)))
    y = ys[0] if dirs == 1 else node.call("concat", *ys, axis=1)
    y_h = hs[0] if dirs == 1 else node.call("concat", *hs, axis=0)
    y_c = (cs[0] if dirs == 1 else node.call("concat", *cs, axis=0)) if cs else None
    if layout:  # (batch, seq, dirs, hidden) and (batch, dirs, hidden)
        y = node.call("transpose", y, axes=(2, 0, 1, 3))
        y_h = node.call("transpose", y_h, axes=(1, 0, 2))
        y_c = node.call("transpose", y_c, axes=(1, 0, 2)) if y_c is not None else None
    return [y, y_h] + ([y_c] if op == "LSTM" else [])


def _scanned(node, op, xw, h, c, rt, rb, p, acts, hidden: int, clip, dtype, reverse: bool, lens):
    """One direction over a symbolic sequence length: ``(outputs (seq, batch, hidden), last h,
    last c)``, the step a function that ``scan`` runs over the positions of ``xw``."""
    from ...graph import Function, Tuple, Var

    imp = node.importer
    seq, batch = xw.type.shape[0], xw.type.shape[1]
    states = [h] + ([c] if c is not None else [])
    scan_in = [xw]
    if lens is not None:  # each step's position, to freeze the batches past their lengths
        scan_in.append(node.call("range", start=0, stop=seq, dtype=lens.type.dtype))
    captured = [v for v in (rt, rb, p, lens) if v is not None]
    s_vars = [Var(f"state{k}", v.type) for k, v in enumerate(states)]
    x_var = Var("xt", TensorType((batch, xw.type.shape[2]), dtype))
    t_var = Var("t", TensorType((), lens.type.dtype)) if lens is not None else None
    c_vars = [Var(f"w{k}", v.type) for k, v in enumerate(captured)]
    env = dict(zip((id(v) for v in captured), c_vars))
    h_v, c_v = s_vars[0], (s_vars[1] if c is not None else None)
    h_new, c_new = _step(node, op, x_var, h_v, c_v, env[id(rt)], env.get(id(rb)) if rb is not None else None,
                         env.get(id(p)) if p is not None else None, acts, hidden, clip, dtype)
    out = h_new
    if lens is not None:
        live = node.call("reshape", node.call("less", t_var, env[id(lens)]), newshape=(batch, 1))
        out = node.call("where", live, h_new, _f32(0, dtype))
        h_new = node.call("where", live, h_new, h_v)
        if c_v is not None:
            c_new = node.call("where", live, c_new, c_v)
    results = [h_new] + ([c_new] if c_v is not None else []) + [out]
    params = s_vars + [x_var] + ([t_var] if t_var is not None else []) + c_vars
    body = Tuple(results)
    name = f"subgraph{len(imp.functions)}"
    imp.functions[name] = Function(params, body, body.type)
    n, m = len(states), len(scan_in)
    types = tuple(v.type for v in states) + (TensorType((seq, batch, hidden), dtype),)
    call = node.call("scan", *states, *scan_in, *captured, body=name, n_states=n, n_scan_in=m,
                     in_axes=(0,) * m, in_dirs=(int(reverse),) * m, out_axes=(0,), out_dirs=(int(reverse),),
                     types=types)
    got = [TupleGetItem(call, k) for k in range(len(types))]
    return got[-1], got[0], (got[1] if c is not None else None)


def _step(node, op, xt, h, c, rt, rb, p, acts, hidden: int, clip, dtype):
    """One step: the new hidden state (and cell state for LSTM)."""
    def gate(v, k):
        return _rows(node, v, k * hidden, (k + 1) * hidden)

    def clipped(v):
        if clip is None:
            return v
        return node.call("minimum", node.call("maximum", v, _f32(-clip, dtype)), _f32(clip, dtype))

    hr = node.call("nn.matmul", h, rt)  # (batch, g*hidden)
    if rb is not None:
        hr = node.call("add", hr, rb)
    if op == "RNN":
        return acts[0](clipped(node.call("add", xt, hr))), None
    if op == "GRU":
        f, g_act = acts
        z = f(clipped(node.call("add", gate(xt, 0), gate(hr, 0))))
        rg = f(clipped(node.call("add", gate(xt, 1), gate(hr, 1))))
        if node.attr("linear_before_reset", 0):
            cand = node.call("add", gate(xt, 2), node.call("multiply", rg, gate(hr, 2)))
        else:
            rh = node.call("nn.matmul", node.call("multiply", rg, h), gate(rt, 2))
            if rb is not None:
                rh = node.call("add", rh, gate(rb, 2))
            cand = node.call("add", gate(xt, 2), rh)
        hh = g_act(clipped(cand))
        one_minus = node.call("subtract", _f32(1, dtype), z)
        return node.call("add", node.call("multiply", one_minus, hh), node.call("multiply", z, h)), None
    f, g_act, h_act = acts
    pre = node.call("add", xt, hr)  # gates i, o, f, c
    i_pre, o_pre, f_pre = gate(pre, 0), gate(pre, 1), gate(pre, 2)
    if p is not None:
        i_pre = node.call("add", i_pre, node.call("multiply", _rows(node, p, 0, hidden), c))
        f_pre = node.call("add", f_pre, node.call("multiply", _rows(node, p, 2 * hidden, 3 * hidden), c))
    i, fg = f(clipped(i_pre)), f(clipped(f_pre))
    cand = g_act(clipped(gate(pre, 3)))
    c_new = node.call("add", node.call("multiply", fg, c), node.call("multiply", i, cand))
    if p is not None:
        o_pre = node.call("add", o_pre, node.call("multiply", _rows(node, p, hidden, 2 * hidden), c_new))
    o = f(clipped(o_pre))
    return node.call("multiply", o, h_act(c_new)), c_new


__all__ = []
