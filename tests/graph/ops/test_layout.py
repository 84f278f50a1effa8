"""Type inference of layout, indexing and creation ops, checked against numpy where it has them."""
import numpy as np
import pytest

from ember.errors import DTypeError, ShapeError
from ember.graph import Dim, TupleType

from .conftest import T, infer

n = Dim("n")


@pytest.mark.parametrize("shape, new, want", [
    ((2, 3, 4), (6, -1), (6, 4)), ((2, 3, 4), (0, -1), (2, 12)), ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (4, 0, 2), (4, 3, 2)), (("n", 3, 4), (0, 12), ("n", 12)), (("n", 3, 4), (-1, 12), ("n", 12)),
    (("n", 3, 4), (0, -1), ("n", 12)), (("n", 3, 4), (-1,), (Dim.parse("12*n"),)), ((1, "s", 8), (-1, 2, 4), ("s", 2, 4)),
])
def test_reshape(shape, new, want):
    assert infer("reshape", T(*shape), newshape=new) == T(*want)


def test_reshape_errors_and_allowzero():
    with pytest.raises(ShapeError, match=r"^reshape: cannot reshape Tensor\[\(2, 3\), float32\] \(6 elements\) to \(4, -1\)"):
        infer("reshape", T(2, 3), newshape=(4, -1))
    with pytest.raises(ShapeError, match="^reshape: cannot reshape .* to \\(5,\\)"):
        infer("reshape", T(2, 3), newshape=(5,))
    with pytest.raises(ShapeError, match="more than one -1"):
        infer("reshape", T(2, 3), newshape=(-1, -1))
    assert infer("reshape", T(0, 3), newshape=(3, 0), allowzero=True) == T(3, 0)
    assert infer("reshape", T(2, 3), newshape=(n, 3)) == T("n", 3)


def test_flatten_transpose_squeeze_unsqueeze():
    assert infer("flatten", T("n", 3, 4, 5)) == T("n", 60)
    assert infer("flatten", T(2, 3, 4), axis=0) == T(1, 24)
    assert infer("flatten", T(2, 3, 4), axis=3) == T(24, 1)
    assert infer("flatten", T(2, 3, 4), axis=-1) == T(6, 4)
    assert infer("transpose", T(2, 3, 4), axes=(1, 0, 2)) == T(3, 2, 4)
    assert infer("transpose", T(2, 3, 4)) == T(4, 3, 2)
    with pytest.raises(ShapeError, match="^transpose: axes"):
        infer("transpose", T(2, 3), axes=(0, 0))
    assert infer("squeeze", T(1, 3, 1)) == T(3)
    assert infer("squeeze", T(1, 3, 1), axis=(-1,)) == T(1, 3)
    with pytest.raises(ShapeError, match="^squeeze: cannot squeeze axis 1"):
        infer("squeeze", T(1, 3), axis=(1,))
    with pytest.raises(ShapeError, match="^squeeze: squeeze without axes cannot tell"):
        infer("squeeze", T("n", 1))
    assert infer("unsqueeze", T(3, 4), axes=(0, 3)) == T(1, 3, 4, 1)
    assert infer("unsqueeze", T(3, 4), axes=(-1,)) == T(3, 4, 1)


def test_expand_tile_concat_split():
    assert infer("expand", T(3, 1), shape=(2, 1, 6)) == T(2, 3, 6)
    assert infer("expand", T("n", 1), shape=(1, 4)) == T("n", 4)
    with pytest.raises(ShapeError, match="^expand: cannot expand"):
        infer("expand", T(3, 2), shape=(4,))
    assert infer("tile", T(2, "n"), reps=(3, 2)) == T(6, Dim.parse("2*n"))
    assert infer("concat", T(2, 3), T(2, 5), T(2, 1), axis=1) == T(2, 9)
    assert infer("concat", T("n", 3), T("n", 3), axis=0) == T(Dim.parse("n+n"), 3)
    with pytest.raises(ShapeError, match="^concat: inputs differ in dimension 0"):
        infer("concat", T(2, 3), T(4, 3), axis=1)
    assert infer("split", T(2, 6), axis=1, num_outputs=3) == TupleType([T(2, 2)] * 3)
    assert infer("split", T(7), num_outputs=3) == TupleType([T(3), T(3), T(1)])
    with pytest.raises(ShapeError, match=r"^split: split sizes \(1, 2\) sum to 3, not the axis size 4"):
        infer("split", T(4), sizes=(1, 2))


