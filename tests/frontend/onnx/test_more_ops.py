"""RotaryEmbedding, Compress, Col2Im and models older than opset 7, against onnx's reference
evaluator on random data."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import ember
from ember.frontend.onnx import from_onnx

RNG = np.random.default_rng(0)


def _check(model, feeds, rtol=1e-5, atol=1e-6):
    want = ReferenceEvaluator(model).run(None, feeds)
    got = ember.compile(model).run(**feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        assert g.shape == w.shape


@pytest.mark.parametrize("rank, interleaved, rot, positions", [(4, 0, 0, True), (4, 1, 4, True), (3, 0, 6, False),
                                                               (3, 1, 0, True)])
def test_rotary_embedding(rank, interleaved, rot, positions):
    b, s, n, hd = 2, 5, 3, 8
    half = (rot or hd) // 2
    x = RNG.standard_normal((b, n, s, hd) if rank == 4 else (b, s, n * hd)).astype(np.float32)
    feeds = {"x": x}
    ins = [h.make_tensor_value_info("x", T.FLOAT, x.shape)]
    angles = RNG.uniform(0, 6, (16, half) if positions else (b, s, half)).astype(np.float32)
    feeds.update(cos=np.cos(angles), sin=np.sin(angles))
    ins += [h.make_tensor_value_info(k, T.FLOAT, angles.shape) for k in ("cos", "sin")]
    names = ["x", "cos", "sin"]
    if positions:
        feeds["pos"] = RNG.integers(0, 16, (b, s)).astype(np.int64)
        ins.append(h.make_tensor_value_info("pos", T.INT64, (b, s)))
        names.append("pos")
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot}
    if rank == 3:
        attrs["num_heads"] = n
    g = h.make_graph([h.make_node("RotaryEmbedding", names, ["y"], **attrs)], "r", ins,
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    _check(h.make_model(g, opset_imports=[h.make_opsetid("", 23)]), feeds)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_compress_keeps_what_the_condition_selects(axis):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    cond = np.array([True, False, True] if axis in (None, 0) else [False, True, True, False])
    attrs = {} if axis is None else {"axis": axis}
    g = h.make_graph([h.make_node("Compress", ["x", "c"], ["y"], **attrs)], "c",
                     [h.make_tensor_value_info("x", T.FLOAT, x.shape), h.make_tensor_value_info("c", T.BOOL, cond.shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    _check(h.make_model(g, opset_imports=[h.make_opsetid("", 11)]), {"x": x, "c": cond})


def test_a_model_older_than_opset_7_whose_ops_did_not_change_is_read():
    g = h.make_graph([h.make_node("Not", ["x"], ["y"])], "n", [h.make_tensor_value_info("x", T.BOOL, [3])],
                     [h.make_tensor_value_info("y", T.BOOL, [3])])
    exe = ember.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 1)]))
    np.testing.assert_array_equal(exe.run(np.array([True, False, True]))[0], [False, True, False])
    # Add changed at opset 7 (broadcasting): an opset-6 Add stays unsupported, said up front
    g = h.make_graph([h.make_node("Add", ["x", "x"], ["y"])], "a", [h.make_tensor_value_info("x", T.FLOAT, [3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [3])])
    with pytest.raises(ember.UnsupportedOpError, match="opset 6"):
        ember.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 6)]))


@pytest.mark.parametrize("causal, left, right, external", [(1, -1, -1, True), (0, 2, 1, False), (1, 3, -1, True),
                                                           (0, -1, 0, True)])
def test_attention_with_an_external_cache_and_sliding_windows(causal, left, right, external):
    b, heads, sq, skv, d = 2, 2, 3, 6, 4
    q = RNG.standard_normal((b, heads, sq, d)).astype(np.float32)
    k = RNG.standard_normal((b, heads, skv, d)).astype(np.float32)
    v = RNG.standard_normal((b, heads, skv, d)).astype(np.float32)
    feeds = {"q": q, "k": k, "v": v}
    names = ["q", "k", "v"]
    ins = [h.make_tensor_value_info(n, T.FLOAT, a.shape) for n, a in feeds.items()]
    if external:
        feeds["n"] = np.array([4, 6], np.int64)
        names += ["", "", "", "n"]
        ins.append(h.make_tensor_value_info("n", T.INT64, [b]))
    node = h.make_node("Attention", names, ["y"], is_causal=causal, left_window_size=left, right_window_size=right)
    g = h.make_graph([node], "a", ins, [h.make_tensor_value_info("y", T.FLOAT, None)])
    _check(h.make_model(g, opset_imports=[h.make_opsetid("", 24)]), feeds)


@pytest.mark.parametrize("inverse, onesided, length", [(0, 0, None), (0, 1, None), (1, 0, 8), (1, 1, None),
                                                       (0, 0, 12)])
def test_dft_matches_numpy_fft(inverse, onesided, length):
    parts = 2 if inverse else 1
    x = RNG.standard_normal((2, 10, 3, parts)).astype(np.float64)
    names = ["x"] + (["n"] if length else [])
    inits = [h.make_tensor("n", T.INT64, [], [length])] if length else []
    g = h.make_graph([h.make_node("DFT", names, ["y"], axis=1, inverse=inverse, onesided=onesided)], "d",
                     [h.make_tensor_value_info("x", T.DOUBLE, x.shape)], [h.make_tensor_value_info("y", T.DOUBLE, None)],
                     inits)
    got = ember.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)])).run(x)[0]
    sig = x[..., 0] + 1j * x[..., 1] if parts == 2 else x[..., 0]
    if inverse and onesided:
        want = np.fft.irfft(sig, n=length or 2 * (10 - 1), axis=1)[..., None]
    else:
        y = (np.fft.ifft if inverse else np.fft.fft)(sig, n=length, axis=1)
        if onesided:
            y = y[:, : (length or 10) // 2 + 1]
        want = np.stack([y.real, y.imag], -1)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("inverse, onesided, parts, dtype", [(0, 0, 1, T.DOUBLE), (0, 1, 1, T.DOUBLE),
                                                              (1, 0, 2, T.DOUBLE), (0, 0, 2, T.FLOAT)])
def test_dft_over_a_symbolic_length(inverse, onesided, parts, dtype):
    # FNet mixes tokens by a DFT over the sequence: one compile serves every length
    g = h.make_graph([h.make_node("DFT", ["x"], ["y"], axis=1, inverse=inverse, onesided=onesided)], "d",
                     [h.make_tensor_value_info("x", dtype, [2, "seq", 3, parts])],
                     [h.make_tensor_value_info("y", dtype, None)])
    exe = ember.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    np_dtype = np.float64 if dtype == T.DOUBLE else np.float32
    for seq in (10, 7, 1):
        x = RNG.standard_normal((2, seq, 3, parts)).astype(np_dtype)
        sig = x[..., 0] + 1j * x[..., 1] if parts == 2 else x[..., 0]
        y = (np.fft.ifft if inverse else np.fft.fft)(sig.astype(np.complex128), axis=1)
        if onesided:
            y = y[:, : seq // 2 + 1]
        tol = 1e-10 if dtype == T.DOUBLE else 1e-5
        np.testing.assert_allclose(exe.run(x)[0], np.stack([y.real, y.imag], -1), rtol=tol, atol=tol)


@pytest.mark.parametrize("op, periodic", [("HannWindow", 1), ("HammingWindow", 0), ("BlackmanWindow", 1)])
def test_windows_of_a_size_given_at_run_time(op, periodic):
    g = h.make_graph([h.make_node(op, ["n"], ["w"], periodic=periodic)], "w",
                     [h.make_tensor_value_info("n", T.INT64, [])], [h.make_tensor_value_info("w", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    exe = ember.compile(model)
    for n in (5, 16):
        want = ReferenceEvaluator(model).run(None, {"n": np.array(n, np.int64)})[0]
        np.testing.assert_allclose(exe.run(np.array(n, np.int64))[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_matches_the_reference(mode, padding, align):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = rng.uniform(-1.6, 1.6, (2, 4, 7, 2)).astype(np.float32)  # points outside too
    g = h.make_graph([h.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding,
                                  align_corners=align)], "gs",
                     [h.make_tensor_value_info("x", T.FLOAT, x.shape), h.make_tensor_value_info("g", T.FLOAT, grid.shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    # (float32 sums of up to 16 weighted taps, in another order than the reference's)
    _check(h.make_model(g, opset_imports=[h.make_opsetid("", 20)]), {"x": x, "g": grid}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch_axis, time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence_and_swiglu(batch_axis, time_axis):
    x = RNG.standard_normal((4, 3, 2) if time_axis == 0 else (3, 4, 2)).astype(np.float32)
    lens = np.array([4, 0, 2], np.int64)
    g = h.make_graph([h.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=batch_axis, time_axis=time_axis)],
                     "r", [h.make_tensor_value_info("x", T.FLOAT, x.shape), h.make_tensor_value_info("l", T.INT64, [3])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    _check(h.make_model(g, opset_imports=[h.make_opsetid("", 10)]), {"x": x, "l": lens})
    a, b = RNG.standard_normal((2, 5)).astype(np.float32), RNG.standard_normal((2, 5)).astype(np.float32)
    g = h.make_graph([h.make_node("SwiGLU", ["a", "b"], ["y"], alpha=1.7)], "s",
                     [h.make_tensor_value_info(n, T.FLOAT, (2, 5)) for n in "ab"],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    _check(h.make_model(g, opset_imports=[h.make_opsetid("", 28)]), {"a": a, "b": b})


def test_a_batched_activation_times_a_weight_is_one_product():
    """(seq, 1, E) @ (E, N), as nn.MultiheadAttention exports its projections: one (seq, E)
    product (a batch of 1-row products ran as matrix-vector products), at symbolic sizes too."""
    w = RNG.standard_normal((8, 5)).astype(np.float32)
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"])], "m",
                     [h.make_tensor_value_info("x", T.FLOAT, ["s", 1, 8])], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [h.make_tensor("w", T.FLOAT, w.shape, w.reshape(-1))])
    from ember.frontend.onnx.importer import from_onnx
    from ember.graph.printer import astext

    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    text = astext(from_onnx(model).main)
    assert "nn.matmul(%0" in text and "reshape(%x, newshape=(s, 8))" in text
    exe = ember.compile(model)
    for s in (1, 7):
        x = RNG.standard_normal((s, 1, 8)).astype(np.float32)
        np.testing.assert_allclose(exe.run(x)[0], x @ w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("blocks, image, block, attrs", [
    (9, (4, 4), (2, 2), {}),  # overlapping blocks sum where they meet
    (16, (8, 8), (2, 2), {"strides": [2, 2]}),  # MobileViT-V2's patches back into the image
    (9, (5, 6), (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    (6, (5, 7), (2, 2), {"dilations": [2, 2], "strides": [2, 2]}),
    (4, (9,), (3,), {"strides": [2]}),
])
def test_col2im_folds_blocks_into_an_image(blocks, image, block, attrs):
    from onnx import numpy_helper as nh

    cols = 3 * int(np.prod(block))
    g = h.make_graph([h.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)], "m",
                     [h.make_tensor_value_info("x", T.FLOAT, ["n", cols, blocks])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(np.array(image, np.int64), "image"),
                      nh.from_array(np.array(block, np.int64), "block")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    for n in (1, 2):
        _check(model, {"x": RNG.standard_normal((n, cols, blocks)).astype(np.float32)})


@pytest.mark.parametrize("target,axes", [((6, 3), (1, 2)), ((2, 9), (-2, -1)), ((5, 4, 7), None)])
def test_center_crop_pad_is_onnx_references(target, axes):
    from onnx import numpy_helper

    attrs = {} if axes is None else {"axes": list(axes)}
    g = h.make_graph([h.make_node("CenterCropPad", ["x", "s"], ["y"], **attrs)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [5, 4, 5])], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     initializer=[numpy_helper.from_array(np.array(target, np.int64), "s")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    x = np.random.default_rng(0).random((5, 4, 5), dtype=np.float32)
    _check(m, {"x": x})


@pytest.mark.parametrize("size,align", [((2, 3, 4, 5), 0), ((2, 3, 4, 5), 1), ((1, 2, 3, 4, 2), 0), ((1, 1, 1, 3), 1)])
def test_affine_grid_is_onnx_references(size, align):
    from onnx import numpy_helper

    d = len(size) - 2
    g = h.make_graph([h.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)], "g",
                     [h.make_tensor_value_info("theta", T.FLOAT, [size[0], d, d + 1])],
                     [h.make_tensor_value_info("grid", T.FLOAT, None)],
                     initializer=[numpy_helper.from_array(np.array(size, np.int64), "size")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
    theta = np.random.default_rng(0).standard_normal((size[0], d, d + 1)).astype(np.float32)
    _check(m, {"theta": theta})


@pytest.mark.parametrize("out_shape", [None, (1, 2, 6, 7)])
def test_max_unpool_puts_max_pools_values_back(out_shape):
    """MaxPool's values and indices (onnx's reference computes them), unpooled: the values where
    the indices say, zeros elsewhere."""
    from onnx import numpy_helper

    pool = h.make_model(h.make_graph([h.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2])],
                                     "pool", [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 4, 6])],
                                     [h.make_tensor_value_info("p", T.FLOAT, None),
                                      h.make_tensor_value_info("i", T.INT64, None)]),
                        opset_imports=[h.make_opsetid("", 11)])
    x = np.random.default_rng(0).random((1, 2, 4, 6), dtype=np.float32)
    p, i = ReferenceEvaluator(pool).run(None, {"x": x})
    node = h.make_node("MaxUnpool", ["p", "i"] + (["s"] if out_shape else []), ["y"], kernel_shape=[2, 2], strides=[2, 2])
    inits = [numpy_helper.from_array(np.array(out_shape, np.int64), "s")] if out_shape else []
    g = h.make_graph([node], "g", [h.make_tensor_value_info("p", T.FLOAT, [1, 2, 2, 3]),
                                   h.make_tensor_value_info("i", T.INT64, [1, 2, 2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 11)])
    _check(m, {"p": p, "i": i})


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool(p):
    g = h.make_graph([h.make_node("GlobalLpPool", ["x"], ["y"], p=p)], "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4, 5])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = (np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True) ** (1 / p)  # (onnx's reference lacks it)
    np.testing.assert_allclose(ember.compile(m).run(x)[0], want, rtol=1e-5)


def test_sequences_known_at_import_become_their_tensors():
    """Split into a sequence, insert, erase, index and concatenate it again: a sequence is an
    import-time list, so a graph that only passes through one compiles to tensor ops."""
    from onnx import numpy_helper

    nodes = [h.make_node("SplitToSequence", ["x", "two"], ["s"], axis=1),  # chunks of 2: (2, 2, 1)
             h.make_node("SequenceInsert", ["s", "y", "zero"], ["s2"]),
             h.make_node("SequenceErase", ["s2", "minus1"], ["s3"]),
             h.make_node("SequenceAt", ["s3", "one"], ["first"]),
             h.make_node("SequenceLength", ["s3"], ["n"]),
             h.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=1),
             h.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
             h.make_node("ConcatFromSequence", ["rows"], ["stacked"], axis=0, new_axis=1)]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             [("two", 2), ("zero", 0), ("minus1", -1), ("one", 1)]]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [3, 5]), h.make_tensor_value_info("y", T.FLOAT, [3, 1])],
                     [h.make_tensor_value_info(o, T.FLOAT if o != "n" else T.INT64, None)
                      for o in ("first", "n", "cat", "stacked")], initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    rng = np.random.default_rng(0)
    _check(m, {"x": rng.random((3, 5), dtype=np.float32), "y": rng.random((3, 1), dtype=np.float32)})


def test_a_sequence_output_is_named_by_the_import_and_a_list_from_compile():
    g = h.make_graph([h.make_node("SequenceConstruct", ["x"], ["s"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                     [h.make_tensor_sequence_value_info("s", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(ember.errors.UnsupportedOpError, match="graph output 's' is a sequence"):
        from_onnx(m)  # (a Module's outputs are tensors: io_structure= flattens them)
    s, = ember.compile(m).run(np.array([1, 2], np.float32))
    assert isinstance(s, list) and [list(a) for a in s] == [[1, 2]]
