"""Models exported with dynamic axes compile once and run at any size (issue: dynamic shapes).

The graphs are written the way torch.onnx.export(dynamo=True) writes them: sizes come from
Shape -> Gather chains and feed Range, Slice, Reshape (a Concat of dims), Expand and Resize.
numpy is the reference; each executable runs at several sizes, and an export of it too.
"""
import numpy as np
import pytest

import ember
from ember.errors import ShapeError

from .helpers import I64, init, model, node, vi

D, HEADS, VOCAB, MAXPOS = 16, 2, 50, 64


def _ints(name, values):
    return init(name, np.array(values, np.int64))


def attention_model(rng):
    """Token and position embeddings (Gather, Range over seq, and a Slice [:seq]), one
    two-head self-attention with a padding mask, and a residual."""
    w = {k: (rng.standard_normal(s) * 0.3).astype(np.float32) for k, s in
         [("tok", (VOCAB, D)), ("pos", (MAXPOS, D)), ("q", (D, D)), ("k", (D, D)), ("v", (D, D))]}
    inits = [init(k, v) for k, v in w.items()] + [
        _ints("i0", 0), _ints("i1", 1), _ints("ax0", [0]), _ints("start0", [0]), _ints("heads", [HEADS]),
        _ints("dh", [D // HEADS]), _ints("dmodel", [D]),
        init("one", np.float32(1.0)), init("neg", np.float32(-1e4)), init("scale", np.float32(1 / np.sqrt(D // HEADS)))]
    n = [
        node("Gather", ["tok", "ids"], ["emb"]),
        node("Shape", ["ids"], ["shape"]),
        node("Gather", ["shape", "i0"], ["batch"]), node("Gather", ["shape", "i1"], ["seq"]),
        node("Range", ["i0", "seq", "i1"], ["positions"]),
        node("Gather", ["pos", "positions"], ["pe"]),
        node("Unsqueeze", ["seq", "ax0"], ["seq1"]),
        node("Slice", ["pos", "start0", "seq1", "ax0"], ["pe2"]),
        node("Add", ["emb", "pe"], ["h0"]), node("Add", ["h0", "pe2"], ["h"]),
        node("Unsqueeze", ["batch", "ax0"], ["batch1"]),
        node("Concat", ["batch1", "seq1", "heads", "dh"], ["split_shape"], axis=0),
        node("Concat", ["batch1", "seq1", "dmodel"], ["merge_shape"], axis=0),
    ]
    for k in "qkv":
        n += [node("MatMul", ["h", k], [f"{k}0"]), node("Reshape", [f"{k}0", "split_shape"], [f"{k}1"]),
              node("Transpose", [f"{k}1"], [f"{k}h"], perm=[0, 2, 1, 3] if k != "k" else [0, 2, 3, 1])]
    n += [
        node("MatMul", ["qh", "kh"], ["s0"]), node("Mul", ["s0", "scale"], ["s1"]),
        node("Cast", ["mask"], ["maskf"], to=1), node("Sub", ["one", "maskf"], ["pad"]),
        node("Mul", ["pad", "neg"], ["bias0"]), node("Unsqueeze", ["bias0", "heads_axes"], ["bias"]),
        node("Add", ["s1", "bias"], ["s"]), node("Softmax", ["s"], ["p"], axis=-1),
        node("MatMul", ["p", "vh"], ["o0"]), node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        node("Reshape", ["o1", "merge_shape"], ["o"]), node("Add", ["h", "o"], ["y"]),
    ]
    inits.append(_ints("heads_axes", [1, 2]))
    m = model(n, [vi("ids", ["batch", "seq"], I64), vi("mask", ["batch", "seq"], I64)],
              [vi("y", ["batch", "seq", D])], inits)
    return m, w


def attention_reference(w, ids, mask):
    seq = ids.shape[1]
    h = w["tok"][ids] + 2 * w["pos"][:seq]
    b = ids.shape[0]

    def heads(x):
        return x.reshape(b, seq, HEADS, D // HEADS).transpose(0, 2, 1, 3)

    q, k, v = (heads(h @ w[c]) for c in "qkv")
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // HEADS) + ((1 - mask) * -1e4)[:, None, None, :]
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ v).transpose(0, 2, 1, 3).reshape(b, seq, D)
    return h + o


def _inputs(rng, b, seq):
    ids = rng.integers(0, VOCAB, (b, seq)).astype(np.int64)
    mask = np.ones((b, seq), np.int64)
    mask[0, seq // 2:] = 0  # a padded first row
    return ids, mask


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    m, w = attention_model(np.random.default_rng(0))
    path = str(tmp_path_factory.mktemp("dyn") / "attention.onnx")
    import onnx

    onnx.save(m, path)
    return path, w


@pytest.fixture(scope="module")
def attention_exe(attention):
    return ember.compile(attention[0])


def test_a_transformer_block_runs_at_every_batch_and_sequence_length(attention, attention_exe):
    exe, w = attention_exe, attention[1]
    assert exe.input_info[0].shape == ("batch", "seq") and exe.program["symbols"] == ["batch", "seq"]
    rng = np.random.default_rng(1)
    for b, seq in [(1, 5), (3, 17), (2, 64), (1, 5)]:
        ids, mask = _inputs(rng, b, seq)
        np.testing.assert_allclose(exe.run(ids, mask)[0], attention_reference(w, ids, mask), rtol=1e-4, atol=1e-4)


def test_the_shapes_the_model_needs_are_checked_per_run(attention_exe):
    ids, mask = _inputs(np.random.default_rng(2), 2, 8)
    with pytest.raises(ShapeError, match="mask.*axis 1 must be seq = 8"):
        attention_exe.run(ids, mask[:, :6])
    # the position table has 64 rows: a longer sequence breaks the model's Slice [:seq]
    ids, mask = _inputs(np.random.default_rng(2), 1, 65)
    with pytest.raises(ShapeError, match="seq.*64|64.*seq"):
        attention_exe.run(ids, mask)


def test_a_dynamic_export_loads_and_runs_at_every_size(attention, attention_exe, tmp_path):
    exe = ember.load(attention_exe.export(str(tmp_path / "attention.so")))
    rng = np.random.default_rng(3)
    for b, seq in [(2, 9), (1, 33)]:
        ids, mask = _inputs(rng, b, seq)
        np.testing.assert_allclose(exe.run(ids, mask)[0], attention_reference(attention[1], ids, mask),
                                   rtol=1e-4, atol=1e-4)


def test_input_shapes_binds_the_sizes_before_the_shape_computations(attention):
    exe = ember.compile(attention[0], input_shapes={"ids": (2, 12), "mask": (2, 12)})
    assert "symbols" not in exe.program and exe.input_info[0].shape == (2, 12)
    ids, mask = _inputs(np.random.default_rng(4), 2, 12)
    np.testing.assert_allclose(exe.run(ids, mask)[0], attention_reference(attention[1], ids, mask),
                               rtol=1e-4, atol=1e-4)


def test_a_cnn_with_a_dynamic_batch_and_a_resize_to_computed_sizes(tmp_path):
    rng = np.random.default_rng(5)
    wconv = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    n = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
         node("Shape", ["r"], ["s"]), node("Slice", ["s", "z", "two", "z"], ["nc"]),
         node("Concat", ["nc", "hw"], ["sizes"], axis=0),
         node("Resize", ["r", "", "", "sizes"], ["y"], mode="nearest")]
    m = model(n, [vi("x", ["N", 3, 8, 8])], [vi("y", ["N", 8, 16, 16])],
              [init("w", wconv), _ints("z", [0]), _ints("two", [2]), _ints("hw", [16, 16])])
    import onnx

    path = str(tmp_path / "cnn.onnx")
    onnx.save(m, path)
    exe = ember.compile(path)
    for b in (1, 4):
        x = rng.standard_normal((b, 3, 8, 8)).astype(np.float32)
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        c = np.zeros((b, 8, 8, 8), np.float32)
        for i in range(3):
            for j in range(3):
                c += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 8, j:j + 8], wconv[:, :, i, j])
        want = np.maximum(c, 0).repeat(2, axis=2).repeat(2, axis=3)
        np.testing.assert_allclose(exe.run(x)[0], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,ctm", [("linear", "half_pixel"), ("linear", "pytorch_half_pixel"),
                                      ("linear", "align_corners"), ("nearest", "asymmetric"),
                                      ("cubic", "half_pixel"), ("linear", "half_pixel_symmetric")])
def test_a_resize_to_a_skip_inputs_symbolic_height_and_width(mode, ctm):
    """A segmentation head upsamples to its input's size (torchvision's FCN, LRASPP, SegFormer):
    the sizes are the symbolic H and W of another tensor, and the coordinates are computed per
    run -- same answers as onnx's reference at each size, down- and upsampling, 1 included."""
    from onnx.reference import ReferenceEvaluator

    n = [node("Shape", ["skip"], ["s"]), node("Slice", ["s", "two", "four"], ["hw"]),
         node("Shape", ["x"], ["xs"]), node("Slice", ["xs", "z", "two"], ["nc"]),
         node("Concat", ["nc", "hw"], ["sizes"], axis=0),
         node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, coordinate_transformation_mode=ctm)]
    m = model(n, [vi("x", [1, 3, "h", "w"]), vi("skip", [1, 1, "H", "W"])], [vi("y", [1, 3, "H", "W"])],
              [_ints("z", [0]), _ints("two", [2]), _ints("four", [4])], opset=19)
    exe = ember.compile(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    rng = np.random.default_rng(6)
    for h, w, H, W in [(7, 9, 28, 36), (5, 5, 5, 5), (16, 12, 8, 6), (1, 1, 4, 3), (3, 4, 1, 1)]:
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        skip = np.zeros((1, 1, H, W), np.float32)
        want = ref.run(None, {"x": x, "skip": skip})[0]
        np.testing.assert_allclose(exe.run(x, skip)[0], want, rtol=1e-5, atol=1e-5, err_msg=f"{(h, w, H, W)}")


def test_a_resize_by_scales_of_a_symbolic_plane():
    from onnx.reference import ReferenceEvaluator

    m = model([node("Resize", ["x", "", "sc"], ["y"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel")],
              [vi("x", ["N", 3, "h", "w"])], [vi("y", None)], [init("sc", np.array([1, 1, 1.7, 0.6], np.float32))],
              opset=19)
    exe = ember.compile(m.SerializeToString())
    for shape in [(1, 3, 7, 9), (2, 3, 1, 1), (1, 3, 10, 3)]:
        x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
        want = ReferenceEvaluator(m).run(None, {"x": x})[0]
        np.testing.assert_allclose(exe.run(x)[0], want, rtol=1e-5, atol=1e-5, err_msg=f"{shape}")


def _roll_model(shift):
    """``torch.roll(x, shift, 1)`` on a symbolic axis as torch's exporter writes it: the split
    point is ``Mod(-shift, L)``, computed from the shape (Swin's shifted windows)."""
    n = [node("Shape", ["x"], ["sh"], start=1, end=2), node("Mod", ["c", "sh"], ["s"], fmod=0),
         node("Identity", ["s"], ["s1"]),
         node("Slice", ["x", "s1", "big", "one"], ["a"]), node("Slice", ["x", "z", "s", "one"], ["b"]),
         node("Concat", ["a", "b"], ["y"], axis=1)]
    return model(n, [vi("x", ["N", "L", 8])], [vi("y", ["N", "L", 8])],
                 [_ints("c", [-shift]), _ints("big", [2 ** 62]), _ints("one", [1]), _ints("z", [0])])


def test_a_roll_on_a_symbolic_axis_folds_its_split_point():
    exe = ember.compile(_roll_model(4).SerializeToString())
    for n, length in [(1, 12), (2, 9), (1, 4), (1, 3), (1, 1)]:
        x = np.arange(n * length * 8, dtype=np.float32).reshape(n, length, 8)
        np.testing.assert_array_equal(exe.run(x)[0], np.roll(x, 4, axis=1), err_msg=f"L={length}")


def test_a_slice_start_computed_negative_is_refused_not_read_out_of_bounds():
    """``x[:, L-4:]`` has a start computed from the shape; at L < 4 it is negative, which ONNX
    counts from the end. The compiled slice is the one for a start inside the axis: such a run
    is refused, naming the node, where it used to read before the input."""
    n = [node("Shape", ["x"], ["sh"], start=1, end=2), node("Sub", ["sh", "four"], ["st"]),
         node("Slice", ["x", "st", "sh", "one"], ["y"], name="last_four")]
    m = model(n, [vi("x", [1, "L", 8])], [vi("y", [1, 4, 8])], [_ints("four", [4]), _ints("one", [1])])
    exe = ember.compile(m.SerializeToString())
    x = np.arange(6 * 8, dtype=np.float32).reshape(1, 6, 8)
    np.testing.assert_array_equal(exe.run(x)[0], x[:, 2:])
    with pytest.raises(ShapeError, match="node last_four: slice start L-4 must not be negative"):
        exe.run(x[:, :3])


def test_constant_slices_of_a_symbolic_axis_clamp_as_onnx_does():
    """``x[:, :8]`` (a truncation), ``x[:, -6:]`` (the last six) and ``x[:, 9:1:-2]`` on an
    axis of size L: shorter than the bounds at a run, they take what there is, as torch and
    ONNX do -- the run at L = 3 was refused ("slice end 8 must not pass the end"). The sizes
    downstream follow (min(L, 8) rows, added to a reduction of the last six)."""
    from onnx.reference import ReferenceEvaluator

    n = [node("Slice", ["x", "z", "eight", "one"], ["head"]),
         node("Slice", ["x", "minus6", "big", "one"], ["tail"]),
         node("ReduceSum", ["tail", "one"], ["t"], keepdims=1),
         node("Add", ["head", "t"], ["y"]),
         node("Slice", ["x", "nine", "one", "one", "minus2"], ["back"])]
    m = model(n, [vi("x", [2, "L", 4])], [vi("y", None), vi("back", None)],
              [_ints("z", [0]), _ints("eight", [8]), _ints("one", [1]), _ints("minus6", [-6]),
               _ints("big", [2 ** 62]), _ints("nine", [9]), _ints("minus2", [-2])], opset=17)
    exe = ember.compile(m.SerializeToString())
    ref = ReferenceEvaluator(m)
    for length in (12, 8, 7, 3, 2):
        x = np.random.default_rng(length).standard_normal((2, length, 4)).astype(np.float32)
        for got, want in zip(exe.run(x), ref.run(None, {"x": x})):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"L={length}")


# -- sizes a kernel computes: bound while the run goes on -------------------------------------------

def _nonzero_model(path):
    import onnx

    # y = NonZero(x) feeds a Gather of x's rows at the nonzero columns of its first row: every
    # value after the NonZero has a size known only once its count kernel has run
    n = [node("NonZero", ["x"], ["nz"]), node("ReduceSum", ["x"], ["rows"], keepdims=0, axes=[1]),
         node("Add", ["nz", "one"], ["nz1"])]
    m = model(n, [vi("x", ["a", 4])], [vi("nz1", [2, "k"], I64), vi("rows", ["a"])], [_ints("one", 1)], opset=12)
    onnx.save(m, path)
    return path


def test_nonzero_sizes_are_bound_while_running_at_every_size(tmp_path):
    exe = ember.compile(_nonzero_model(str(tmp_path / "nz.onnx")))
    assert len(exe.program["binds"]) == 1 and exe.native
    loaded = ember.load(exe.export(str(tmp_path / "nz.so")))
    rng = np.random.default_rng(6)
    for a in (3, 1, 50, 3):
        x = (rng.random((a, 4)) > 0.6).astype(np.float32) * rng.standard_normal((a, 4)).astype(np.float32)
        for e in (exe, loaded):
            y, rows = e.run(x)
            np.testing.assert_array_equal(y, np.array(np.nonzero(x)) + 1)
            np.testing.assert_allclose(rows, x.sum(axis=1), rtol=1e-5, atol=1e-6)
    y, _ = exe.run(np.zeros((5, 4), np.float32))  # no nonzeros: a size of 0
    assert y.shape == (2, 0)
