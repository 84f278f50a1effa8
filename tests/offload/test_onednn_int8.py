"""The oneDNN backend's quantized convolutions: a QDQ model's integer conv groups on oneDNN's
int8 primitive (its JIT code, channels last), against Ember's own integer kernels."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import ember
from ember.offload.onednn import _unavailable
from ember.target import Target

_FEATURES = Target.host().feature_set
pytestmark = [pytest.mark.skipif(_unavailable() is not None, reason=f"oneDNN: {_unavailable()}"),
              pytest.mark.skipif(not {"avx512vnni", "avxvnni", "avx2"} & _FEATURES,
                                 reason="Ember's integer convs (what oneDNN takes) need VNNI or AVX2 on the host")]
RNG = np.random.default_rng(11)
# The weights' range: full with VNNI (dot_u8i8x4); 7-bit without (an AVX2 host's pmaddubsw,
# dot_u8i7x4, exact for them, as ORT's reduce_range advises there; full-range weights run
# Ember's int16 pairs, which oneDNN does not take)
W = 127 if {"avx512vnni", "avxvnni"} & _FEATURES else 63


def _qdq_model(batch, C=3):
    """A stem with ReLU (float: Ember quantizes its result), a quantized 1x1 conv with a bias,
    and a quantized 3x3 conv padded at its data's zero point (131: oneDNN's source zero point)
    writing float, as ORT's quantize_static writes them (per-channel int8 weights)."""
    F1, F2 = 32, 48
    s = {"sx": 0.03, "s1": 0.05, "s2": 0.07}
    inits = {"zx": np.array(120, np.uint8), "z1": np.array(0, np.uint8), "z2": np.array(131, np.uint8)}
    inits.update({k: np.array(v, np.float32) for k, v in s.items()})
    for name, shape in (("w1", (F1, C, 3, 3)), ("w2", (F2, F1, 1, 1)), ("w3", (F1, F2, 3, 3))):
        inits[name] = RNG.integers(-W, W + 1, shape).astype(np.int8)
        inits[name + "s"] = (RNG.random(shape[0]) * 0.004 + 0.001).astype(np.float32)
        inits[name + "z"] = np.zeros(shape[0], np.int8)
    inits["b2"] = (RNG.standard_normal(F2) * 0.5).astype(np.float32)
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"])]
    for w in ("w1", "w2", "w3"):
        nodes.append(h.make_node("DequantizeLinear", [w, w + "s", w + "z"], [w + "d"], axis=0))
    nodes += [h.make_node("Conv", ["xd", "w1d"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
              h.make_node("Relu", ["c1"], ["r1"]),
              h.make_node("QuantizeLinear", ["r1", "s1", "z1"], ["q1"]),
              h.make_node("DequantizeLinear", ["q1", "s1", "z1"], ["d1"]),
              h.make_node("Conv", ["d1", "w2d", "b2"], ["c2"]),
              h.make_node("QuantizeLinear", ["c2", "s2", "z2"], ["q2"]),
              h.make_node("DequantizeLinear", ["q2", "s2", "z2"], ["d2"]),
              h.make_node("Conv", ["d2", "w3d"], ["y"], pads=[1, 1, 1, 1])]
    g = h.make_graph(nodes, "qdq", [h.make_tensor_value_info("x", TP.FLOAT, [batch, C, 20, 20])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)], [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


@pytest.mark.parametrize("batch", [1, "N"])
def test_quantized_convolutions_run_on_onednn_int8_and_match_embers(batch, capfd, monkeypatch):
    m = _qdq_model(batch)
    own = ember.compile(m, wait=True, cache=False)
    monkeypatch.setenv("EMBER_DNNL_VERBOSE", "1")
    off = ember.compile(m, wait=True, cache=False, offload=["onednn"])
    taken = [e for e in off.module.metadata["kernels"] if e.get("backend") == "onednn"]
    # (the 1x1 with its bias; the padded 3x3 writing float)
    assert len(taken) == 2 and all("conv2d_nchwc" in e["name"] for e in taken), [e["name"] for e in taken]
    # channels last: one block of all the channels (oneDNN's int8 JIT code reads nhwc)
    assert all(e["params"][0]["shape"][1] == 1 for e in taken), [e["params"][0] for e in taken]
    capfd.readouterr()
    for n in ((1,) if batch == 1 else (1, 3, 2)):
        x = RNG.standard_normal((n, 3, 20, 20)).astype(np.float32)
        want = own.run(x)[0]
        # (the same codes but where a value lies within a float rounding of a half: one code
        # of the last requantization, times its weights, at most)
        np.testing.assert_allclose(off.run(x)[0], want, rtol=0, atol=0.07 * 0.005 * W * 48 * 9)
        assert np.mean(np.isclose(off.run(x)[0], want, rtol=1e-5, atol=1e-5)) > 0.99
    made = [line for line in capfd.readouterr().err.splitlines() if "ember onednn" in line]
    assert len(made) == 2 * (1 if batch == 1 else 3) and "ref" not in "".join(made), made


def test_convs_oneDNN_does_not_take_keep_embers_blocks():
    """On an AVX2 CPU (code for a Zen 3) full-range weights run Ember's int16 pairs, which
    oneDNN has no kernel for: those convs stay Ember's, in its blocks, not laid channels last
    for a backend that does not take them (they ran 2.5x slower so: QDQ ResNet-50, Zen 3)."""
    m = _qdq_model(1)
    for init in m.graph.initializer:
        if init.name in ("w2", "w3"):
            init.CopyFrom(nh.from_array(np.where(nh.to_array(init) >= 0, 127, -128).astype(np.int8), init.name))
    own = ember.compile(m, wait=True, cache=False, target="llvm -mcpu=znver3")
    off = ember.compile(m, wait=True, cache=False, target="llvm -mcpu=znver3", offload=["onednn"])
    assert not [e for e in off.module.metadata["kernels"] if e.get("backend") == "onednn"]
    convs = [e for e in off.module.metadata["kernels"] if "conv2d_nchwc" in e["name"]]
    assert convs and all(e["params"][0]["shape"][1] > 1 for e in convs), [e["params"][0] for e in convs]
    x = RNG.standard_normal((1, 3, 20, 20)).astype(np.float32)
    np.testing.assert_array_equal(off.run(x)[0], own.run(x)[0])


def _chain(F=32):
    """Three quantized 1x1 convs of one shape (one kernel) with other weights, scales and zero
    points, the last dequantized."""
    inits = {"sx": np.array(0.03, np.float32), "zx": np.array(128, np.uint8)}
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["q0"])]
    prev = "q0"
    for i, (s, z) in enumerate(((0.05, 3), (0.02, 200), (0.04, 90))):
        inits[f"s{i}"], inits[f"z{i}"] = np.array(s, np.float32), np.array(z, np.uint8)
        inits[f"w{i}"] = RNG.integers(-W, W + 1, (F, F, 1, 1)).astype(np.int8)
        inits[f"w{i}s"] = (RNG.random(F) * 0.004 + 0.001).astype(np.float32)
        inits[f"w{i}z"] = np.zeros(F, np.int8)
        sp, zp = ("sx", "zx") if i == 0 else (f"s{i - 1}", f"z{i - 1}")
        nodes += [h.make_node("DequantizeLinear", [prev, sp, zp], [f"d{i}"]),
                  h.make_node("DequantizeLinear", [f"w{i}", f"w{i}s", f"w{i}z"], [f"wd{i}"], axis=0),
                  h.make_node("Conv", [f"d{i}", f"wd{i}"], [f"c{i}"]),
                  h.make_node("QuantizeLinear", [f"c{i}", f"s{i}", f"z{i}"], [f"q{i + 1}"])]
        prev = f"q{i + 1}"
    nodes.append(h.make_node("DequantizeLinear", [prev, "s2", "z2"], ["y"]))
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", TP.FLOAT, [1, F, 9, 9])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)], [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


def test_a_kernel_shared_by_convs_of_other_scales_gets_a_primitive_for_each():
    """Each call finds the primitive made from its own values."""
    F = 32
    m = _chain(F)
    own = ember.compile(m, wait=True, cache=False)
    off = ember.compile(m, wait=True, cache=False, offload=["onednn"])
    taken = {e["name"] for e in off.module.metadata["kernels"] if e.get("backend") == "onednn"}
    assert taken, "no conv on oneDNN"
    x = RNG.standard_normal((1, F, 9, 9)).astype(np.float32)
    got, want = off.run(x)[0], own.run(x)[0]
    assert np.mean(np.abs(got - want) <= 1e-6) > 0.99 and np.abs(got - want).max() <= 0.04 + 1e-6, taken


def _qdq_mlp(batch):
    """Two quantized Linear layers as ORT's quantize_static writes a transformer's (per-column
    int8 weights, a bias, a ReLU between), the second dequantized to float."""
    K, N1, N2 = 64, 96, 32
    inits = {"sx": np.array(0.05, np.float32), "zx": np.array(125, np.uint8),
             "s1": np.array(0.08, np.float32), "z1": np.array(0, np.uint8),
             "s2": np.array(0.1, np.float32), "z2": np.array(140, np.uint8),
             "b1": (RNG.standard_normal(N1) * 0.3).astype(np.float32)}
    for name, (k, n) in (("w1", (K, N1)), ("w2", (N1, N2))):
        inits[name] = RNG.integers(-W, W + 1, (k, n)).astype(np.int8)
        inits[name + "s"] = (RNG.random(n) * 0.004 + 0.001).astype(np.float32)
        inits[name + "z"] = np.zeros(n, np.int8)
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w1", "w1s", "w1z"], ["w1d"], axis=1),
             h.make_node("DequantizeLinear", ["w2", "w2s", "w2z"], ["w2d"], axis=1),
             h.make_node("MatMul", ["xd", "w1d"], ["m1"]), h.make_node("Add", ["m1", "b1"], ["a1"]),
             h.make_node("Relu", ["a1"], ["r1"]),
             h.make_node("QuantizeLinear", ["r1", "s1", "z1"], ["q1"]),
             h.make_node("DequantizeLinear", ["q1", "s1", "z1"], ["d1"]),
             h.make_node("MatMul", ["d1", "w2d"], ["m2"]),
             h.make_node("QuantizeLinear", ["m2", "s2", "z2"], ["q2"]),
             h.make_node("DequantizeLinear", ["q2", "s2", "z2"], ["y"])]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", TP.FLOAT, [batch, 16, K])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)], [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


@pytest.mark.parametrize("batch", [2, "N"])
def test_quantized_products_by_weights_run_on_onednn_int8_matmul(batch, capfd, monkeypatch):
    m = _qdq_mlp(batch)
    own = ember.compile(m, wait=True, cache=False)
    monkeypatch.setenv("EMBER_DNNL_VERBOSE", "1")
    off = ember.compile(m, wait=True, cache=False, offload=["onednn"])
    taken = [e["name"] for e in off.module.metadata["kernels"] if e.get("backend") == "onednn"]
    assert len(taken) == 2 and all("matmul_packed" in n for n in taken), taken
    capfd.readouterr()
    for n in ((2,) if batch == 2 else (1, 3)):
        x = RNG.standard_normal((n, 16, 64)).astype(np.float32)
        got, want = off.run(x)[0], own.run(x)[0]
        # (the same codes but where a value lies within a float rounding of a half)
        assert np.mean(got == want) > 0.99 and np.abs(got - want).max() <= 0.1 + 1e-6
    made = [line for line in capfd.readouterr().err.splitlines() if "ember onednn" in line]
    assert len(made) == 2 * (1 if batch == 2 else 2) and "ref" not in "".join(made), made
