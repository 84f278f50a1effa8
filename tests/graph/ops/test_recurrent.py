"""nn.recurrence: its kernel (a loop over the steps, ember.graph.ops.compute.recurrent) against a
numpy transcription of ONNX's RNN, GRU and LSTM equations; its type rule's errors."""
import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.graph import Function, Module, TensorType, Tuple, TupleGetItem, Var
from ember.graph.ir import Constant
from ember.graph.ops import call
from ember.frontend.recurrence import SIGMOID, TANH

RNG = np.random.default_rng(0)
G = {"RNN": 1, "GRU": 3, "LSTM": 4}
ACTS = {"RNN": (TANH,), "GRU": (SIGMOID, TANH), "LSTM": (SIGMOID, TANH, TANH)}
# a hard sigmoid spelled out, and a leaky ReLU: chains of elementwise ops, with numbers and attributes
ODD = ((("multiply", (), 0.2), ("add", (), 0.5), ("maximum", (), 0.0), ("minimum", (), 1.0)),
       (("nn.leaky_relu", (("alpha", 0.2),), None),))


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _reference(cell, xw, h, c, rt, rb, lbr, reverse, acts, clip):
    """ONNX's equations, step by step (``acts``: numpy functions; xw includes the input bias)."""
    seq, hid = xw.shape[0], rt.shape[0]
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    f = acts
    y = np.zeros((seq, xw.shape[1], hid), np.float32)
    for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
        hr = h @ rt + rb
        x = xw[t]
        if cell == "RNN":
            h = f[0](cl(x + hr))
        elif cell == "GRU":
            z = f[0](cl(x[:, :hid] + hr[:, :hid]))
            r = f[0](cl(x[:, hid:2 * hid] + hr[:, hid:2 * hid]))
            rh = r * hr[:, 2 * hid:] if lbr else (r * h) @ rt[:, 2 * hid:] + rb[2 * hid:]
            h = (1 - z) * f[1](cl(x[:, 2 * hid:] + rh)) + z * h
        else:
            p = x + hr
            i, o, fg = (f[0](cl(p[:, k * hid:(k + 1) * hid])) for k in range(3))
            c = fg * c + i * f[1](cl(p[:, 3 * hid:]))
            h = o * f[2](c)
        y[t] = h
    return [y, h] + ([c] if cell == "LSTM" else [])


def _compile(cell, shapes, rt, rb, **attrs):
    names = ["xw", "h0"] + (["c0"] if cell == "LSTM" else [])
    vs = [Var(n, TensorType(s, "float32")) for n, s in zip(names, shapes)]
    r = call("nn.recurrence", *vs, Constant(rt), Constant(rb), cell=cell, **attrs)
    n = 3 if cell == "LSTM" else 2
    mod = Module({"main": Function(vs, Tuple([TupleGetItem(r, k) for k in range(n)]))})
    return ember.compile(mod, wait=True)


CASES = [  # cell, seq, batch, hidden, linear_before_reset, reverse, clip
    ("LSTM", 7, 1, 20, False, False, 0.0),
    ("LSTM", 9, 3, 128, False, True, 0.0),  # (512 columns: blocks of 128, 8 accumulators)
    ("GRU", 5, 3, 37, True, True, 0.0),  # (111 columns: a masked last block, a masked last vector of units)
    ("GRU", 6, 2, 16, False, False, 1.5),
    ("GRU", 4, 1, 70, False, True, 0.0),
    ("RNN", 4, 2, 130, False, True, 0.0),
]


@pytest.mark.parametrize("cell, seq, batch, hid, lbr, reverse, clip", CASES)
def test_the_kernel_follows_the_onnx_equations(cell, seq, batch, hid, lbr, reverse, clip):
    gh = G[cell] * hid
    xw = RNG.standard_normal((seq, batch, gh)).astype(np.float32)
    h0 = RNG.standard_normal((batch, hid)).astype(np.float32)
    c0 = RNG.standard_normal((batch, hid)).astype(np.float32)
    rt = (RNG.standard_normal((hid, gh)) / np.sqrt(hid)).astype(np.float32)
    rb = RNG.standard_normal(gh).astype(np.float32)
    lstm = cell == "LSTM"
    exe = _compile(cell, [xw.shape, h0.shape] + ([c0.shape] if lstm else []), rt, rb, acts=ACTS[cell],
                   linear_before_reset=lbr, reverse=reverse, clip=clip)
    got = exe.run(xw, h0, *([c0] if lstm else []))
    fns = {"RNN": [np.tanh], "GRU": [_sig, np.tanh], "LSTM": [_sig, np.tanh, np.tanh]}[cell]
    want = _reference(cell, xw, h0, c0 if lstm else None, rt, rb, lbr, reverse, fns, clip)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6)


