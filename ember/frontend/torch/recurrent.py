"""``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` through from_torch, over any sequence length.

torch.export traces these layers' kernels (``_VF.lstm`` and kin) through their decompositions:
one copy of the step per position of the example, so the sequence length becomes a constant (a
dynamic one, a constraint violation). While from_torch exports, :func:`rnn_as_one_op` routes
the layers' calls on unpacked inputs through one custom op, ``ember::rnn``, which eager runs
with torch's own kernels and the converter below turns into Ember's recurrence
(:func:`ember.frontend.recurrence.layer`: a layer, both directions, one ``nn.recurrence``). Packed sequences, training-mode dropout and LSTM projections keep torch's
path.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from ...errors import UnsupportedOpError
from ..recurrence import RELU, SIGMOID, TANH, Cell, layer
from .table import converter

_MODES = ("lstm", "gru", "rnn_tanh", "rnn_relu")
_ORIGINAL: dict = {}  # mode -> torch's _VF function (what the custom op runs eagerly)


def _define() -> None:
    import torch

    if _ORIGINAL:
        return
    vf = torch._C._VariableFunctions
    _ORIGINAL.update({m: getattr(vf, m) for m in _MODES})

    @torch.library.custom_op("ember::rnn", mutates_args=(), schema=(
        "(str mode, Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, "
        "bool bidirectional, bool batch_first) -> Tensor[]"))
    def rnn(mode, input, hx, params, has_biases, num_layers, bidirectional, batch_first):
        state = tuple(hx) if mode == "lstm" else hx[0]
        out = _ORIGINAL[mode](input, state, params, has_biases, num_layers, 0.0, False, bidirectional, batch_first)
        return [t.clone() for t in out]

    @rnn.register_fake
    def _(mode, input, hx, params, has_biases, num_layers, bidirectional, batch_first):
        seq, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
        width = (2 if bidirectional else 1) * hx[0].shape[-1]
        out = input.new_empty((batch, seq, width) if batch_first else (seq, batch, width))
        return [out] + [h.new_empty(h.shape) for h in hx]


@contextlib.contextmanager
def rnn_as_one_op() -> Iterator[None]:
    """Within: recurrent layers called on unpacked inputs, in eval mode, call ``ember::rnn``."""
    import torch

    _define()
    vf = torch.nn.modules.rnn._VF
    own = {m: vf.__dict__[m] for m in _MODES if m in vf.__dict__}

    def routed(mode: str):
        fallback = getattr(vf, mode)

        def call(*args):
            # unpacked: (input, hx, weights list, bias, layers, dropout, training, bidirectional, batch_first)
            if len(args) != 9 or not isinstance(args[2], (list, tuple)) or (args[6] and args[5] > 0):
                return fallback(*args)
            x, hx, params, bias, layers, _, _, bidirectional, batch_first = args
            if len(params) != layers * (2 if bidirectional else 1) * (4 if bias else 2):
                return fallback(*args)  # (LSTM's projections: torch's decomposition)
            hx = list(hx) if isinstance(hx, (list, tuple)) else [hx]
            out = torch.ops.ember.rnn(mode, x, hx, list(params), bias, layers, bidirectional, batch_first)
            return tuple(out)
        return call

    try:
        for m in _MODES:
            setattr(vf, m, routed(m))
        yield
    finally:
        for m in _MODES:
            if m in own:
                setattr(vf, m, own[m])
            else:
                delattr(vf, m)


# torch's gate order -> ONNX's (what ember.frontend.recurrence computes in)
_GATE_ORDER = {"lstm": (0, 3, 1, 2), "gru": (1, 0, 2), "rnn_tanh": (0,), "rnn_relu": (0,)}


def _gates(node, v, order: tuple, hidden: int, axis: int):
    """``v``'s gate blocks along ``axis`` in ``order``."""
    if order == tuple(range(len(order))):
        return v
    parts = [node.call("strided_slice", v, begin=(k * hidden,), end=((k + 1) * hidden,), axes=(axis,))
             for k in order]
    return node.call("concat", *parts, axis=axis)


@converter("ember.rnn.default")
def _rnn(node):
    mode = node.arg("mode")
    x, hx, params = node.tensor("input"), list(node.arg("hx")), list(node.arg("params"))
    layers, bidirectional, batch_first = node.arg("num_layers"), node.arg("bidirectional"), node.arg("batch_first")
    has_biases = node.arg("has_biases")
    dirs = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if len(params) != layers * dirs * per:
        raise UnsupportedOpError(f"{mode} with {len(params)} weights for {layers} layer(s) x {dirs} direction(s): "
                                 f"projections (LSTM proj_size) are not supported")
    hidden = hx[0].type.shape[-1]
    order = _GATE_ORDER[mode]
    acts = {"lstm": [SIGMOID, TANH, TANH], "gru": [SIGMOID, TANH], "rnn_tanh": [TANH], "rnn_relu": [RELU]}[mode]
    cell = Cell({"lstm": "LSTM", "gru": "GRU"}.get(mode, "RNN"), acts, hidden, linear_before_reset=True)
    if batch_first:
        x = node.call("transpose", x, axes=(1, 0, 2))  # (seq, batch, features)
    seq, batch = x.type.shape[0], x.type.shape[1]
    functions = node.importer.functions

    def stacked(parts, axis):  # (the directions' weights, one after the other along axis)
        return parts[0] if len(parts) == 1 else node.call("concat", *parts, axis=axis)

    def states(v, layer):
        return node.call("strided_slice", v, begin=(layer * dirs,), end=((layer + 1) * dirs,), axes=(0,))
    hs, cs = [], []
    for layer_ in range(layers):
        ks = [(layer_ * dirs + d) * per for d in range(dirs)]
        wt = stacked([_gates(node, node.call("transpose", params[k], axes=(1, 0)), order, hidden, 1) for k in ks], 1)
        rt = stacked([node.call("unsqueeze", _gates(node, node.call("transpose", params[k + 1], axes=(1, 0)), order,
                                                    hidden, 1), axes=(0,)) for k in ks], 0)
        wb = rb = None
        if has_biases:
            wb = stacked([_gates(node, params[k + 2], order, hidden, 0) for k in ks], 0)
            rb = stacked([node.call("unsqueeze", _gates(node, params[k + 3], order, hidden, 0), axes=(0,)) for k in ks], 0)
        h0 = states(hx[0], layer_)
        c0 = states(hx[1], layer_) if mode == "lstm" else None
        y, h, c = layer(node.call, functions, [cell] * dirs, x, wt, wb, rt, rb, h0, c0,
                        "bidirectional" if dirs == 2 else "forward")
        hs.append(h)
        if c is not None:
            cs.append(c)
        # (seq, dirs, batch, hidden) -> the next layer's (seq, batch, dirs * hidden)
        x = node.call("reshape", node.call("transpose", y, axes=(0, 2, 1, 3)) if dirs == 2 else y,
                      newshape=(seq, batch, dirs * hidden))
    out = node.call("transpose", x, axes=(1, 0, 2)) if batch_first else x
    h_n = hs[0] if len(hs) == 1 else node.call("concat", *hs, axis=0)
    result = [out, h_n]
    if mode == "lstm":
        result.append(cs[0] if len(cs) == 1 else node.call("concat", *cs, axis=0))
    return tuple(result)


__all__ = ["rnn_as_one_op"]
