"""structural_diff: None for equal graphs (up to parameter names), else the path to the first difference."""
import numpy as np
import pytest

from ember.graph import (Call, Constant, Dim, Function, Module, TensorType, Tuple, TupleGetItem, Var,
                         assert_structural_equal, const, structural_diff)
from ember.graph.ir import _interning

T = TensorType((1, 3, 224, 224), "float32")


def model(strides=(2, 2), op="nn.relu", w_fill=0.0, param="data", index=0, extra_arg=False, out_type=None):
    data = Var(param, T)
    w = Constant(np.full((64, 3, 7, 7), w_fill, "float32"))
    args = [data, w] + ([const(1.0, "float32")] if extra_arg else [])
    conv = Call("nn.conv2d", args, {"strides": strides, "padding": (3, 3, 3, 3)}, out_type)
    act = Call(op, [conv])
    split = Call("split", [act], {"sections": 2})
    return Module({"main": Function([data], TupleGetItem(Tuple([act, split]), index))})


def test_equal_graphs_have_no_diff():
    assert structural_diff(model(), model()) is None
    with _interning(False):
        other = model()
    assert structural_diff(model(), other) is None
    assert_structural_equal(model(), other)


@pytest.mark.parametrize("changes, message", [
    (dict(strides=(1, 1)), "main.body.tuple.fields[0].args[0].attrs['strides']: (2, 2) != (1, 1)"),
    (dict(op="nn.gelu"), "main.body.tuple.fields[0].op: 'nn.relu' != 'nn.gelu'"),
    (dict(w_fill=1.0), "main.body.tuple.fields[0].args[0].args[1].value[0, 0, 0, 0]: 0.0 != 1.0"),
    (dict(extra_arg=True), "main.body.tuple.fields[0].args[0].args: 2 != 3 arguments"),
    (dict(index=1), "main.body.index: 0 != 1"),
    (dict(out_type=T), "main.body.tuple.fields[0].args[0].type: None != Tensor[(1, 3, 224, 224), float32]"),
])
def test_diff_names_the_path(changes, message):
    assert structural_diff(model(), model(**changes)) == message
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(model(), model(**changes))
    assert str(info.value) == message


def test_alpha_equivalence():
    assert structural_diff(model(param="data"), model(param="input")) is None
    x, y = Var("x", T), Var("y", T)
    f = Function([x, y], Call("sub", [x, y]))
    assert structural_diff(f, Function([y, x], Call("sub", [y, x]))) is None  # same binding structure
    assert structural_diff(f, Function([y, x], Call("sub", [x, y]))) == (
        "fn.body.args[0]: %x: Tensor[(1, 3, 224, 224), float32] (param 0) != "
        "%x: Tensor[(1, 3, 224, 224), float32] (param 1)")


def test_params_and_free_vars():
    x, y = Var("x", T), Var("y", T)
    u = Var("u", TensorType((Dim("batch"), 3), "float32"))
    assert structural_diff(Function([x], x), Function([x, y], x)) == "fn.params: 1 != 2 parameters"
    assert structural_diff(Function([x], x), Function([u], u)) == (
        "fn.params[0].type: Tensor[(1, 3, 224, 224), float32] != Tensor[(batch, 3), float32]")
    # free variables must match by name unless asked to pair them up
    assert structural_diff(Call("f", [x]), Call("f", [y])) == (
        "expr.args[0]: %x: Tensor[(1, 3, 224, 224), float32] (free) != %y: Tensor[(1, 3, 224, 224), float32] (free)")
    assert structural_diff(Call("f", [x, y]), Call("f", [y, x]), map_free_vars=True) is None
    assert structural_diff(Call("f", [x, x]), Call("f", [y, x]), map_free_vars=True).startswith("expr.args[1]: %x")
    # a parameter on one side, a free variable on the other
    assert "(param 0) != " in structural_diff(Function([x], Call("f", [x])), Function([y], Call("f", [x])))


def test_symbolic_dims_and_types():
    a = Var("x", TensorType((Dim("batch"), 3), "float32"))
    b = Var("x", TensorType((Dim("n"), 3), "float32"))
    t = TensorType((Dim("batch"), 3), "float32")
    assert structural_diff(Call("f", [a], type=t), Call("f", [a], type=TensorType((Dim("n"), 3), "float32"))) == (
        "expr.type: Tensor[(batch, 3), float32] != Tensor[(n, 3), float32]")
    assert structural_diff(Function([a], a), Function([b], b)) == (
        "fn.params[0].type: Tensor[(batch, 3), float32] != Tensor[(n, 3), float32]")
    assert structural_diff(t, t) is None
    assert structural_diff(t, TensorType((Dim("batch"), 4), "float32")).startswith("type: ")


def test_operand_differences_are_reported_before_types():
    x = Var("x", T)
    t1, t2 = TensorType((1,), "float32"), TensorType((2,), "float32")
    a = Call("g", [Call("f", [x], {"k": 1})], type=t1)
    b = Call("g", [Call("f", [x], {"k": 2})], type=t2)
    assert structural_diff(a, b) == "expr.args[0].attrs['k']: 1 != 2"


def test_other_differences():
    x = Var("x")
    c3 = const([1, 2, 3], "int64")
    assert structural_diff(Call("f", [x]), Tuple([x])) == "expr: Call(f) != Tuple(1 fields)"
    assert structural_diff(Tuple([x, x]), Tuple([x])) == "expr.fields: 2 != 1 fields"
    assert structural_diff(c3, const([1, 2, 3], "int32")) == "expr.dtype: int64 != int32"
    assert structural_diff(c3, const([1, 2], "int64")) == "expr.shape: (3,) != (2,)"
    assert structural_diff(const(1.0, "float32"), const(-1.0, "float32")) == "expr.value: 1.0 != -1.0"
    assert structural_diff(Call("f", [x], {"a": 1}), Call("f", [x], {"a": True})) == "expr.attrs['a']: 1 != True"
    assert structural_diff(Call("f", [x], {"a": 1}), Call("f", [x])) == "expr.attrs['a']: 1 != <absent>"
    f = Function([x], x)
    assert structural_diff(Module({"main": f}), Module({"main": f, "g": f})) == \
        "module: functions ['main'] != ['g', 'main']"
    assert structural_diff(f, Call("f", [x])) == "fn: Function(1 params) != Call(f)"
    assert structural_diff(Function([x], x, TensorType((), "int8")), f) == "fn.ret_type: Tensor[(), int8] != None"


def test_diff_on_wide_shared_dags_is_fast():
    # every layer uses the previous one twice: comparing as trees would take 2**200 steps
    x, y = Var("x", T), Var("y", T)

    def chain(v):
        e = v
        for _ in range(200):
            e = Call("add", [e, e])
        return Function([v], e)

    assert structural_diff(chain(x), chain(y)) is None
    with _interning(False):
        other = chain(x)
    assert structural_diff(chain(x), other) is None