@pytest.mark.parametrize("shape, begin, end, axes, steps", [
    ((10, 8), (1, 0), (5, 8), None, None), ((10,), (-3,), (2**63 - 1,), None, None),
    ((10,), (8,), (2,), None, (-2,)), ((10, 8), (0,), (100,), (1,), (3,)), ((5,), (-100,), (100,), (0,), (1,)),
    ((5,), (4,), (-100,), (0,), (-1,)), ((5, 4), (3,), (1,), (0,), (1,)),
])
def test_slice_matches_python(shape, begin, end, axes, steps):
    x = np.zeros(shape)
    ax = axes or tuple(range(len(begin)))
    st = steps or (1,) * len(ax)
    sl = [slice(None)] * len(shape)
    for b, e, a, s in zip(begin, end, ax, st):
        sl[a] = slice(b, e, s)
    assert infer("strided_slice", T(*shape), begin=begin, end=end, axes=axes, strides=steps) == T(*x[tuple(sl)].shape)


def test_slice_symbolic():
    big = 2**63 - 1
    assert infer("strided_slice", T("n", 4), begin=(1,), end=(big,), axes=(0,)) == T(Dim.parse("n-1"), 4)
    # a constant bound on a symbolic axis is clamped in the dims: x[:2] of n rows is min(n, 2)
    assert infer("strided_slice", T("n", 4), begin=(0,), end=(2,), axes=(0,)) == T(Dim.parse("min(n,2)"), 4)
    # a bound computed from sizes is assumed to lie inside the axis: the dim stays as written
    assert infer("strided_slice", T(512, 4), begin=(0,), end=(Dim.parse("n"),), axes=(0,)) == T("n", 4)


@pytest.mark.parametrize("step", [1, 2, -1, -3])
def test_constant_slices_of_a_symbolic_axis_match_python_at_every_size(step):
    """x[b:e:step] of an axis of n rows, constant bounds (in and past the axis, negative, to
    the end): the inferred length at each n is Python's, wherever that slice is not empty
    (the rule assumes it is not; the assumptions hold there)."""
    from ember.graph.ops import dims as D

    big = 2**63 - 1
    bounds = [0, 1, 2, 5, 9, -1, -2, -6, big, -big]
    for b in bounds:
        for e in bounds:
            try:
                with D.collect_assumptions(fresh=True) as assumed:
                    t = infer("strided_slice", T("n", 4), begin=(b,), end=(e,), axes=(0,), strides=(step,))
            except ShapeError:  # (empty at every size: refused as it is written)
                assert not any(range(n)[slice(b, e, step)] for n in range(1, 12)), (b, e, step)
                continue
            for n in range(1, 12):
                want = len(range(n)[slice(b, e, step)])
                holds = all(D.eval_index(a.cond, {"n": n}) for a in assumed.values())
                if want:
                    assert holds and D.eval_dim(t.shape[0], {"n": n}) == want, (b, e, step, n, t)


