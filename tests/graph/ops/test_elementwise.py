"""Type inference of elementwise ops: shapes under broadcasting, dtype rules, named errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ember.errors import DTypeError, ShapeError
from ember.graph import Dim
from ember.graph.ops import get_op, infer_type, list_ops

from .conftest import T, infer

UNARY_FLOAT = ["exp", "log", "sqrt", "sin", "tanh", "sigmoid", "erf", "floor", "nn.softplus", "nn.gelu",
               "nn.elu", "nn.selu", "nn.leaky_relu", "nn.hard_sigmoid", "nn.softsign", "nn.mish"]


@pytest.mark.parametrize("op", UNARY_FLOAT)
def test_unary_float_keeps_type(op):
    assert infer(op, T("n", 3)) == T("n", 3)
    assert infer(op, T(), ) == T()
    with pytest.raises(DTypeError, match=f"^{op}: the input must have a float dtype, got int32"):
        infer(op, T(2, dtype="int32"))


def test_unary_with_attrs_and_other_dtype_classes():
    assert infer("nn.leaky_relu", T(4), alpha=0.2) == T(4)
    assert infer("abs", T(4, dtype="int8")) == T(4, dtype="int8")
    assert infer("nn.relu", T(4, dtype="int32")) == T(4, dtype="int32")
    assert infer("isnan", T(2, 3)) == T(2, 3, dtype="bool")
    assert infer("isinf", T(2), detect_negative=False) == T(2, dtype="bool")
    assert infer("logical_not", T(2, dtype="bool")) == T(2, dtype="bool")
    assert infer("bitwise_not", T(2, dtype="uint8")) == T(2, dtype="uint8")
    assert infer("clip", T(3), a_min=0.0, a_max=6.0) == T(3)
    assert infer("cast", T("n", 2), dtype="int64") == T("n", 2, dtype="int64")
    with pytest.raises(DTypeError, match="^negative:"):
        infer("negative", T(2, dtype="uint8"))
    with pytest.raises(DTypeError, match="^logical_not:"):
        infer("logical_not", T(2))


def _np_shapes():
    dim = st.integers(1, 4)
    return st.lists(dim, min_size=0, max_size=4).map(tuple)


@settings(max_examples=60, deadline=None)
@given(_np_shapes(), _np_shapes())
def test_binary_broadcasting_matches_numpy(a, b):
    # make b broadcastable against a half of the time by forcing 1s where they disagree
    try:
        want = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(ShapeError, match="^add: cannot broadcast"):
            infer("add", T(*a), T(*b))
        return
    assert infer("add", T(*a), T(*b)) == T(*want)
    assert infer("less", T(*a), T(*b)) == T(*want, dtype="bool")


def test_binary_symbolic_broadcasting():
    assert infer("multiply", T("batch", 1, 8), T(4, 1)) == T("batch", 4, 8)
    assert infer("add", T("n", 3), T("n", 3)) == T("n", 3)
    assert infer("add", T("n"), T(1)) == T("n")
    # two symbols are assumed equal (the run checks it): the shorter text is kept
    from ember.graph.ops import dims as D

    with D.collect_assumptions() as assumed:
        assert infer("add", T("n"), T("mm")) == T("n")
    assert [str(a.cond) for a in assumed.values()] == ["mm == n"]


def test_binary_dtypes():
    assert infer("equal", T(2, dtype="int64"), T(1, dtype="int64")) == T(2, dtype="bool")
    assert infer("logical_and", T(2, dtype="bool"), T(2, dtype="bool")) == T(2, dtype="bool")
    assert infer("power", T(2), T(2, dtype="int64")) == T(2)  # ONNX Pow: exponent has its own dtype
    assert infer("left_shift", T(2, dtype="uint8"), T(2, dtype="uint8")) == T(2, dtype="uint8")
    assert infer("mod", T(3, dtype="int32"), T(3, dtype="int32"), fmod=True) == T(3, dtype="int32")
    with pytest.raises(DTypeError, match="^logical_or: operands must have bool"):
        infer("logical_or", T(2), T(2))
    with pytest.raises(DTypeError, match="^subtract: operands must have one dtype"):
        infer("subtract", T(2), T(2, dtype="float16"))


def test_where_and_prelu():
    assert infer("where", T("n", 1, dtype="bool"), T(3), T(1, 1)) == T("n", 3)
    with pytest.raises(DTypeError, match="^where: the condition must be bool"):
        infer("where", T(3), T(3), T(3))
    with pytest.raises(ShapeError, match="^where: cannot broadcast"):
        infer("where", T(2, dtype="bool"), T(3), T(3))
    assert infer("nn.prelu", T(1, 3, 4, 4), T(3, 1, 1)) == T(1, 3, 4, 4)


def test_every_elementwise_op_keeps_shape():
    for name in list_ops():
        op = get_op(name)
        if op.pattern.value == "elementwise" and op.num_args == 1:
            cls_dtype = "bool" if name == "logical_not" else "int32" if name == "bitwise_not" else "float32"
            t = infer_type(name, [T("n", 5, dtype=cls_dtype)], {"dtype": "float32"} if name == "cast" else {})
            assert t.shape == T("n", 5).shape, name
