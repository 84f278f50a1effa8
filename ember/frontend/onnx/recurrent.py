"""Converters of ONNX's recurrent layers (RNN, GRU, LSTM): one layer, every direction, is
:func:`ember.frontend.recurrence.layer` (one ``nn.recurrence`` op; with peepholes, the steps
unrolled over a static length and scanned over a symbolic one).

Every attribute of the ops is read: direction (forward, reverse, bidirectional), layout (seq-
or batch-major), activations with their alpha/beta, clip, GRU's linear_before_reset, LSTM's
peepholes and input_forget; ``sequence_lens`` freezes a batch's state past its length (and
zeroes its outputs there), in the forward direction.
"""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...graph import Constant
from ..recurrence import Cell, layer
from .table import converter

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _activation(name: str, alpha, beta) -> tuple:
    """The activation ``name`` (ONNX's spelling) as a chain of elementwise ops
    (:mod:`ember.graph.ops.recurrent`)."""
    key = name.lower()
    simple = {"tanh": "tanh", "sigmoid": "sigmoid", "relu": "nn.relu", "softsign": "nn.softsign",
              "softplus": "nn.softplus"}
    if key in simple:
        return ((simple[key], (), None),)
    if key == "leakyrelu":
        return (("nn.leaky_relu", (("alpha", 0.01 if alpha is None else float(alpha)),), None),)
    if key == "thresholdedrelu":
        return (("nn.thresholded_relu", (("alpha", 1.0 if alpha is None else float(alpha)),), None),)
    if key == "elu":
        return (("nn.elu", (("alpha", 1.0 if alpha is None else float(alpha)),), None),)
    if key == "hardsigmoid":
        return (("nn.hard_sigmoid", (("alpha", 0.2 if alpha is None else float(alpha)),
                                     ("beta", 0.5 if beta is None else float(beta))), None),)
    if key == "affine":
        return (("multiply", (), 1.0 if alpha is None else float(alpha)), ("add", (), 0.0 if beta is None else float(beta)))
    if key == "scaledtanh":
        return (("multiply", (), 1.0 if beta is None else float(beta)), ("tanh", (), None),
                ("multiply", (), 1.0 if alpha is None else float(alpha)))
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
        fns.append(_activation(name, alphas[k] if k < len(alphas) else None,
                               betas[k] if k < len(betas) else None))
    return [fns[d * n:(d + 1) * n] for d in range(dirs)]


def _rows(node, x, begin: int, end: int, axis: int = -1):
    return node.call("strided_slice", x, begin=(begin,), end=(end,), axes=(axis,))


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
    batch = x.type.shape[1]
    if node.attr("input_forget", 0):
        raise UnsupportedOpError("LSTM with input_forget is not supported")
    lens = node.input(4) if node.has(4) else None
    if lens is not None and direction != "forward":
        raise UnsupportedOpError(f"{op} with sequence_lens is supported in the forward direction only")
    acts = _activations(node, op, dirs)

    def zeros():
        return node.call("expand", Constant(np.zeros((1, 1, hidden), dtype=dtype)), shape=(dirs, batch, hidden))
    cells = [Cell(op, acts[d], hidden, node.attr("clip"), bool(node.attr("linear_before_reset", 0))) for d in range(dirs)]
    wt = node.call("reshape", node.call("transpose", w, axes=(2, 0, 1)), newshape=(-1, dirs * g * hidden))
    wb = rb = None
    if node.has(3):  # (dirs, 2 * g*hidden): the input bias, then the recurrence's
        wb = node.call("reshape", _rows(node, node.input(3), 0, g * hidden), newshape=(dirs * g * hidden,))
        rb = _rows(node, node.input(3), g * hidden, 2 * g * hidden)
    rt = node.call("transpose", r, axes=(0, 2, 1))  # (dirs, hidden, g*hidden)
    def state(k):  # (batch-major with layout 1: (batch, dirs, hidden))
        v = node.input(k)
        return node.call("transpose", v, axes=(1, 0, 2)) if layout else v
    h0 = state(5) if node.has(5) else zeros()
    c0 = (state(6) if node.has(6) else zeros()) if op == "LSTM" else None
    p = node.input(7) if op == "LSTM" and node.has(7) else None
    y, y_h, y_c = layer(node.call, node.importer.functions, cells, x, wt, wb, rt, rb, h0, c0, direction, lens, p)
    if layout:  # (batch, seq, dirs, hidden) and (batch, dirs, hidden)
        y = node.call("transpose", y, axes=(2, 0, 1, 3))
        y_h = node.call("transpose", y_h, axes=(1, 0, 2))
        y_c = node.call("transpose", y_c, axes=(1, 0, 2)) if y_c is not None else None
    return [y, y_h] + ([y_c] if op == "LSTM" else [])


__all__ = []
