"""Graph IR nodes: structural equality, hashing, interning, attributes, types and traversal."""
import doctest
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ember.graph as G
from ember.errors import DTypeError, ShapeError
from ember.graph import (Attrs, Call, Constant, Dim, Function, Module, TensorType, Tuple, TupleGetItem,
                         TupleType, Var, astext, const, free_vars, post_order, rewrite, structural_diff,
                         substitute, topo_calls, use_counts, walk)
from ember.graph.ir import _interning

F32 = TensorType((Dim("batch"), 3, 224, 224), "float32")
x = Var("x", TensorType((4,), "float32"))
y = Var("y", TensorType((4,), "float32"))


# -- types ----------------------------------------------------------------------------------------

def test_tensor_type_text_and_symbolic_dims():
    assert str(F32) == "Tensor[(batch, 3, 224, 224), float32]"
    assert str(TensorType((), "int64")) == "Tensor[(), int64]"
    assert str(TensorType((5,), "bool")) == "Tensor[(5,), bool]"
    t = TensorType(["batch", np.int64(3)], "float16")  # strings name Dims, numpy ints are ints
    assert t.shape == (Dim("batch"), 3) and type(t.shape[1]) is int
    assert t == TensorType((Dim("batch"), 3), "float16") and hash(t) == hash(TensorType((Dim("batch"), 3), "float16"))
    assert not t.is_static and TensorType((1, 2), "int8").is_static and t.ndim == 2
    assert TensorType((Dim("n"),), "float32") != TensorType((Dim("m"),), "float32")
    assert TensorType((1,), "float32") != TensorType((1,), "float64")
    assert str(TensorType((Dim("seq len"),), "int32")) == 'Tensor[("seq len",), int32]'


def test_tuple_and_func_types():
    a, b = TensorType((2,), "float32"), TensorType((), "int64")
    assert str(TupleType([a, b])) == "(Tensor[(2,), float32], Tensor[(), int64])"
    assert str(TupleType([a])) == "(Tensor[(2,), float32],)"
    assert TupleType([a, b]) == TupleType((a, b)) != TupleType((b, a))
    assert str(G.FuncType([a], b)) == "fn(Tensor[(2,), float32]) -> Tensor[(), int64]"


@pytest.mark.parametrize("shape, err", [((-1, 3), ShapeError), ((True, 3), ShapeError), ((2.0,), ShapeError),
                                        ("ab", ShapeError)])
def test_bad_shapes(shape, err):
    with pytest.raises(err):
        TensorType(shape, "float32")


@pytest.mark.parametrize("dtype", ["float", "float32x8", 5])
def test_bad_dtypes(dtype):
    with pytest.raises(DTypeError):
        TensorType((1,), dtype)


# -- attributes -----------------------------------------------------------------------------------

def test_attrs_normalized_sorted_and_read_only():
    a = Attrs({"strides": [np.int64(2), 2], "layout": "NCHW", "pads": np.array([1, 1]), "eps": np.float32(0.5)})
    assert list(a) == ["eps", "layout", "pads", "strides"]
    assert a["strides"] == (2, 2) and type(a["strides"][0]) is int
    assert a["pads"] == (1, 1) and a["eps"] == 0.5 and type(a["eps"]) is float
    assert a == {"strides": (2, 2), "layout": "NCHW", "pads": (1, 1), "eps": 0.5}
    assert hash(a) == hash(Attrs(layout="NCHW", strides=(2, 2), pads=[1, 1], eps=0.5))
    with pytest.raises(AttributeError):
        a.foo = 1
    with pytest.raises(TypeError):
        a["x"] = 1
    with pytest.raises(TypeError, match="attribute 'f'"):
        Attrs(f=object())
    with pytest.raises(ValueError):
        Attrs({"not a name": 1})


def test_attr_equality_is_typed_and_bitwise():
    # Python says 1 == 1.0 == True; as attributes they are different values
    assert len({Attrs(v=1), Attrs(v=1.0), Attrs(v=True)}) == 3
    assert Attrs(v=0.0) != Attrs(v=-0.0)
    assert Attrs(v=float("nan")) == Attrs(v=float("nan"))
    assert Attrs(v=(1, 2)) != Attrs(v=(1.0, 2))
    assert Attrs(v=Dim("n")) != Attrs(v="n")


