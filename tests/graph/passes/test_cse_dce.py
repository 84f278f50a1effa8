from ember.graph import Tuple, TupleGetItem, Var, post_order
from ember.graph.ir import _interning
from ember.graph.passes import PassContext, cse, dce

from .conftest import T, call, module


def test_cse_merges_equal_calls_built_without_interning():
    x = Var("x", T(4))
    with _interning(False):
        a, b = call("exp", x), call("exp", x)
        mod = module([x], call("add", a, b))
    assert a is not b
    after = PassContext().run(mod, [cse])
    add = after.main.body
    assert add.args[0] is add.args[1]


def test_dce_takes_the_field_of_a_literal_tuple():
    x = Var("x", T(4))
    e, r = call("exp", x), call("nn.relu", x)
    after = PassContext().run(module([x], call("negative", TupleGetItem(Tuple([e, r]), 1))), [dce])
    assert after.main.body.args[0].op == "nn.relu"
    assert all(not (hasattr(n, "op") and n.op == "exp") for n in post_order(after))