def test_activations_are_chains_of_elementwise_ops():
    hid, seq = 24, 5
    xw = RNG.standard_normal((seq, 2, 3 * hid)).astype(np.float32)
    h0 = RNG.standard_normal((2, hid)).astype(np.float32)
    rt = (RNG.standard_normal((hid, 3 * hid)) / np.sqrt(hid)).astype(np.float32)
    rb = RNG.standard_normal(3 * hid).astype(np.float32)
    exe = _compile("GRU", [xw.shape, h0.shape], rt, rb, acts=ODD, linear_before_reset=True)
    fns = [lambda v: np.clip(0.2 * v + 0.5, 0, 1), lambda v: np.where(v >= 0, v, 0.2 * v)]
    want = _reference("GRU", xw, h0, None, rt, rb, True, False, fns, 0.0)
    for g, w in zip(exe.run(xw, h0), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6)


def test_a_symbolic_length_and_batch_take_any_size():
    hid = 12
    rt = (RNG.standard_normal((hid, 4 * hid)) / np.sqrt(hid)).astype(np.float32)
    rb = RNG.standard_normal(4 * hid).astype(np.float32)
    exe = _compile("LSTM", [("seq", "batch", 4 * hid), ("batch", hid), ("batch", hid)], rt, rb, acts=ACTS["LSTM"])
    for seq, batch in ((1, 1), (6, 3), (33, 2)):
        xw = RNG.standard_normal((seq, batch, 4 * hid)).astype(np.float32)
        h0, c0 = (RNG.standard_normal((batch, hid)).astype(np.float32) for _ in range(2))
        want = _reference("LSTM", xw, h0, c0, rt, rb, False, False, [_sig, np.tanh, np.tanh], 0.0)
        for g, w in zip(exe.run(xw, h0, c0), want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6)


def test_one_value_as_both_states():
    """An LSTM's h0 and c0 the same tensor: one parameter of its group, read as both."""
    hid = 8
    rt = (RNG.standard_normal((hid, 4 * hid)) / np.sqrt(hid)).astype(np.float32)
    rb = RNG.standard_normal(4 * hid).astype(np.float32)
    xw_v, s_v = Var("xw", TensorType((3, 2, 4 * hid), "float32")), Var("s", TensorType((2, hid), "float32"))
    r = call("nn.recurrence", xw_v, s_v, s_v, Constant(rt), Constant(rb), cell="LSTM", acts=ACTS["LSTM"])
    exe = ember.compile(Module({"main": Function([xw_v, s_v], TupleGetItem(r, 0))}), wait=True)
    xw = RNG.standard_normal((3, 2, 4 * hid)).astype(np.float32)
    s = RNG.standard_normal((2, hid)).astype(np.float32)
    want = _reference("LSTM", xw, s, s, rt, rb, False, False, [_sig, np.tanh, np.tanh], 0.0)[0]
    np.testing.assert_allclose(exe.run(xw, s)[0], want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("change, message", [
    (dict(cell="SRU"), "cell must be one of"),
    (dict(acts=(SIGMOID,)), "has 2 activation"),
    (dict(acts=(SIGMOID, (("nn.conv2d", (), None),))), "cannot be an activation's step"),
    (dict(acts=(SIGMOID, (("add", (), None),))), "takes 2 argument"),
    (dict(rt=np.zeros((8, 20), np.float32)), "needs rt (8, 24)"),
])
def test_bad_calls_name_what_is_wrong(change, message):
    attrs = dict(cell="GRU", acts=ACTS["GRU"])
    rt = change.pop("rt", np.zeros((8, 24), np.float32))
    attrs.update(change)
    xw, h0 = Var("xw", TensorType((3, 1, 24), "float32")), Var("h0", TensorType((1, 8), "float32"))
    with pytest.raises(EmberError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call("nn.recurrence", xw, h0, Constant(rt), Constant(np.zeros(24, np.float32)), **attrs)
