"""Shape computations as the TorchScript exporter writes them, and sizes of 0 (issue 46).

``torch.onnx.export(..., dynamo=False)`` (used by optimum, timm's ``onnx_export`` and
ultralytics) writes ``x.expand(b, s, d)`` as ``Expand(x, Where(Equal(shape, -1), ones, shape))``
over ``Shape -> Gather -> Unsqueeze -> Concat`` of symbolic dims: the comparison of a size with
-1 must fold (it is False for every size). A KV-cache decoder's first step has a past of length
0: a symbolic size may be 0, as ONNX allows, and a static empty product needs no kernel.
"""
import numpy as np
import pytest

import ember
from ember.graph import Dim
from ember.graph.ops import dims as D

from .helpers import I64, init, model, node, vi


def _ints(name, values):
    return init(name, np.array(values, np.int64))


def torchscript_expand_model():
    """y[b, s, :] = x[b, s, :] + v[b, :], the broadcast written as TorchScript's ``expand``."""
    inits = [_ints("i0", 0), _ints("i1", 1), _ints("ax0", [0]), _ints("ax1", [1]), _ints("dmodel", [8]),
             _ints("flat", [-1]), _ints("minus1", -1)]
    n = [
        node("Shape", ["x"], ["sx"]), node("Gather", ["sx", "i0"], ["b"]), node("Gather", ["sx", "i1"], ["s"]),
        node("Unsqueeze", ["v", "ax1"], ["v1"]),
        node("Unsqueeze", ["b", "ax0"], ["b1"]), node("Unsqueeze", ["s", "ax0"], ["s1"]),
        node("Concat", ["b1", "s1", "dmodel"], ["target0"], axis=0),
        node("Reshape", ["target0", "flat"], ["target"]),
        node("Shape", ["target"], ["ntarget"]), node("ConstantOfShape", ["ntarget"], ["ones"],
                                                     value=init("one", np.array([1], np.int64))),
        node("Mul", ["ones", "minus1"], ["minus"]), node("Equal", ["target", "minus"], ["is_minus"]),
        node("Where", ["is_minus", "ones", "target"], ["shape"]),
        node("Expand", ["v1", "shape"], ["ve"]), node("Add", ["x", "ve"], ["y"]),
    ]
    return model(n, [vi("x", ["batch", "seq", 8]), vi("v", ["batch", 8])], [vi("y", ["batch", "seq", 8])], inits)


def test_comparisons_of_sizes_with_numbers_fold_where_every_size_agrees():
    n = Dim("n")
    assert D.dim_compare("==", n, -1) is False
    assert D.dim_compare("!=", n, -1) is True
    assert D.dim_compare(">=", n, 0) is True
    assert D.dim_compare("<", n, 0) is False
    assert D.dim_compare("==", D.dim_add(n, 1), 0) is False
    assert D.dim_compare("==", n, n) is True
    assert D.dim_compare("==", n, 1) is None  # depends on n
    assert D.dim_compare(">", n, Dim("m")) is None
    assert D.dim_compare("<", 2, 3) is True


@pytest.mark.parametrize("shape", [(2, 5), (3, 7), (1, 1)])
def test_torchscript_expand_over_symbolic_sizes_compiles_once_and_runs_at_every_size(shape):
    exe = ember.compile(torchscript_expand_model())
    rng = np.random.default_rng(0)
    x = rng.random((*shape, 8), dtype=np.float32)
    v = rng.random((shape[0], 8), dtype=np.float32)
    np.testing.assert_allclose(exe.run(x, v)[0], x + v[:, None, :], rtol=1e-6)


def kv_cache_model():
    """One attention step over a cache: keys = Concat(past, new) along the sequence, scores
    = q @ keys^T, and the grown cache as a second output."""
    n = [node("Concat", ["past", "k"], ["keys"], axis=1),
         node("Transpose", ["keys"], ["kt"], perm=[0, 2, 1]),
         node("MatMul", ["q", "kt"], ["scores"])]
    return model(n, [vi("past", ["batch", "past_len", 4]), vi("k", ["batch", "seq", 4]), vi("q", ["batch", "seq", 4])],
                 [vi("scores", ["batch", "seq", "total"]), vi("keys", ["batch", "total", 4])], [])