def test_call_attr_access():
    c = Call("sum", [x], {"axis": [1], "keepdims": True})
    assert c.attr("axis") == (1,) and c.attr("keepdims") is True and c.attr("missing", 7) == 7
    assert dict(c.attrs) == {"axis": (1,), "keepdims": True}
    with pytest.raises(KeyError, match="sum has no attribute 'missing'"):
        c.attr("missing")


# -- nodes: equality, hashing, interning ----------------------------------------------------------

def build_small():
    w = Constant(np.arange(12, dtype="float32").reshape(3, 4))
    a = Call("add", (Var("x", TensorType((4,), "float32")), w), {"axis": 1})
    return Tuple([a, Call("nn.relu", [a], type=TensorType((3, 4), "float32"))])


def test_same_structure_is_equal_hashes_equal_and_is_interned():
    e1, e2 = build_small(), build_small()
    assert e1 == e2 and hash(e1) == hash(e2)
    assert e1 is e2  # hash-consed: building it twice gives the same node
    with _interning(False):
        e3 = build_small()
    assert e3 is not e1 and e3 == e1 and hash(e3) == hash(e1)  # equality is structural, not `is`


@pytest.mark.parametrize("other", [
    lambda: Call("add", [x, y], {"axis": 2}),                          # attr value
    lambda: Call("add", [x, y], {"axis": 1, "keepdims": False}),       # extra attr
    lambda: Call("add", [x, y], {"axis": 1.0}),                        # attr kind
    lambda: Call("sub", [x, y], {"axis": 1}),                          # op
    lambda: Call("add", [y, x], {"axis": 1}),                          # argument order
    lambda: Call("add", [x, y], {"axis": 1}, TensorType((4,), "float32")),  # type
    lambda: Call("add", [x, Var("y", TensorType((5,), "float32"))], {"axis": 1}),  # var type
])
def test_different_structure_is_not_equal(other):
    with _interning(False):
        base, o = Call("add", [x, y], {"axis": 1}), other()
    assert base != o and o != base


def test_constants_compare_dtype_shape_and_bytes():
    a = np.array([1.0, 2.0, 3.0], "float32")
    c = Constant(a)
    a[0] = 100  # the IR holds its own frozen copy
    assert c.value[0] == 1 and not c.value.flags.writeable
    with _interning(False):
        assert Constant(np.array([1, 2, 3], "float32")) == c
        assert hash(Constant(np.array([1, 2, 3], "float32"))) == hash(c)
        assert Constant(np.array([1, 2, 4], "float32")) != c
        assert Constant(np.array([1, 2, 3], "float64")) != c
        assert Constant(np.array([[1, 2, 3]], "float32")) != c
        assert Constant(np.array(0.0, "float32")) != Constant(np.array(-0.0, "float32"))
        assert Constant(np.array(np.nan, "float32")) == Constant(np.array(np.nan, "float32"))
    assert c.type == TensorType((3,), "float32") and c.dtype == "float32" and c.shape == (3,)
    assert const(2, "int64").type == TensorType((), "int64")
    assert const([1, 2], "bfloat16").dtype == "bfloat16"
    with pytest.raises(DTypeError):
        Constant(np.array(["a"]))


def test_pickle_and_deepcopy_return_the_interned_node():
    import copy

    e = build_small()
    assert pickle.loads(pickle.dumps(e)) is e
    assert copy.deepcopy(e) is e
    mod = Module({"main": Function([Var("x", TensorType((4,), "float32"))], e)})
    assert pickle.loads(pickle.dumps(mod)) == mod


def test_tuple_types_are_derived():
    t = Tuple([x, Call("f", [x])])
    assert t.type is None  # the Call's type is not inferred yet
    t = Tuple([x, const([1, 2], "int64")])
    assert t.type == TupleType([x.type, TensorType((2,), "int64")])
    assert TupleGetItem(t, 1).type == TensorType((2,), "int64")
    with pytest.raises(IndexError):
        TupleGetItem(t, 2)
    with pytest.raises(TypeError):
        TupleGetItem(t, True)


