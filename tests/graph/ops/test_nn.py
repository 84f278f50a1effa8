"""Type inference of nn ops: convolutions, dense/matmul, einsum, normalization, pooling."""
import numpy as np
import pytest

from ember.errors import DTypeError, ShapeError
from ember.graph import Dim

from .conftest import T, infer


@pytest.mark.parametrize("x, w, attrs, out", [
    ((1, 3, 224, 224), (64, 3, 7, 7), dict(strides=(2, 2), padding=(3, 3, 3, 3)), (1, 64, 112, 112)),
    ((2, 8, 10, 12), (16, 2, 3, 3), dict(groups=4), (2, 16, 8, 10)),
    ((1, 4, 10, 10), (4, 1, 3, 3), dict(groups=4, dilation=(2, 2), padding=(2, 2, 2, 2)), (1, 4, 10, 10)),
    ((1, 3, 7, 5), (2, 3, 3, 3), dict(strides=(2, 2), padding=(1, 0, 1, 0)), (1, 2, 4, 2)),
    (("n", 3, 32, 32), (8, 3, 3, 3), dict(padding=(1, 1, 1, 1)), ("n", 8, 32, 32)),
    (("n", 3, "h", "w"), (8, 3, 3, 3), dict(padding=(1, 1, 1, 1)), ("n", 8, "h", "w")),
])
def test_conv2d(x, w, attrs, out):
    assert infer("nn.conv2d", T(*x), T(*w), **attrs) == T(*out)


def test_conv_other_ranks_and_errors():
    assert infer("nn.conv1d", T(1, 2, 10), T(4, 2, 3), strides=(2,)) == T(1, 4, 4)
    assert infer("nn.conv3d", T(1, 2, 4, 4, 4), T(4, 2, 3, 3, 3)) == T(1, 4, 2, 2, 2)
    with pytest.raises(ShapeError, match="^nn.conv2d: the data has 3 channels but the weight expects 4 x 1"):
        infer("nn.conv2d", T(1, 3, 8, 8), T(8, 4, 3, 3))
    with pytest.raises(ShapeError, match="^nn.conv2d: the data must have rank 4"):
        infer("nn.conv2d", T(3, 8, 8), T(8, 3, 3, 3))
    with pytest.raises(ShapeError, match="^nn.conv2d: spatial axis 0: the window"):
        infer("nn.conv2d", T(1, 3, 2, 8), T(8, 3, 3, 3))
    with pytest.raises(ShapeError, match="^nn.conv2d: strides has 1 values"):
        infer("nn.conv2d", T(1, 3, 8, 8), T(8, 3, 3, 3), strides=(1,))
    with pytest.raises(DTypeError, match="^nn.conv2d: the data and the weight must have one dtype"):
        infer("nn.conv2d", T(1, 3, 8, 8), T(8, 3, 3, 3, dtype="float16"))


def test_conv_transpose():
    # out = s*(in-1) + output_padding + (k-1)*d + 1 - pads
    assert infer("nn.conv2d_transpose", T(1, 1, 3, 3), T(1, 2, 3, 3)) == T(1, 2, 5, 5)
    assert infer("nn.conv2d_transpose", T(1, 1, 3, 3), T(1, 2, 3, 3), strides=(3, 2),
                 output_padding=(1, 1)) == T(1, 2, 10, 8)
    assert infer("nn.conv2d_transpose", T(1, 1, 3, 3), T(1, 2, 3, 3), strides=(3, 2),
                 padding=(0, 0, 1, 1)) == T(1, 2, 8, 6)
    assert infer("nn.conv1d_transpose", T(1, 4, 3), T(4, 2, 3), groups=2) == T(1, 4, 5)
    assert infer("nn.conv2d_transpose", T("n", 1, "h", 4), T(1, 2, 3, 3), strides=(2, 2)) == \
        T("n", 2, Dim.parse("2*(h-1)+3"), 9)


@pytest.mark.parametrize("a, b", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)),
                                  ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 6)), ((7, 2, 3), (7, 3, 2))])
def test_matmul_matches_numpy(a, b):
    want = np.matmul(np.zeros(a), np.zeros(b)).shape
    assert infer("nn.matmul", T(*a), T(*b)) == T(*want)


def test_matmul_and_dense_errors_and_symbols():
    assert infer("nn.matmul", T("b", "s", 64), T(64, 32)) == T("b", "s", 32)
    with pytest.raises(ShapeError, match=r"^nn.matmul: contraction dimensions differ: 4 vs 5"):
        infer("nn.matmul", T(3, 4), T(5, 6))
    with pytest.raises(ShapeError, match="^nn.matmul: cannot broadcast"):
        infer("nn.matmul", T(2, 3, 4), T(3, 4, 5))
    assert infer("nn.dense", T("n", 512), T(1000, 512)) == T("n", 1000)
    with pytest.raises(ShapeError, match="^nn.dense: the data's last dimension 511"):
        infer("nn.dense", T(1, 511), T(1000, 512))