@pytest.mark.parametrize("past_len", [0, 3])
def test_a_past_of_length_zero_runs_like_any_other(past_len):
    exe = ember.compile(kv_cache_model())
    rng = np.random.default_rng(past_len)
    past, k, q = (rng.random(s, dtype=np.float32) for s in [(2, past_len, 4), (2, 5, 4), (2, 5, 4)])
    scores, keys = exe.run(past, k, q)
    want = np.concatenate([past, k], axis=1)
    np.testing.assert_array_equal(keys, want)
    np.testing.assert_allclose(scores, q @ want.transpose(0, 2, 1), rtol=1e-5)


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize("a,b", [((2, 4), (4, 0)), ((0, 4), (4, 3)), ((2, 0), (0, 3)), ((3, 2, 0), (3, 0, 5))])
def test_products_with_a_static_empty_dimension(a, b, opt_level):
    m = model([node("MatMul", ["a", "b"], ["y"])], [vi("a", list(a)), vi("b", list(b))], [vi("y", None)])
    exe = ember.compile(m, opt_level=opt_level)
    rng = np.random.default_rng(1)
    x, y = rng.random(a, dtype=np.float32), rng.random(b, dtype=np.float32)
    got = exe.run(x, y)[0]
    assert got.shape == (x @ y).shape
    np.testing.assert_allclose(got, x @ y)


def slice_from_end_model(length="L"):
    """y = x[:, -L:] where L is v's length (TorchScript's ``x[:, -L:]``: T5's position bias)."""
    inits = [_ints("i1", 1), _ints("ax0", [0]), _ints("ax1", [1]), _ints("end", [2**62])]
    n = [node("Shape", ["v"], ["sv"]), node("Gather", ["sv", "i1"], ["L"]), node("Neg", ["L"], ["negL"]),
         node("Unsqueeze", ["negL", "ax0"], ["start"]), node("Slice", ["x", "start", "end", "ax1"], ["y"])]
    return model(n, [vi("x", ["batch", "total"]), vi("v", ["batch", length])], [vi("y", None)], inits)


@pytest.mark.parametrize("length", ["L", "past_len"])
def test_a_slice_start_of_minus_a_size_counts_from_the_end(length):
    exe = ember.compile(slice_from_end_model(length))
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    for L in (1, 3, 5):
        np.testing.assert_array_equal(exe.run(x, np.zeros((2, L), np.float32))[0], x[:, -L:])
    # at L = 0 the start is 0, which ONNX reads from the start: a different slice than the
    # compiled one, so the run is refused (a size that may be 0), naming the node
    why = "at least 1" if length == "L" else "negative .from the end. or 0 on an empty axis"
    with pytest.raises(ember.errors.ShapeError, match=why):
        exe.run(x, np.zeros((2, 0), np.float32))


def test_a_kernel_takes_a_size_only_its_computation_uses():
    """positions = range(past, past + seq): the kernel writes seq elements, but reads past."""
    inits = [_ints("i1", 1), init("one", np.array(1, np.int64))]
    n = [node("Shape", ["past"], ["sp"]), node("Gather", ["sp", "i1"], ["P"]),
         node("Shape", ["x"], ["sx"]), node("Gather", ["sx", "i1"], ["S"]), node("Add", ["P", "S"], ["end"]),
         node("Range", ["P", "end", "one"], ["pos"]), node("Cast", ["pos"], ["posf"], to=1),
         node("Add", ["x", "posf"], ["y"])]
    exe = ember.compile(model(n, [vi("past", [1, "past_len"]), vi("x", [1, "S"])], [vi("y", None)], inits))
    for p, s in [(0, 3), (4, 2), (7, 1)]:
        x = np.zeros((1, s), np.float32)
        np.testing.assert_array_equal(exe.run(np.zeros((1, p), np.float32), x)[0], np.arange(p, p + s)[None])


def test_the_sizes_that_may_be_empty_are_a_decoders_past():
    from ember.frontend.onnx.inputs import empty_sizes

    m = model([node("Identity", ["ids"], ["y"])],
              [vi("ids", ["batch", "sequence_length"], I64), vi("mask", ["batch", "past_sequence_length + sequence_length"], I64),
               vi("k", ["batch", 2, "past_decoder_sequence_length", 4]), vi("cache", ["batch", "cached + 1"]),
               vi("c", ["cached"])],
              [vi("y", None, I64)])
    assert empty_sizes(m.graph) == {"sequence_length", "past_decoder_sequence_length", "cached"}
    exe = ember.compile(kv_cache_model())
    assert exe.input_info[0].shape == ("batch", "?past_len", 4)  # '?': a size that may be 0
    with pytest.raises(ember.errors.ShapeError, match="at least 1"):  # other sizes may not
        exe.run(*(np.zeros(s, np.float32) for s in [(0, 1, 4), (0, 5, 4), (0, 5, 4)]))
