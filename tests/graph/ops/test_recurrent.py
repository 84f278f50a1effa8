"""nn.recurrence: its kernel (a loop over the steps, ember.graph.ops.compute.recurrent) against a
numpy transcription of ONNX's RNN, GRU and LSTM equations; its type rule's errors."""
import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.frontend.recurrence import SIGMOID, TANH
from ember.graph import Function, Module, TensorType, Tuple, TupleGetItem, Var
from ember.graph.ir import Constant
from ember.graph.ops import call

RNG = np.random.default_rng(0)
G = {"RNN": 1, "GRU": 3, "LSTM": 4}
ACTS = {"RNN": (TANH,), "GRU": (SIGMOID, TANH), "LSTM": (SIGMOID, TANH, TANH)}
FNS = {"RNN": [np.tanh], "GRU": [lambda v: 1 / (1 + np.exp(-v)), np.tanh]}
FNS["LSTM"] = FNS["GRU"] + [np.tanh]
# a hard sigmoid spelled out, and a leaky ReLU: chains of elementwise ops, with numbers and attributes
ODD = ((("multiply", (), 0.2), ("add", (), 0.5), ("maximum", (), 0.0), ("minimum", (), 1.0)),
       (("nn.leaky_relu", (("alpha", 0.2),), None),))


def _reference(cell, xw, h, c, rt, rb, lbr, reverse, f, clip, lens=None):
    """One direction by ONNX's equations, step by step (``f``: numpy activations; xw includes the
    input bias; ``lens`` freeze a row past its length and zero its outputs there)."""
    seq, hid = xw.shape[0], rt.shape[0]
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    lens = np.full(xw.shape[1], seq) if lens is None else lens
    y = np.zeros((seq, xw.shape[1], hid), np.float32)
    for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
        hr = h @ rt + rb
        x = xw[t]
        if cell == "RNN":
            hn, cn = f[0](cl(x + hr)), None
        elif cell == "GRU":
            z = f[0](cl(x[:, :hid] + hr[:, :hid]))
            r = f[0](cl(x[:, hid:2 * hid] + hr[:, hid:2 * hid]))
            rh = r * hr[:, 2 * hid:] if lbr else (r * h) @ rt[:, 2 * hid:] + rb[2 * hid:]
            hn, cn = (1 - z) * f[1](cl(x[:, 2 * hid:] + rh)) + z * h, None
        else:
            p = x + hr
            i, o, fg = (f[0](cl(p[:, k * hid:(k + 1) * hid])) for k in range(3))
            cn = fg * c + i * f[1](cl(p[:, 3 * hid:]))
            hn = o * f[2](cn)
        live = (t < lens)[:, None]
        y[t] = np.where(live, hn, 0)
        h = np.where(live, hn, h)
        c = np.where(live, cn, c) if cn is not None else c
    return [y, h] + ([c] if cell == "LSTM" else [])


def _layer(cell, seq, batch, hid, direction="forward", lens=False, acts=None, fns=None, symbolic=False, panel=None,
           **attrs):
    """A random layer compiled, and a function running it and the reference on random inputs."""
    dirs = 2 if direction == "bidirectional" else 1
    gh = G[cell] * hid
    rt = (RNG.standard_normal((dirs, hid, gh)) / np.sqrt(hid)).astype(np.float32)
    rb = RNG.standard_normal((dirs, gh)).astype(np.float32)
    lstm = cell == "LSTM"
    s, b = ("seq", "batch") if symbolic else (seq, batch)
    vs = [Var("xw", TensorType((s, b, dirs * gh), "float32")), Var("h0", TensorType((dirs, b, hid), "float32"))]
    if lstm:
        vs.append(Var("c0", TensorType((dirs, b, hid), "float32")))
    if lens:
        vs.append(Var("lens", TensorType((b,), "int32")))
    # (``panel``: the weights in panels of that many columns, (dirs, gh / panel, hid, panel))
    rt_in = rt if panel is None else rt.reshape(dirs, hid, gh // panel, panel).transpose(0, 2, 1, 3).copy()
    args = vs[:2 + lstm] + [Constant(rt_in), Constant(rb)] + vs[2 + lstm:]
    r = call("nn.recurrence", *args, cell=cell, direction=direction, acts=(acts or ACTS[cell]) * dirs, **attrs)
    n = 3 if lstm else 2
    exe = ember.compile(Module({"main": Function(vs, Tuple([TupleGetItem(r, k) for k in range(n)]))}), wait=True)

    def check(seq=seq, batch=batch):
        xw = RNG.standard_normal((seq, batch, dirs * gh)).astype(np.float32)
        h0, c0 = (RNG.standard_normal((dirs, batch, hid)).astype(np.float32) for _ in range(2))
        ls = RNG.integers(0, seq + 1, batch).astype(np.int32) if lens else None
        got = exe.run(xw, h0, *([c0] if lstm else []), *([ls] if lens else []))
        parts = [_reference(cell, xw[:, :, d * gh:(d + 1) * gh], h0[d], c0[d], rt[d], rb[d],
                            attrs.get("linear_before_reset", False), direction == "reverse" or d == 1,
                            fns or FNS[cell], attrs.get("clip", 0.0), ls) for d in range(dirs)]
        want = [np.stack([p[0] for p in parts], 1)] + [np.stack([p[k] for p in parts]) for k in range(1, n)]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6)
    return check


