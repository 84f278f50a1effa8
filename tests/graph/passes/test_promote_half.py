import numpy as np

import ember
from ember.graph import Var, topo_calls
from ember.graph.passes import PassContext, promote_half

from .conftest import T, call, module


def test_half_matmul_accumulates_in_float32():
    a, b = Var("a", T(1, 512, dtype="float16")), Var("b", T(512, 1, dtype="float16"))
    mod = module([a, b], call("nn.matmul", a, b))
    after = PassContext().run(mod, [promote_half])
    assert [c.op for c in topo_calls(after)] == ["cast", "cast", "nn.matmul", "cast"]
    assert after.main.body.type.dtype == "float16"
    # 512 products of ~1: a float16 running sum would lose the small terms
    av = np.full((1, 512), 1.0, np.float16)
    bv = np.full((512, 1), 1.0, np.float16)
    bv[::2] = np.float16(1.0 + 2 ** -10)
    got = ember.compile(mod).run(av, bv)[0]
    want = (av.astype(np.float32) @ bv.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(got, want)


def test_float32_and_non_accumulating_ops_are_untouched():
    x = Var("x", T(4, dtype="float16"))
    y = Var("y", T(4))
    mod = module([x, y], call("add", call("cast", call("exp", x), dtype="float32"), call("sum", y, axis=(0,), keepdims=True)))
    assert PassContext().run(mod, [promote_half]) is mod
