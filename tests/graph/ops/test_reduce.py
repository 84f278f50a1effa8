"""Type inference of reductions and argmax/argmin."""
import numpy as np
import pytest

from ember.errors import DTypeError, ShapeError

from .conftest import T, infer

OPS = ["sum", "mean", "max", "min", "prod", "l1_norm", "l2_norm", "sum_square", "log_sum", "log_sum_exp"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis", [None, (0,), (1, -1), (-2,), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(op, axis, keepdims):
    x = np.zeros((2, 3, 4))
    want = np.sum(x, axis=axis, keepdims=keepdims).shape
    assert infer(op, T(2, 3, 4), axis=axis, keepdims=keepdims) == T(*want)


def test_reduction_symbols_and_errors():
    assert infer("mean", T("n", 3, 4), axis=(1, 2), keepdims=True) == T("n", 1, 1)
    assert infer("sum", T(0, 3), axis=(0,)) == T(3)  # reducing an empty axis is defined
    with pytest.raises(ShapeError, match=r"^sum: axis \(0, -2\) names an axis twice"):
        infer("sum", T(2, 3), axis=(0, -2))
    with pytest.raises(ShapeError, match="^max: axis 3 is out of range for rank 2"):
        infer("max", T(2, 3), axis=(3,))
    with pytest.raises(DTypeError, match="^log_sum_exp:"):
        infer("log_sum_exp", T(2, dtype="int32"))
    with pytest.raises(DTypeError, match="^sum:"):
        infer("sum", T(2, dtype="bool"))


def test_argmax_argmin():
    assert infer("argmax", T(2, 3, 4), axis=1) == T(2, 1, 4, dtype="int64")
    assert infer("argmin", T(2, 3, 4), axis=-1, keepdims=False) == T(2, 3, dtype="int64")
    with pytest.raises(ShapeError, match="^argmax: the input must have rank >= 1"):
        infer("argmax", T())