def test_packed_products_take_symbolic_panels():
    """A product by a packed weight: static, or with its panel count and contraction symbolic
    (a tier-0 kernel for products of every width), what the rule needs of them assumed and
    checked per call; its panel width stays static."""
    from ember.graph.ops import dims as D

    assert infer("nn.matmul_packed", T(5, 12), T(2, 12, 16), units=30) == T(5, 30)
    with pytest.raises(ShapeError, match="the contraction or the columns do not match"):
        infer("nn.matmul_packed", T(5, 12), T(2, 11, 16), units=30)
    with pytest.raises(ShapeError, match="the contraction or the columns do not match"):
        infer("nn.matmul_packed", T(5, 12), T(2, 12, 16), units=33)
    with D.collect_assumptions(fresh=True) as assumed:
        assert infer("nn.matmul_packed", T("m", "k"), T("p", "q", 16), units=64) == T("m", 64)
    assert {D.eval_index(a.cond, dict(m=5, k=12, p=4, q=12)) for a in assumed.values()} == {1}
    assert 0 in {D.eval_index(a.cond, dict(m=5, k=12, p=3, q=12)) for a in assumed.values()}
    with pytest.raises(ShapeError):
        infer("nn.matmul_packed", T(5, 12), T(2, 12, "r"), units=16)


@pytest.mark.parametrize("eq, shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
                                        ("ii->i", [(3, 3)]), ("ij->", [(2, 3)]), ("ij", [(2, 3)]),
                                        ("ji", [(2, 3)]), ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),
                                        ("i,i", [(3,), (3,)]), ("i,j->ij", [(3,), (4,)])])
def test_einsum_matches_numpy(eq, shapes):
    want = np.einsum(eq, *[np.zeros(s) for s in shapes]).shape
    assert infer("einsum", *[T(*s) for s in shapes], equation=eq) == T(*want)


def test_einsum_errors():
    with pytest.raises(ShapeError, match="^einsum: label 'j' has sizes 3 and 4"):
        infer("einsum", T(2, 3), T(4, 5), equation="ij,jk->ik")
    with pytest.raises(ShapeError, match="^einsum: equation 'ij,jk' has 2 input terms for 1"):
        infer("einsum", T(2, 3), equation="ij,jk")


def test_normalization():
    x = T("n", 8, 4, 4)
    p = T(8)
    assert infer("nn.batch_norm", x, p, p, p, p, epsilon=1e-3) == x
    with pytest.raises(ShapeError, match="^nn.batch_norm: var must be 1-D with 8 elements"):
        infer("nn.batch_norm", x, p, p, p, T(7))
    assert infer("nn.layer_norm", T(2, 5, 16), T(16), T(16)) == T(2, 5, 16)
    assert infer("nn.layer_norm", T(2, 5, 16), T(5, 16), axis=1) == T(2, 5, 16)
    with pytest.raises(ShapeError, match="^nn.layer_norm: gamma"):
        infer("nn.layer_norm", T(2, 5, 16), T(8))
    assert infer("nn.lrn", x, size=5) == x
    assert infer("nn.instance_norm", x, p, p) == x
    assert infer("nn.softmax", T(2, 10), axis=1) == T(2, 10)
    with pytest.raises(ShapeError, match="^nn.log_softmax: axis 2 is out of range for rank 2"):
        infer("nn.log_softmax", T(2, 10), axis=2)


def test_pooling():
    assert infer("nn.max_pool2d", T(1, 64, 112, 112), pool_size=(3, 3), strides=(2, 2),
                 padding=(1, 1, 1, 1)) == T(1, 64, 56, 56)
    assert infer("nn.avg_pool2d", T(1, 8, 5, 5), pool_size=(2, 2), strides=(2, 2), ceil_mode=True) == T(1, 8, 3, 3)
    assert infer("nn.max_pool2d", T(1, 1, 4, 4), pool_size=(3, 3), strides=(2, 2), ceil_mode=True) == T(1, 1, 2, 2)
    assert infer("nn.max_pool1d", T(1, 1, 7), pool_size=(2,)) == T(1, 1, 6)
    assert infer("nn.global_avg_pool2d", T("n", 2048, 7, 7)) == T("n", 2048, 1, 1)
    assert infer("nn.global_max_pool3d", T(1, 2, 3, 4, 5)) == T(1, 2, 1, 1, 1)
    with pytest.raises(ShapeError, match="^nn.max_pool2d: pool_size must be 2 values"):
        infer("nn.max_pool2d", T(1, 1, 4, 4), pool_size=(3,))