def test_construction_checks():
    with pytest.raises(TypeError, match="argument 1 of add"):
        Call("add", [x, 3])
    with pytest.raises(ValueError):
        Call("bad op", [x])
    with pytest.raises(ValueError, match="named 'x'"):
        Function([x, Var("x")], x)
    with pytest.raises(TypeError, match="parameter 0"):
        Function([const(1)], x)
    with pytest.raises(TypeError, match="Function"):
        Call("f", [Function([x], x)])
    with pytest.raises(TypeError):
        Var("x", "float32")  # a type, not a dtype string
    with pytest.raises(TypeError, match="span"):
        Call("add", [x, x], span=("Add_1", 3))
    with pytest.raises(TypeError, match="span"):
        with G.source_span("Add_1", 3):
            pass


def test_module_is_an_immutable_mapping():
    f = Function([x], Call("nn.relu", [x]))
    g = Function([y], y)
    m = Module({"main": f, "helper": g})
    assert m.main is f and m["helper"] is g and list(m) == ["helper", "main"] and len(m) == 2
    assert m == Module([("helper", g), ("main", f)]) and hash(m) == hash(Module({"helper": g, "main": f}))
    m2 = m.with_function("main", g)
    assert m2.main is g and m.main is f
    with pytest.raises(KeyError, match="no function 'nope'"):
        m["nope"]
    e = Call("add", [y, x])
    assert Module.from_expr(e).main.params == (y, x)


# -- traversal ------------------------------------------------------------------------------------

def diamond():
    """x -> a=relu(x) -> b=exp(a), c=log(a) -> d=add(b, c); `a` is shared."""
    a = Call("nn.relu", [x])
    b, c = Call("exp", [a]), Call("log", [a])
    return a, b, c, Call("add", [b, c])


def test_post_order_visits_each_node_once_operands_first():
    a, b, c, d = diamond()
    assert post_order(d) == [x, a, b, c, d]
    seen = []
    walk(d, seen.append)
    assert seen == [x, a, b, c, d]
    assert topo_calls(d) == [a, b, c, d]


def test_rewrite_visits_shared_subexpressions_once():
    a, b, c, d = diamond()
    calls = []

    def fn(n):
        calls.append(n)
        if isinstance(n, Call) and n.op == "nn.relu":
            return Call("nn.gelu", n.args)
        return None

    out = rewrite(d, fn)
    assert len(calls) == 5  # x, a, b, c, d: `a` once although two nodes use it
    assert [n.op for n in topo_calls(out)] == ["nn.gelu", "exp", "log", "add"]
    assert out.args[0].args[0] is out.args[1].args[0]  # still shared
    assert rewrite(d, lambda n: None) is d  # nothing replaced: the very same graph


def test_rewrite_rejects_non_expressions_and_rewrites_modules():
    a, b, c, d = diamond()
    with pytest.raises(TypeError, match="rewrite"):
        rewrite(d, lambda n: 3)
    mod = Module({"main": Function([x], d)})
    out = rewrite(mod, lambda n: Var("z", x.type) if n == x else None)
    assert out.main.params == (Var("z", x.type),) and free_vars(out) == []
    assert rewrite(mod, lambda n: None) is mod


def test_substitute_free_vars_and_use_counts():
    a, b, c, d = diamond()
    assert free_vars(d) == [x]
    assert free_vars(Function([x], d)) == []
    assert free_vars(Call("add", [y, Call("mul", [x, y])])) == [y, x]
    e = substitute(d, {x: y})
    assert free_vars(e) == [y] and e.op == "add"
    uses = use_counts(d)
    assert uses[x] == 1 and uses[a] == 2 and uses[b] == uses[c] == 1 and uses[d] == 0
    assert use_counts(Call("add", [x, x]))[x] == 2
    from ember.graph.visit import readers_of

    readers = readers_of(d)
    assert readers[a] == [b, c] and readers[b] == readers[c] == [d] and d not in readers
    twice = Call("add", [x, x])
    assert readers_of(twice)[x] == [twice, twice]
    fu = use_counts(Function([x, y], d))
    assert fu[d] == 1 and fu[y] == 0 and fu[x] == 1  # params bind, they are not uses


