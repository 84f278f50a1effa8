import numpy as np

import ember
from ember.graph import Var, const, topo_calls
from ember.graph.passes import PassContext, sink_reshapes

from .conftest import T, call, module, rand


def _linear(x, w, lead):
    """How the ONNX frontend imports a Linear layer on a 3-D activation."""
    flat = call("reshape", x, newshape=(int(np.prod(lead)), w.shape[0]))
    return call("reshape", call("nn.matmul", flat, const(w)), newshape=tuple(lead) + (w.shape[1],))


def test_a_bias_activation_and_residual_follow_the_product_and_reshapes_cancel():
    """An MLP block: linear, bias, GELU, linear, bias, residual. After the pass the bias and
    the activation read the products themselves, and the flattening of the second linear
    cancels the first one's unflattening."""
    x = Var("x", T(2, 5, 8))
    h = call("nn.gelu", call("add", _linear(x, rand(8, 16), (2, 5)), const(rand(16))))
    y = call("add", call("add", _linear(h, rand(16, 8), (2, 5)), const(rand(1, 1, 8))), x)
    mod = module([x], y)
    after = PassContext(opt_level=3).run(mod, [sink_reshapes])
    calls = topo_calls(after)
    mms = [c for c in calls if c.op == "nn.matmul"]
    assert len(mms) == 2 and mms[1].args[0].op == "nn.gelu"  # no reshape pair in between
    readers = [c for c in calls if any(a is mms[0] for a in c.args)]
    assert [c.op for c in readers] == ["add"]
    xv = rand(2, 5, 8)
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], ember.compile(mod, opt_level=1).run(xv)[0],
                               rtol=1e-5, atol=1e-5)


def test_an_operand_varying_along_another_axis_keeps_the_reshape():
    x = Var("x", T(6, 4))
    r = call("reshape", x, newshape=(2, 3, 4))
    mod = module([x], call("add", r, const(rand(2, 1, 4))))
    assert PassContext(opt_level=3).run(mod, [sink_reshapes]) is mod


def test_ops_whose_attributes_name_an_axis_or_a_shape_keep_the_reshape():
    x = Var("x", T(6, 4))
    r = call("reshape", x, newshape=(2, 3, 4))
    for y in (call("nn.bias_add", r, const(rand(3)), axis=1), call("expand", r, shape=(2, 2, 3, 4))):
        mod = module([x], y)
        assert PassContext(opt_level=3).run(mod, [sink_reshapes]) is mod


def test_a_reshape_to_a_scalar_stays_where_it_is():
    """QLinearMatMul's scales arrive as (1,) tensors reshaped to scalars: there is no axis to
    sink the reshape past (the pass used to index the scalar's last axis)."""
    x, s = Var("x", T()), Var("s", T(1))
    y = call("multiply", x, call("reshape", s, newshape=()))
    after = PassContext(opt_level=3).run(module([x, s], y), [sink_reshapes])
    assert [c.op for c in topo_calls(after)] == ["reshape", "multiply"]
    xv, sv = np.float32(3.0), rand(1)
    np.testing.assert_allclose(ember.compile(module([x, s], y)).run(xv, sv)[0], xv * sv[0], rtol=1e-6)


def test_a_residual_that_is_not_a_reshape_is_viewed_in_the_products_shape():
    """``add(reshape(matmul(...)), r)`` with ``r`` a layer's plain output (BERT's residual
    stream): ``r`` is viewed flat, so the add follows the product and joins its epilogue."""
    x = Var("x", T(2, 5, 8))
    r = call("nn.relu", x)
    y = call("add", _linear(x, rand(8, 8), (2, 5)), r)
    mod = module([x], y)
    after = PassContext(opt_level=3).run(mod, [sink_reshapes])
    calls = topo_calls(after)
    (mm,) = [c for c in calls if c.op == "nn.matmul"]
    (add,) = [c for c in calls if c.op == "add"]
    assert any(a is mm for a in add.args) and after.main.body.op == "reshape"
    exe = ember.compile(mod)
    assert not [n for n, _ in exe.graph.functions if n.startswith("fused_reshape_add")]
    xv = rand(2, 5, 8)
    np.testing.assert_allclose(exe.run(xv)[0], ember.compile(mod, opt_level=1).run(xv)[0], rtol=1e-5, atol=1e-5)
