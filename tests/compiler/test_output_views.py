"""Model outputs that are views of intermediates (a squeeze or reshape of a kernel's result) are
copied after the last kernel: their bytes must outlive every later kernel's value."""
import numpy as np

import ember
from ember.graph import Function, Module, TensorType, Tuple, Var
from ember.graph.ops import call


def test_a_viewed_output_is_not_overwritten_by_a_later_value():
    x = Var("x", TensorType((3, 5, 1, 12), "float32"))
    window = dict(pool_size=(1, 3), strides=(1, 3), padding=(0, 0, 0, 0))
    # a view of the max pool's result, then an average pool whose value could take its bytes
    first = call("squeeze", call("nn.max_pool2d", x, **window), axis=(2,))
    second = call("squeeze", call("nn.avg_pool2d", x, **window), axis=(2,))
    body = Tuple([first, second])
    exe = ember.compile(Module({"main": Function([x], body, body.type)}))
    a = np.random.default_rng(0).standard_normal((3, 5, 1, 12)).astype(np.float32)
    got = exe.run(a)
    windows = a[:, :, 0].reshape(3, 5, 4, 3)
    np.testing.assert_allclose(got[0], windows.max(-1), rtol=1e-6)
    np.testing.assert_allclose(got[1], windows.mean(-1), rtol=1e-5, atol=1e-6)
