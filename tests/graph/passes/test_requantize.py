import numpy as np
import pytest

from ember.graph import Constant, Var, const, topo_calls
from ember.graph.passes import PassContext, VerifyAfterPass, requantize

from .conftest import T, call, module, rand


def _run(mod):
    return PassContext(opt_level=2, instruments=[VerifyAfterPass()]).run(mod, [requantize])


def _eval(e, x):
    """numpy's float32 value of the chain ``e`` over the variable bound to ``x``."""
    if isinstance(e, Var):
        return x
    if isinstance(e, Constant):
        return e.value
    a = [_eval(v, x) for v in e.args]
    if e.op == "nn.bias_add":
        return a[0] + a[1].reshape((-1, 1, 1))
    return {"multiply": np.multiply, "divide": np.divide, "add": np.add, "subtract": np.subtract,
            "round": lambda v: np.round(v)}[e.op](*a).astype(np.float32)


def _chains(x):
    sw = const((np.random.default_rng(1).random((4, 1, 1)) * 0.01 + 0.001).astype(np.float32))
    sa, so = const(np.float32(0.037)), const(np.float32(0.051))
    b = const(rand(4))
    dq = call("multiply", call("multiply", x, sa), sw)
    return [
        call("divide", call("nn.bias_add", dq, b, axis=1), so),  # a QDQ conv's requantization
        call("divide", call("add", dq, const(rand(4, 1, 1))), so),
        call("divide", call("subtract", const(np.float32(3.0)), call("multiply", sa, x)), so),  # (c - x, c * x)
    ]


@pytest.mark.parametrize("case", range(3))
def test_a_rounded_chain_of_constant_steps_is_one_multiply_add(case):
    x = Var("x", T(1, 4, 5, 6))
    y = call("round", _chains(x)[case])
    after = _run(module([x], y))
    ops = [c.op for c in topo_calls(after.main)]
    assert ops.count("multiply") == 1 and "divide" not in ops and ops[-1] == "round"
    xv = np.random.default_rng(2).integers(-3000, 3000, (1, 4, 5, 6)).astype(np.float32)
    want = _eval(y, xv)
    got = _eval(after.main.body, xv)
    # the same codes but where a value lies within a few ulps of a half
    assert np.mean(got != want) < 0.01 and np.abs(got - want).max() <= 1


def test_two_steps_without_a_division_a_division_alone_and_an_unrounded_chain_are_left_alone():
    x = Var("x", T(1, 4, 5, 6))
    for y in (call("round", call("add", call("multiply", x, const(np.float32(2.0))), const(np.float32(1.0)))),
              call("round", call("divide", x, const(np.float32(0.051)))),  # (a quantizer's: exact)
              _chains(x)[0]):
        mod = module([x], y)
        assert _run(mod) is mod or [c.op for c in topo_calls(_run(mod).main)] == [c.op for c in topo_calls(mod.main)]
