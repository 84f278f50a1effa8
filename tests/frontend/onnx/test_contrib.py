"""ONNX Runtime's contrib ops (com.microsoft), as its transformer optimizer writes them, against
ONNX Runtime itself (issue 46)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ember

ort = pytest.importorskip("onnxruntime")

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64


def contrib_model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "contrib", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])


def ms(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain="com.microsoft", name=f"{op}_0", **attrs)


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def both(m, feeds, atol=1e-5):
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ember.compile(m).run(**feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol)


rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("op,n_in,attrs", [("Gelu", 1, {}), ("BiasGelu", 2, {}), ("FastGelu", 2, {}),
                                            ("FastGelu", 1, {}), ("QuickGelu", 1, {"alpha": 1.5})])
def test_activations(op, n_in, attrs):
    shapes = [(2, 3, 8), (8,), (2, 3, 8)][:n_in]
    names = ["x", "bias", "skip"][:n_in]
    m = contrib_model([ms(op, names, ["y"], **attrs)], [vi(n, s) for n, s in zip(names, shapes)], [vi("y", None)])
    both(m, {n: rand(*s) for n, s in zip(names, shapes)})


def test_bias_add_against_numpy():  # (ONNX Runtime has it on CUDA only)
    m = contrib_model([ms("BiasAdd", ["x", "bias", "skip"], ["y"])], [vi("x", [2, 3, 8]), vi("bias", [8]),
                                                                    vi("skip", [2, 3, 8])], [vi("y", None)])
    x, bias, skip = rand(2, 3, 8), rand(8), rand(2, 3, 8)
    np.testing.assert_allclose(ember.compile(m).run(x, bias, skip)[0], x + bias + skip, rtol=1e-6)


@pytest.mark.parametrize("simplified", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_skip_layer_norms_with_every_output(simplified, with_bias):
    op = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
    h = 16
    inits = [numpy_helper.from_array(rand(h) + 1, "gamma")]
    ins = ["x", "skip", "gamma"]
    if not simplified:
        inits.append(numpy_helper.from_array(rand(h), "beta"))
        ins.append("beta")
    if with_bias:
        inits.append(numpy_helper.from_array(rand(h), "bias"))
        ins.append("bias")
    outs = ["y", "", "", "sum"] if simplified else ["y", "mean", "inv", "sum"]
    m = contrib_model([ms(op, ins, outs, epsilon=1e-5)], [vi("x", [2, "s", h]), vi("skip", [2, "s", h])],
                      [vi(o, None) for o in outs if o], inits)
    both(m, {"x": rand(2, 5, h), "skip": rand(2, 5, h)})


def test_simplified_layer_norm_in_the_onnx_domain():
    m = contrib_model([helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], axis=-1, epsilon=1e-6)],
                      [vi("x", [3, 16])], [vi("y", None)], [numpy_helper.from_array(rand(16), "g")])
    both(m, {"x": rand(3, 16)})


def test_embed_layer_norm_with_segments_and_a_mask():
    v, p, h = 30, 16, 8
    inits = [numpy_helper.from_array(rand(*s), n) for n, s in
             [("word", (v, h)), ("pos", (p, h)), ("seg", (2, h)), ("gamma", (h,)), ("beta", (h,))]]
    node = ms("EmbedLayerNormalization", ["ids", "segs", "word", "pos", "seg", "gamma", "beta", "mask"],
              ["y", "mask_index", "sum"], epsilon=1e-12)
    m = contrib_model([node], [vi("ids", [2, 6], I32), vi("segs", [2, 6], I32), vi("mask", [2, 6], I32)],
                      [vi("y", None), vi("mask_index", None, I32), vi("sum", None)], inits)
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], np.int32)
    both(m, {"ids": rng.integers(0, v, (2, 6)).astype(np.int32), "segs": rng.integers(0, 2, (2, 6)).astype(np.int32),
             "mask": mask})


@pytest.mark.parametrize("mask", [None, "lengths", "raw", "raw3"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_fused_attention_with_masks_and_causality(mask, unidirectional):
    b, s, h, heads = 2, 5, 16, 4
    inits = [numpy_helper.from_array(rand(h, 3 * h) * 0.3, "w"), numpy_helper.from_array(rand(3 * h), "bias")]
    ins, feeds, inputs = ["x", "w", "bias"], {"x": rand(b, s, h)}, [vi("x", [b, s, h])]
    if mask == "lengths":
        feeds["m"] = np.array([3, 5], np.int32)
    elif mask == "raw":
        feeds["m"] = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    elif mask == "raw3":
        feeds["m"] = (rng.random((b, s, s)) > 0.3).astype(np.int32)
        feeds["m"][..., 0] = 1
    if mask:
        ins.append("m")
        inputs.append(vi("m", list(feeds["m"].shape), I32))
    m = contrib_model([ms("Attention", ins, ["y"], num_heads=heads, unidirectional=unidirectional)], inputs,
                      [vi("y", None)], inits)
    both(m, feeds)


def test_fused_attention_with_a_past_and_its_present():
    b, s, past, h, heads = 1, 2, 3, 8, 2
    inits = [numpy_helper.from_array(rand(h, 3 * h) * 0.3, "w"), numpy_helper.from_array(rand(3 * h), "bias")]
    node = ms("Attention", ["x", "w", "bias", "m", "past"], ["y", "present"], num_heads=heads, unidirectional=1)
    m = contrib_model([node], [vi("x", [b, s, h]), vi("m", [b, past + s], I32), vi("past", [2, b, heads, past, h // heads])],
                      [vi("y", None), vi("present", None)], inits)
    both(m, {"x": rand(b, s, h), "m": np.ones((b, past + s), np.int32), "past": rand(2, b, heads, past, h // heads)})


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(interleaved):
    b, s, heads, d = 1, 4, 2, 8
    inits = [numpy_helper.from_array(rand(16, d // 2), "cos"), numpy_helper.from_array(rand(16, d // 2), "sin")]
    node = ms("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], interleaved=interleaved, num_heads=heads)
    m = contrib_model([node], [vi("x", [b, s, heads * d]), vi("pos", [b, s], I64)], [vi("y", None)], inits)
    both(m, {"x": rand(b, s, heads * d), "pos": np.array([[3, 4, 5, 6]], np.int64)})


def test_an_unknown_contrib_op_is_named_with_its_domain():
    m = contrib_model([ms("NoSuchOp", ["x"], ["y"])], [vi("x", [2])], [vi("y", None)])
    with pytest.raises(ember.errors.UnsupportedOpError, match="com.microsoft.NoSuchOp"):
        ember.compile(m)


def _nbits_model(k, n, bits, block, zp, bias, rng):
    """MatMulNBits built by hand: B (n, blocks, block*bits/8) uint8, scales, zero points."""
    blocks = -(-k // block)
    q = rng.integers(0, 1 << bits, (n, blocks, block)).astype(np.uint8)
    per = 8 // bits
    packed = np.zeros((n, blocks, block // per), np.uint8)
    for j in range(per):
        packed |= (q[..., j::per] << (j * bits)).astype(np.uint8)
    inits = [numpy_helper.from_array(packed, "B"), numpy_helper.from_array(rng.random(n * blocks).astype(np.float32) * 0.1, "s")]
    ins = ["A", "B", "s"]
    if zp == "packed":
        zq = rng.integers(0, 1 << bits, (n, -(-(blocks * bits) // 8) * per)).astype(np.uint8)
        zpk = np.zeros((n, zq.shape[1] // per), np.uint8)
        for j in range(per):
            zpk |= (zq[:, j::per] << (j * bits)).astype(np.uint8)
        inits.append(numpy_helper.from_array(zpk.reshape(-1), "zp"))
    elif zp == "float":
        inits.append(numpy_helper.from_array(rng.random(n * blocks).astype(np.float32) * 8, "zp"))
    ins.append("zp" if zp else "")
    if bias:
        inits.append(numpy_helper.from_array(rng.random(n).astype(np.float32), "bias"))
        ins += ["", "bias"]
    node = ms("MatMulNBits", ins, ["y"], K=k, N=n, bits=bits, block_size=block)
    return contrib_model([node], [vi("A", ["batch", 3, k])], [vi("y", None)], inits)


@pytest.mark.parametrize("bits,block,k,zp,bias", [(4, 32, 64, None, False), (4, 16, 40, "packed", True),
                                                  (8, 16, 48, "packed", False), (4, 32, 64, "float", False),
                                                  (2, 16, 32, None, True)])
def test_matmul_nbits(bits, block, k, zp, bias):
    rng = np.random.default_rng(bits * 100 + k)
    m = _nbits_model(k, 24, bits, block, zp, bias, rng)
    try:
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # (an ONNX Runtime without this variant)
        pytest.skip(f"ONNX Runtime cannot run it: {e}")
    both(m, {"A": rand(2, 3, k)}, atol=1e-4)


@pytest.mark.parametrize("mask,bias,past,causal", [(None, False, False, 0), ("raw", True, False, 0),
                                                   ("lengths", True, True, 1), (None, False, True, 1)])
def test_multi_head_attention(mask, bias, past, causal):
    b, s, skv, h, heads, p = 2, 3, 4, 16, 4, 2
    if past:
        skv = s
    ins, feeds = ["q", "k", "v"], {"q": rand(b, s, h), "k": rand(b, skv, h), "v": rand(b, skv, h)}
    inputs = [vi(n, list(feeds[n].shape)) for n in ins]
    inits = []
    ins.append("bias" if bias else "")
    if bias:
        inits.append(numpy_helper.from_array(rand(3 * h), "bias"))
    total = skv + (p if past else 0)
    if mask == "raw":
        feeds["m"] = np.array([[1] * total, [1] * (total - 2) + [0, 0]], np.int32)
    elif mask == "lengths":
        feeds["m"] = np.array([total, total - 1], np.int32)
    ins.append("m" if mask else "")
    if mask:
        inputs.append(vi("m", list(feeds["m"].shape), I32))
    ins.append("")  # (no attention bias)
    outs = ["y"]
    if past:
        ins += ["pk", "pv"]
        feeds.update(pk=rand(b, heads, p, h // heads), pv=rand(b, heads, p, h // heads))
        inputs += [vi("pk", [b, heads, p, h // heads]), vi("pv", [b, heads, p, h // heads])]
        outs += ["present_k", "present_v"]
    node = ms("MultiHeadAttention", ins, outs, num_heads=heads, unidirectional=causal)
    m = contrib_model([node], inputs, [vi(o, None) for o in outs], inits)
    try:
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # (an ONNX Runtime without this variant on CPU)
        pytest.skip(f"ONNX Runtime cannot run it: {e}")
    both(m, feeds)


@pytest.mark.parametrize("past,rotary,packed,window", [(0, 0, False, -1), (3, 0, False, -1), (3, 1, False, -1),
                                                       (2, 1, True, -1), (4, 0, False, 2)])
def test_group_query_attention(past, rotary, packed, window):
    b, s, heads, kv, d = 1, 3, 4, 2, 16  # (ONNX Runtime's rotary wants heads of a multiple of 16)
    feeds = {"q": rand(b, s, heads * d), "k": rand(b, s, kv * d), "v": rand(b, s, kv * d)}
    if packed:
        feeds = {"q": np.concatenate([feeds["q"], feeds["k"], feeds["v"]], axis=-1)}
    ins = ["q", "k" if not packed else "", "v" if not packed else ""]
    inputs = [vi(n, list(feeds[n].shape)) for n in feeds]
    if past:
        feeds.update(pk=rand(b, kv, past, d), pv=rand(b, kv, past, d))
        inputs += [vi("pk", [b, kv, past, d]), vi("pv", [b, kv, past, d])]
        ins += ["pk", "pv"]
    else:
        ins += ["", ""]
    feeds["seqlens"] = np.array([past + s - 1] * b, np.int32)
    feeds["total"] = np.array(past + s, np.int32)
    inputs += [vi("seqlens", [b], I32), vi("total", [], I32)]
    ins += ["seqlens", "total"]
    inits = []
    if rotary:
        inits = [numpy_helper.from_array(rand(32, d // 2), "cos"), numpy_helper.from_array(rand(32, d // 2), "sin")]
        ins += ["cos", "sin"]
    node = ms("GroupQueryAttention", ins, ["y", "present_k", "present_v"], num_heads=heads, kv_num_heads=kv,
              do_rotary=rotary, local_window_size=window)
    m = contrib_model([node], inputs, [vi(o, None) for o in ("y", "present_k", "present_v")], inits)
    try:
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # (an ONNX Runtime without this variant on CPU)
        pytest.skip(f"ONNX Runtime cannot run it: {e}")
    both(m, feeds, atol=1e-4)


def test_group_query_attention_over_a_symbolic_past_with_rotary():
    """As exported for generation: past and sequence lengths symbolic; one executable at two."""
    b, heads, kv, d = 1, 4, 2, 16
    inits = [numpy_helper.from_array(rand(64, d // 2), "cos"), numpy_helper.from_array(rand(64, d // 2), "sin")]
    node = ms("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seqlens", "total", "cos", "sin"],
              ["y", "present_k", "present_v"], num_heads=heads, kv_num_heads=kv, do_rotary=1)
    m = contrib_model([node], [vi("q", [b, "s", heads * d]), vi("k", [b, "s", kv * d]), vi("v", [b, "s", kv * d]),
                               vi("pk", [b, kv, "past", d]), vi("pv", [b, kv, "past", d]), vi("seqlens", [b], I32),
                               vi("total", [], I32)], [vi(o, None) for o in ("y", "present_k", "present_v")], inits)
    exe = ember.compile(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for past, s in [(0, 5), (5, 1)]:
        feeds = {"q": rand(b, s, heads * d), "k": rand(b, s, kv * d), "v": rand(b, s, kv * d),
                 "pk": rand(b, kv, past, d), "pv": rand(b, kv, past, d),
                 "seqlens": np.array([past + s - 1], np.int32), "total": np.array(past + s, np.int32)}
        for g, w in zip(exe.run(**feeds), sess.run(None, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
