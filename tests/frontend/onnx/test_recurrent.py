"""RNN, GRU and LSTM (one nn.recurrence op a layer; with peepholes, unrolled over a static length
and scanned over a symbolic one) on random
weights over their attributes: directions, layouts, activations, clip, linear_before_reset,
peepholes and sequence lengths. onnx's reference
evaluator ignores several of those (activations, clip, sequence_lens), so the oracle is a
numpy transcription of the ONNX operator spec; the node cases cover the reference's paths."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import ember
from ember.frontend.onnx import from_onnx

RNG = np.random.default_rng(0)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _model(op, seq, batch, inp, hidden, direction="forward", layout=0, lens=None, peep=False, symbolic=False,
           states=False, half=False, **attrs):
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    w = RNG.standard_normal((dirs, g * hidden, inp)).astype(np.float32) * 0.5
    r = RNG.standard_normal((dirs, g * hidden, hidden)).astype(np.float32) * 0.5
    b = RNG.standard_normal((dirs, 2 * g * hidden)).astype(np.float32) * 0.1
    inits = [numpy_helper.from_array(a, n) for a, n in ((w, "W"), (r, "R"), (b, "B"))]
    names = ["X", "W", "R", "B"]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.array(lens, np.int32), "L"))
        names.append("L")
    if states:  # initial h (and c): (dirs, batch, hidden), or with layout 1 (batch, dirs, hidden)
        names += [""] * (5 - len(names)) + ["H0"] + (["C0"] if op == "LSTM" else [])
        for n in ("H0", "C0")[:2 if op == "LSTM" else 1]:
            v = RNG.standard_normal((dirs, batch, hidden)).astype(np.float32)
            inits.append(numpy_helper.from_array(v.transpose(1, 0, 2).copy() if layout else v, n))
    if peep:
        names += ["", ""] if lens is not None else ["", "", ""]
        inits.append(numpy_helper.from_array(RNG.standard_normal((dirs, 3 * hidden)).astype(np.float32), "P"))
        names.append("P")
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = h.make_node(op, names, outs, hidden_size=hidden, direction=direction, layout=layout, **attrs)
    xshape = (batch, seq, inp) if layout else (seq, batch, inp)
    declared = tuple("seq" if d == seq and symbolic else d for d in xshape)
    if symbolic and lens is None and not states:
        declared = tuple("batch" if d == batch else d for d in declared)
    elem = T.FLOAT16 if half else T.FLOAT
    if half:  # (a float16 file: its weights and states too)
        inits = [numpy_helper.from_array(numpy_helper.to_array(i).astype(np.float16), i.name)
                 if i.data_type == T.FLOAT else i for i in inits]
    graph = h.make_graph([node], "r", [h.make_tensor_value_info("X", elem, declared)],
                         [h.make_tensor_value_info(o, elem, None) for o in outs], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 22)]), xshape


CASES = [
    ("RNN", dict(direction="bidirectional", activations=["Relu", "Tanh"])),
    ("RNN", dict(layout=1, lens=[3, 1])),
    ("GRU", dict(linear_before_reset=1, direction="reverse")),
    ("GRU", dict(activations=["HardSigmoid", "Tanh"], activation_alpha=[0.3], activation_beta=[0.4], clip=2.0)),
    ("LSTM", dict(peep=True, lens=[2, 3])),
    ("LSTM", dict(direction="bidirectional", layout=1)),
    ("LSTM", dict(direction="bidirectional", layout=1, states=True)),
    ("GRU", dict(states=True, linear_before_reset=1)),
    ("LSTM", dict(activations=["Sigmoid", "ScaledTanh", "Affine"], activation_alpha=[0.0, 1.5, 0.5],
                  activation_beta=[0.0, 0.7, -0.2], direction="reverse")),
]


ACTS = {"Tanh": np.tanh, "Sigmoid": lambda v: 1 / (1 + np.exp(-v)), "Relu": lambda v: np.maximum(v, 0)}


def _spec(model, x):
    """The ONNX spec of RNN/GRU/LSTM in numpy."""
    node = model.graph.node[0]
    a = {at.name: h.get_attribute_value(at) for at in node.attribute}
    w = {t.name: numpy_helper.to_array(t).astype(np.float32) if t.data_type == T.FLOAT16 else numpy_helper.to_array(t)
         for t in model.graph.initializer}
    op, hid = node.op_type, a["hidden_size"]
    direction = a.get("direction", b"forward").decode()
    dirs = 2 if direction == "bidirectional" else 1
    names = [n.decode() for n in a.get("activations", [])] or {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                                                                "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[op]
    alpha, beta = a.get("activation_alpha", []), a.get("activation_beta", [])

    def act(k):
        name = names[k % len(names)] if len(names) < (k + 1) else names[k]
        al, be = (alpha[k] if k < len(alpha) else None), (beta[k] if k < len(beta) else None)
        if name == "HardSigmoid":
            return lambda v: np.clip(al * v + be, 0, 1)
        if name == "ScaledTanh":
            return lambda v: al * np.tanh(be * v)
        if name == "Affine":
            return lambda v: al * v + be
        return ACTS[name]
    clip = a.get("clip")
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    if a.get("layout", 0):
        x = x.transpose(1, 0, 2)
    seq, batch = x.shape[:2]
    lens = w.get("L", np.full(batch, seq))
    ys, hs, cs = [], [], []
    n_act = len({"RNN": "t", "GRU": "st", "LSTM": "stt"}[op])
    for d in range(dirs):
        W, R, B = w["W"][d], w["R"][d], w["B"][d]
        g = W.shape[0] // hid
        wb, rb = B[:g * hid], B[g * hid:]
        f = [act(d * n_act + k) for k in range(n_act)]
        hcur, ccur = np.zeros((batch, hid), np.float32), np.zeros((batch, hid), np.float32)
        for n in ("H0", "C0"):
            if n in w:
                v = (w[n].transpose(1, 0, 2) if a.get("layout", 0) else w[n])[d]
                hcur, ccur = (v, ccur) if n == "H0" else (hcur, v)
        y = np.zeros((seq, batch, hid), np.float32)
        order = range(seq - 1, -1, -1) if direction == "reverse" or d == 1 else range(seq)
        for t in order:
            xw = x[t] @ W.T + wb
            hr = hcur @ R.T + rb
            sl = [slice(k * hid, (k + 1) * hid) for k in range(g)]
            if op == "RNN":
                hn, cn = f[0](cl(xw + hr)), None
            elif op == "GRU":
                z, r = f[0](cl(xw[:, sl[0]] + hr[:, sl[0]])), f[0](cl(xw[:, sl[1]] + hr[:, sl[1]]))
                if a.get("linear_before_reset", 0):
                    hh = f[1](cl(xw[:, sl[2]] + r * hr[:, sl[2]]))
                else:
                    hh = f[1](cl(xw[:, sl[2]] + (r * hcur) @ R[sl[2]].T + rb[sl[2]]))
                hn, cn = (1 - z) * hh + z * hcur, None
            else:
                p = w.get("P", np.zeros((dirs, 3 * hid), np.float32))[d]
                pre = xw + hr
                i = f[0](cl(pre[:, sl[0]] + p[:hid] * ccur))
                fg = f[0](cl(pre[:, sl[2]] + p[2 * hid:] * ccur))
                cn = fg * ccur + i * f[1](cl(pre[:, sl[3]]))
                o = f[0](cl(pre[:, sl[1]] + p[hid:2 * hid] * cn))
                hn = o * f[2](cn)
            live = (t < lens)[:, None]
            y[t] = np.where(live, hn, 0)
            hcur = np.where(live, hn, hcur)
            ccur = np.where(live, cn, ccur) if cn is not None else ccur
        ys.append(y[:, None])
        hs.append(hcur[None])
        cs.append(ccur[None])
    y, yh, yc = np.concatenate(ys, 1), np.concatenate(hs, 0), np.concatenate(cs, 0)
    if a.get("layout", 0):
        y, yh, yc = y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
    return [y, yh] + ([yc] if op == "LSTM" else [])


@pytest.mark.parametrize("op, kw", CASES)
def test_recurrent_layers_match_the_spec(op, kw):
    model, xshape = _model(op, 3, 2, 4, 5, **kw)
    x = RNG.standard_normal(xshape).astype(np.float32)
    want = _spec(model, x)
    got = ember.compile(model).run(x)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, kw", [("LSTM", dict(direction="bidirectional")), ("GRU", dict(states=True))])
def test_a_float16_layer_computes_in_float32(op, kw):
    model, xshape = _model(op, 6, 2, 4, 32, half=True, **kw)
    assert "nn.recurrence(" in str(from_onnx(model))
    x = RNG.standard_normal(xshape).astype(np.float16)
    got = ember.compile(model).run(x)
    for g, w in zip(got, _spec(model, x.astype(np.float32))):
        assert g.dtype == np.float16 and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float32), w, rtol=1e-2, atol=2e-3)


@pytest.mark.parametrize("op, kw", CASES)
def test_recurrent_layers_over_a_symbolic_length_scan(op, kw):
    """One compile serves every length (and batch, where no lengths fix it), a plain layer's
    steps a loop in one op's kernel, the others' a scanned function: not a copy per position."""
    model, _ = _model(op, 3, 2, 4, 5, symbolic=True, **kw)
    assert ("scan(" if "peep" in kw else "nn.recurrence(") in str(from_onnx(model))
    exe = ember.compile(model)
    for seq, batch in ((3, 2), (1, 2), (9, 2 if "lens" in kw or "states" in kw else 3)):
        xshape = (batch, seq, 4) if kw.get("layout") else (seq, batch, 4)
        x = RNG.standard_normal(xshape).astype(np.float32)
        got = exe.run(x)
        want = _spec(model, x)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
