"""The type-inference pass over modules and expressions."""
import doctest

import numpy as np
import pytest

import ember.graph.infer as infer_mod
from ember.errors import ShapeError
from ember.graph import (Call, Constant, Function, Module, TensorType, Tuple, TupleGetItem, TupleType, Var,
                         count_nodes, post_order)
from ember.graph.infer import infer_types


def _stem():
    data = Var("data", TensorType(("batch", 3, 32, 32), "float32"))
    w = Constant(np.zeros((8, 3, 3, 3), "float32"))
    conv = Call("nn.conv2d", [data, w], {"padding": (1, 1, 1, 1), "strides": (2, 2)})
    relu = Call("nn.relu", [conv])
    parts = Call("split", [relu], {"axis": 1, "sizes": (4, 4)})
    out = Call("add", [TupleGetItem(parts, 0), TupleGetItem(parts, 1)])
    return Module({"main": Function([data], Tuple([out, Call("nn.global_avg_pool2d", [relu])]))})


def test_fills_every_call_and_the_return_type():
    mod = infer_types(_stem())
    calls = [n for n in post_order(mod) if isinstance(n, Call)]
    assert len(calls) == 5 and all(c.type is not None for c in calls)
    t = TensorType(("batch", 4, 16, 16), "float32")
    assert mod.main.ret_type == TupleType([t, TensorType(("batch", 8, 1, 1), "float32")])
    assert infer_types(mod) is mod  # already typed: nothing to rebuild
    assert count_nodes(mod) == count_nodes(_stem())  # sharing is kept (relu is used twice)


def test_wrong_recorded_types_are_replaced():
    x = Var("x", TensorType((2,), "float32"))
    e = Call("exp", [x], type=TensorType((3,), "float32"))
    assert infer_types(e).type == TensorType((2,), "float32")


def test_errors_name_the_op_or_the_variable():
    x = Var("x", TensorType((2, 3), "float32"))
    bad = Call("add", [x, Call("transpose", [x])])
    with pytest.raises(ShapeError, match=r"^add: cannot broadcast shapes \(2, 3\) and \(3, 2\)"):
        infer_types(bad)
    with pytest.raises(ShapeError, match="variable %y has no type"):
        infer_types(Call("exp", [Var("y")]))
    f = Function([x], Call("exp", [x]), TensorType((5,), "float32"))
    with pytest.raises(ShapeError, match="declares result type"):
        infer_types(f)


def test_doctest():
    assert doctest.testmod(infer_mod).failed == 0