def test_pad_depth_space_resize():
    assert infer("pad", T(1, 3, 4, 4), pad_width=(0, 0, 1, 2, 0, 0, 3, 4)) == T(1, 3, 8, 10)
    assert infer("pad", T("n", 4), pad_width=(0, -1, 0, -1)) == T("n", 2)
    with pytest.raises(ShapeError, match="^pad: pad_width"):
        infer("pad", T(1, 3), pad_width=(1, 1))
    assert infer("depth_to_space", T(1, 8, 2, 3), block_size=2) == T(1, 2, 4, 6)
    assert infer("space_to_depth", T(1, 2, 4, 6), block_size=2) == T(1, 8, 2, 3)
    with pytest.raises(ShapeError, match="^depth_to_space: 6 channels"):
        infer("depth_to_space", T(1, 6, 2, 3), block_size=2)
    assert infer("resize", T(1, 3, 4, 4), scales=(1.0, 1.0, 2.0, 1.5)) == T(1, 3, 8, 6)
    assert infer("resize", T("n", 3, 4, 4), scales=(1.0, 1.0, 2.0, 2.0), method="linear") == T("n", 3, 8, 8)
    assert infer("resize", T(1, 3, 4, 4), sizes=(1, 3, 3, 9)) == T(1, 3, 3, 9)
    with pytest.raises(ShapeError, match="^resize: method 'bicubic'"):
        infer("resize", T(1, 3, 4, 4), sizes=(1, 3, 3, 9), method="bicubic")


def test_gather_scatter():
    idx = T(2, 5, dtype="int64")
    x = np.zeros((4, 6, 7))
    for axis in (0, 1, -1):
        want = np.take(x, np.zeros((2, 5), "int64"), axis=axis).shape
        assert infer("gather", T(4, 6, 7), idx, axis=axis) == T(*want)
    with pytest.raises(DTypeError, match="^gather: the indices must be int32 or int64, got float32"):
        infer("gather", T(4), T(2))
    assert infer("gather_elements", T(4, 6), T(4, 2, dtype="int32"), axis=1) == T(4, 2)
    assert infer("gather_nd", T(4, 6, 7), T(3, 2, dtype="int64")) == T(3, 7)
    assert infer("scatter_elements", T(4, 6), T(2, 6, dtype="int64"), T(2, 6), reduction="add") == T(4, 6)
    with pytest.raises(ShapeError, match="^scatter_elements: the indices"):
        infer("scatter_elements", T(4, 6), T(2, 6, dtype="int64"), T(2, 5))
    assert infer("scatter_nd", T(4, 6), T(3, 1, dtype="int64"), T(3, 6)) == T(4, 6)


def test_creation_and_misc():
    assert infer("shape_of", T("n", 3)) == T(2, dtype="int64")
    assert infer("size", T("n", 3), dtype="int32") == T(dtype="int32")
    assert infer("constant_of_shape", shape=(n, 3), value=1.0, dtype="float32") == T("n", 3)
    for start, stop, step in [(0, 10, 3), (10, 0, -2), (1, 1, 1), (0.5, 2.0, 0.4), (5, 0, 1)]:
        want = np.arange(start, stop, step).shape
        assert infer("range", start=start, stop=stop, step=step, dtype="float32") == T(*want, dtype="float32")
    assert infer("topk", T(3, 10), k=4) == TupleType([T(3, 4), T(3, 4, dtype="int64")])
    with pytest.raises(ShapeError, match="^topk: k = 11 is out of range"):
        infer("topk", T(3, 10), k=11)
    assert infer("cumsum", T(3, 4), axis=1, reverse=True) == T(3, 4)
    assert infer("cumprod", T(3, 4, dtype="int32"), axis=-1) == T(3, 4, dtype="int32")
    assert infer("eye", shape=(3, n), k=-1, dtype="int64") == T(3, "n", dtype="int64")
    with pytest.raises(ShapeError, match="^eye: shape must have two dimensions"):
        infer("eye", shape=(3,))
    assert infer("trilu", T(2, 3, 4), upper=False, k=1) == T(2, 3, 4)
    assert infer("one_hot", T(2, 3, dtype="int64"), depth=5, axis=1, dtype="int32") == T(2, 5, 3, dtype="int32")


def test_a_scalar_cannot_be_sliced():
    # was IndexError (found by the fuzzer)
    with pytest.raises(ShapeError, match="has no axes"):
        infer("strided_slice", T(), begin=(0,), end=(1,), axes=(0,))