def test_topo_calls_respects_dependencies():
    a, b, c, d = diamond()
    t = TupleGetItem(Tuple([d, Call("neg", [b])]), 0)
    order = topo_calls(t)
    pos = {id(n): i for i, n in enumerate(order)}
    for n in order:
        for arg in n.args:
            if isinstance(arg, Call):
                assert pos[id(arg)] < pos[id(n)]
    assert len(order) == 5


def test_deep_graphs_need_no_recursion():
    e = x
    for i in range(5000):  # deeper than Python's recursion limit
        e = Call("nn.relu", [e], {"i": i % 3})
    assert len(post_order(e)) == 5001
    assert rewrite(e, lambda n: None) is e
    out = rewrite(e, lambda n: Call("exp", n.args, n.attrs) if isinstance(n, Call) else None)
    assert out.op == "exp" and len(topo_calls(out)) == 5000
    text = astext(Function([x], e))
    assert text.count("\n") == 5001
    renamed = substitute(e, {x: y})
    assert structural_diff(Function([x], e), Function([y], renamed)) is None


def test_constant_depth_counts_levels_over_constants_and_needs_no_recursion():
    from ember.graph.visit import constant_depth

    c = const(np.ones(4, np.float32))
    k = Call("add", [Call("sqrt", [c]), c])
    assert constant_depth(c) == 0 and constant_depth(k) == 2
    assert constant_depth(Call("multiply", [x, k])) == float("inf")  # reads a variable
    assert constant_depth(Call("range", [])) == float("inf")  # no operands: not a constant's value
    assert constant_depth(Tuple([c])) == float("inf")
    e = x
    for i in range(5000):  # an activation as deep as a model: walked once, no recursion
        e = Call("add", [e, Call("nn.relu", [k], {"i": i})])
    assert constant_depth(e) == float("inf")
    assert constant_depth(e.args[1]) == 3
    deep = c
    for _ in range(3000):  # deeper than the recursion limit, over constants alone
        deep = Call("negative", [deep])
    assert constant_depth(deep) == 3000


def test_doctests():
    from ember.graph import attrs, diff, ir, printer, types, visit

    for mod in (G, types, attrs, ir, visit, printer, diff):
        globs = {**vars(G), "np": np}
        res = doctest.testmod(mod, extraglobs=globs)
        assert res.failed == 0, mod.__name__


# -- property: random DAGs survive an identity rewrite ---------------------------------------------

attr_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(width=32) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3), max_leaves=4)


@st.composite
def dag_recipes(draw):
    """A graph as plain data: ops over the indices of earlier nodes (so it can be built twice)."""
    n_inputs = draw(st.integers(1, 3))
    steps = []
    for i in range(draw(st.integers(1, 12))):
        avail = n_inputs + 1 + len(steps)  # inputs, one constant, earlier calls
        op = draw(st.sampled_from(["add", "mul", "nn.relu", "concat", "nn.conv2d"]))
        args = draw(st.lists(st.integers(0, avail - 1), min_size=1, max_size=3))
        attrs = draw(st.dictionaries(st.sampled_from(["axis", "alpha", "mode", "pads"]), attr_values, max_size=2))
        typed = draw(st.booleans())
        steps.append((op, tuple(args), attrs, typed))
    n_out = draw(st.integers(1, min(3, len(steps))))
    return n_inputs, steps, n_out


def build(recipe):
    n_inputs, steps, n_out = recipe
    nodes = [Var(f"in{i}", TensorType((Dim("batch"), 4), "float32")) for i in range(n_inputs)]
    nodes.append(Constant(np.arange(8, dtype="float32").reshape(2, 4)))
    for op, args, attrs, typed in steps:
        nodes.append(Call(op, [nodes[a] for a in args], attrs,
                          TensorType((Dim("batch"), 4), "float32") if typed else None))
    outs = nodes[-n_out:]
    body = outs[0] if n_out == 1 else TupleGetItem(Tuple(outs), n_out - 1) if n_out == 3 else Tuple(outs)
    return Function(nodes[:n_inputs], body)