CASES = [  # cell, seq, batch, hidden, attributes
    ("LSTM", 7, 1, 20, {}),
    ("LSTM", 9, 3, 128, dict(direction="reverse")),  # (512 columns: blocks of 128, 8 accumulators)
    ("GRU", 5, 3, 37, dict(linear_before_reset=True, direction="bidirectional")),  # (masked last block and vector)
    ("GRU", 6, 2, 16, dict(clip=1.5)),
    ("GRU", 4, 1, 70, dict(direction="bidirectional")),
    ("RNN", 4, 2, 130, dict(direction="reverse")),
    ("LSTM", 6, 3, 24, dict(lens=True)),
    ("GRU", 5, 4, 16, dict(lens=True)),
    ("LSTM", 3, 6, 20, {}),  # (tasks of 4 rows: the second has 2)
    ("GRU", 4, 9, 16, dict(direction="bidirectional")),
    ("LSTM", 5, 1, 64, dict(panel=32)),  # (the weights in panels)
    ("LSTM", 4, 6, 32, dict(panel=32, direction="bidirectional")),
    ("GRU", 5, 3, 32, dict(panel=32)),  # (its hidden gate's product from column 64: panels 2 on)
    ("GRU", 5, 1, 96, dict(panel=32, linear_before_reset=True)),
    # weights past 1 MB: each step's products and gates in parallel
    ("LSTM", 3, 2, 272, {}),
    ("GRU", 3, 1, 320, dict(panel=32)),  # (its second product, after the reset gate, in parallel too)
    ("RNN", 3, 2, 520, dict(direction="bidirectional", lens=False)),
]


@pytest.mark.parametrize("cell, seq, batch, hid, attrs", CASES)
def test_the_kernel_follows_the_onnx_equations(cell, seq, batch, hid, attrs):
    _layer(cell, seq, batch, hid, **attrs)()


def test_activations_are_chains_of_elementwise_ops():
    _layer("GRU", 5, 2, 24, acts=ODD, fns=[lambda v: np.clip(0.2 * v + 0.5, 0, 1), lambda v: np.where(v >= 0, v, 0.2 * v)],
           linear_before_reset=True)()


def test_a_symbolic_length_and_batch_take_any_size():
    check = _layer("LSTM", None, None, 12, direction="bidirectional", symbolic=True)
    for seq, batch in ((1, 1), (6, 3), (33, 2)):
        check(seq, batch)


def test_one_value_as_both_states():
    """An LSTM's h0 and c0 the same tensor: one parameter of its group, read as both."""
    hid = 8
    rt = (RNG.standard_normal((1, hid, 4 * hid)) / np.sqrt(hid)).astype(np.float32)
    rb = RNG.standard_normal((1, 4 * hid)).astype(np.float32)
    xw_v, s_v = Var("xw", TensorType((3, 2, 4 * hid), "float32")), Var("s", TensorType((1, 2, hid), "float32"))
    r = call("nn.recurrence", xw_v, s_v, s_v, Constant(rt), Constant(rb), cell="LSTM", acts=ACTS["LSTM"])
    exe = ember.compile(Module({"main": Function([xw_v, s_v], TupleGetItem(r, 0))}), wait=True)
    xw = RNG.standard_normal((3, 2, 4 * hid)).astype(np.float32)
    s = RNG.standard_normal((1, 2, hid)).astype(np.float32)
    want = _reference("LSTM", xw, s[0], s[0], rt[0], rb[0], False, False, FNS["LSTM"], 0.0)[0]
    np.testing.assert_allclose(exe.run(xw, s)[0][:, 0], want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("change, message", [
    (dict(cell="SRU"), "cell must be one of"),
    (dict(direction="sideways"), "direction must be one of"),
    (dict(acts=(SIGMOID,)), "has 2 activation"),
    (dict(acts=(SIGMOID, (("nn.conv2d", (), None),))), "cannot be an activation's step"),
    (dict(acts=(SIGMOID, (("add", (), None),))), "takes 2 argument"),
    (dict(rt=np.zeros((1, 8, 20), np.float32)), "needs rt (1, 8, 24)"),
    (dict(direction="bidirectional", acts=ACTS["GRU"] * 2), "rt must be static (2, hidden"),
    (dict(lens=np.zeros(1, np.float32)), "lengths are int32 or int64"),
])
def test_bad_calls_name_what_is_wrong(change, message):
    attrs = dict(cell="GRU", acts=ACTS["GRU"])
    rt = change.pop("rt", np.zeros((1, 8, 24), np.float32))
    lens = change.pop("lens", None)
    attrs.update(change)
    xw, h0 = Var("xw", TensorType((3, 1, 24), "float32")), Var("h0", TensorType((1, 1, 8), "float32"))
    extra = [Constant(lens)] if lens is not None else []
    with pytest.raises(EmberError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call("nn.recurrence", xw, h0, Constant(rt), Constant(np.zeros((1, 24), np.float32)), *extra, **attrs)
