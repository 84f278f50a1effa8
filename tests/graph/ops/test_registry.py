"""The op registry: lookup, schemas, arity, error naming, kernel hooks, dims arithmetic."""
import doctest

import pytest

import ember.graph.ops as ops
from ember.errors import ArgumentError, DTypeError, ShapeError, UnsupportedOpError
from ember.graph import Dim, TensorType, TupleType, Var
from ember.graph.ops import Pattern, call, get_op, infer_type, list_ops
from ember.graph.ops import dims as D
from ember.graph.ops import registry

F32 = "float32"


def test_every_family_is_registered_with_a_pattern():
    names = list_ops()
    for op in ("add", "nn.conv2d", "nn.dense", "nn.matmul", "sum", "argmax", "reshape", "concat", "gather",
               "resize", "shape_of", "constant_of_shape", "range", "topk", "cumsum", "einsum", "where", "cast"):
        assert op in names
    for name in names:
        op = get_op(name)
        assert isinstance(op.pattern, Pattern) and op.name == name
        assert op.compute is None or callable(op.compute)  # computes plug in per family


def test_patterns():
    assert get_op("nn.relu").pattern is Pattern.ELEMWISE
    assert get_op("add").pattern is Pattern.BROADCAST
    assert get_op("transpose").pattern is Pattern.INJECTIVE
    assert get_op("sum").pattern is Pattern.REDUCTION
    assert get_op("nn.conv2d").pattern is Pattern.OUT_ELEMWISE_FUSABLE
    assert get_op("topk").pattern is Pattern.OPAQUE


def test_unknown_op_suggests_close_names():
    with pytest.raises(UnsupportedOpError, match="nn.conv2d"):
        get_op("nn.conv2")


def test_register_twice_is_a_bug():
    with pytest.raises(ValueError, match="twice"):
        ops.register_op("add", infer=lambda a, k: a[0], pattern="broadcast")


def test_attribute_schema():
    x = TensorType((2, 3), F32)
    with pytest.raises(UnsupportedOpError, match="nn.softmax: unknown attribute.*'dim'"):
        infer_type("nn.softmax", [x], {"dim": 1})
    with pytest.raises(ArgumentError, match="reshape: attribute 'newshape' is required"):
        infer_type("reshape", [x], {})
    with pytest.raises(ArgumentError, match="nn.softmax: attribute 'axis' must be int"):
        infer_type("nn.softmax", [x], {"axis": "1"})
    with pytest.raises(ArgumentError, match="add: takes 2 argument"):
        infer_type("add", [x], {})
    with pytest.raises(ShapeError, match="exp: the type of argument 0 is unknown"):
        infer_type("exp", [None])


def test_kernel_hooks(monkeypatch):
    op = get_op("nn.relu")
    monkeypatch.setattr(op, "compute", None)
    monkeypatch.setattr(op, "schedule", {})
    ops.set_compute("nn.relu", "compute-fn")
    ops.set_schedule("nn.relu", "llvm", "schedule-fn")
    assert op.compute == "compute-fn" and op.schedule == {"llvm": "schedule-fn"}


def test_call_builds_typed_calls():
    x = Var("x", TensorType(("n", 3, 8, 8), F32))
    c = call("nn.max_pool2d", x, pool_size=(2, 2), strides=(2, 2))
    assert c.type == TensorType(("n", 3, 4, 4), F32) and c.attrs["pool_size"] == (2, 2)


def test_doctests():
    for mod in (registry, D, ops):
        assert doctest.testmod(mod).failed == 0


# -- symbolic dims ------------------------------------------------------------------------------

def test_dim_arithmetic():
    n, m = Dim("n"), Dim("m")
    assert D.dim_mul(n, 1) == n and D.dim_mul(3, 4) == 12
    assert D.dim_mul(n, m) == D.dim_mul(m, n) == Dim.parse("m*n")
    assert D.dim_div_exact(D.prod([n, 3, 4]), 12) == n
    assert D.dim_div_exact(D.prod([n, 3, 4]), D.dim_mul(n, 4)) == 3
    assert D.dim_div_exact(n, 2) is None
    assert D.dim_add(n, 0) == n and D.dim_add(n, -1) == Dim.parse("n-1") and D.dim_add(2, 3) == 5
    assert D.window_out(n, 3, 1, 1, 1, 1) == n  # a 'same' 3x3 keeps a symbolic size
    assert D.window_out(n, 3, 2, 1, 1, 1) == Dim.parse("(n-1)//2+1")
    assert D.window_out(224, 7, 2, 1, 3, 3) == 112
    assert D.window_out(5, 3, 2, 1, 0, 0, ceil_mode=True) == 2


def test_broadcast_dims():
    n, m = Dim("n"), Dim("m")
    assert D.broadcast_shapes((n, 1), (4,)) == (n, 4)
    assert D.broadcast_shapes((n, 1), (1, 5), (3, 1, 1)) == (3, n, 5)
    assert D.broadcast_shapes((n,), (4,)) == (4,)  # n must be 4 for this to be legal (assumed)
    with D.collect_assumptions() as assumed:
        assert D.broadcast_shapes((n,), (m,)) == (m,)  # assumed equal: the run checks m == n
        assert D.broadcast_shapes((n, 1), (4,)) == (n, 4)
    assert [str(a.cond) for a in assumed.values()] == ["n == m"]
    assert "must be equal" in next(iter(assumed.values())).why
    with pytest.raises(ShapeError, match=r"\(2, 3\) and \(4,\).*3 vs 4"):
        D.broadcast_shapes((2, 3), (4,))


def test_errors_name_the_op():
    with pytest.raises(ShapeError, match=r"^multiply: cannot broadcast"):
        infer_type("multiply", [TensorType((2, 3), F32), TensorType((2,), F32)])
    with pytest.raises(DTypeError, match=r"^add: operands must have one dtype, got float32, int64"):
        infer_type("add", [TensorType((2,), F32), TensorType((2,), "int64")])
    t = infer_type("split", [TensorType((6, 2), F32)], {"sizes": (2, 4)})
    assert t == TupleType([TensorType((2, 2), F32), TensorType((4, 2), F32)])