def fresh_copy(n):
    """A new node equal to ``n`` (with interning off, a distinct object)."""
    if isinstance(n, Call):
        return Call(n.op, list(n.args), dict(n.attrs), n.type)
    if isinstance(n, Tuple):
        return Tuple(list(n.fields))
    if isinstance(n, Constant):
        return Constant(n.value.copy())
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag_recipes())
def test_identity_rewrite_of_random_dags(recipe):
    f = build(recipe)
    assert build(recipe) is f
    count = []
    same = rewrite(f, lambda n: count.append(n))
    assert same is f and len(count) == len(post_order(f))
    with _interning(False):
        g = build(recipe)
        copied = rewrite(g, fresh_copy)
    assert copied is not f and copied == f and hash(copied) == hash(f)
    assert astext(copied) == astext(f) == astext(g)
    assert structural_diff(copied, f) is None


def test_interning_does_not_keep_graphs_alive():
    import gc

    from ember.graph import ir

    gc.collect()
    before = len(ir._TABLE)
    e = Var("tmp", TensorType((3,), "float32"))
    for i in range(100):
        e = Call("exp", [e], {"i": i})
    assert len(ir._TABLE) >= before + 101
    del e
    gc.collect()
    assert len(ir._TABLE) <= before


def test_span_is_provenance_not_structure():
    x = Var("x", TensorType((3,), "float32"))
    a = Call("exp", [x], span=("Exp_1",))
    assert a.span == ("Exp_1",)
    b = Call("exp", [x], span=("Exp_2",))  # the same value from another node: one call
    assert b is a and a.span == ("Exp_1", "Exp_2")
    assert a.replace(args=(x,)).span == ("Exp_1", "Exp_2")
    with G.ir._interning(False):
        c = Call("exp", [x], span=("Exp_3",))
    assert c == a and hash(c) == hash(a) and c.span == ("Exp_3",)  # equality ignores it
    with G.source_span("Relu_3", "", "Relu_3"):
        r = Call("nn.relu", [x])
        assert Call("sigmoid", [x], span=("mine",)).span == ("mine",)  # an explicit span wins
    assert r.span == ("Relu_3",)
    assert Call("tanh", [x]).span == ()  # outside the block
    assert G.merge_spans(c, x, r, a) == ("Exp_3", "Relu_3", "Exp_1", "Exp_2")
    assert pickle.loads(pickle.dumps(a)).span == ("Exp_1", "Exp_2")
    with pytest.raises(TypeError, match="span"):
        Call("exp", [x], span=(1,))


def test_adopt_takes_a_fresh_array_without_copying_and_freezes_it():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = Constant.adopt(a)
    assert np.shares_memory(c.value, a) and not c.value.flags.writeable
    assert c == Constant(np.arange(12, dtype=np.float32).reshape(3, 4))  # same value, same node
    t = np.ones((4, 3), np.float32).T  # not C-contiguous: copied into C order
    assert not np.shares_memory(Constant.adopt(t).value, t) and Constant.adopt(t).value.flags.c_contiguous
    b = np.zeros(3, np.float32)
    assert not np.shares_memory(Constant(b).value, b)  # the constructor still copies


def test_big_constants_differing_outside_the_hashed_sample_are_not_equal():
    """A constant over 1 MiB hashes a sample of its bytes; equality still compares them all, so
    two that differ only in an unsampled byte are distinct (and interning keeps both)."""
    import numpy as np

    from ember.graph import Constant

    a = np.zeros(1 << 19, np.float32)  # 2 MiB
    b = a.copy()
    b[(1 << 18) + 3] = 1.0  # in the middle: outside the first and last 256 KiB
    ca, cb = Constant(a), Constant(b)
    assert ca != cb and not (ca == cb)
    assert Constant(a.copy()) == ca and hash(Constant(a.copy())) == hash(ca)
