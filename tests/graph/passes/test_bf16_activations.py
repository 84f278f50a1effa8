"""In bf16, an activation that a conv reads and a residual add reads too is stored once, in
bfloat16 (``ember.graph.passes.bf16_activations``): no kernel of its own casts it, and the
results stay within bf16's error of float32's."""
import numpy as np
import pytest

import ember
from ember.graph import Var, const
from ember.kernels.conv_nchwc import channel_block
from ember.target import Target

from .conftest import T, call, module, rand

pytestmark = pytest.mark.skipif(not Target.host().has_feature("avx512bf16"), reason="the host has no AVX512-BF16")
FB = channel_block()


def _conv(x, w):
    return call("nn.conv2d", x, const(w), padding=(1, 1, 1, 1))


def _blocks(x, c, n=3):
    """``n`` ResNet blocks: each block's output read by the next block's conv and its add."""
    for _ in range(n):
        y = call("nn.relu", _conv(x, rand(c, c, 3, 3) * 0.1))
        x = call("nn.relu", call("add", _conv(y, rand(c, c, 3, 3) * 0.1), x))
    return x


def test_a_block_output_read_by_a_conv_and_an_add_is_stored_once_in_bf16():
    c = 2 * FB
    x = Var("x", T(1, c, 10, 10))
    mod = module([x], call("nn.global_avg_pool2d", _blocks(call("nn.relu", _conv(x, rand(c, c, 3, 3) * 0.1)), c)))
    exe = ember.compile(mod, precision="bf16")
    kernels = [name for name, _ in exe.graph.functions]
    assert not [k for k in kernels if k.startswith("fused_cast")], kernels  # (each cast an epilogue)
    main = str(exe.graph.main)
    assert main.count("bfloat16]") >= 6  # (every block's output stored in bf16)
    xv = rand(1, c, 10, 10)
    ref = ember.compile(mod).run(xv)[0]
    got = exe.run(xv)[0]
    np.testing.assert_allclose(got, ref, rtol=3e-2, atol=3e-2 * np.abs(ref).max())


def test_a_model_output_read_by_a_conv_stays_float32():
    c = 2 * FB
    x = Var("x", T(1, c, 8, 8))
    y = call("nn.relu", _conv(x, rand(c, c, 3, 3) * 0.1))
    z = call("add", _conv(y, rand(c, c, 3, 3) * 0.1), y)
    mod = module([x], ember.graph.Tuple([y, z]))
    exe = ember.compile(mod, precision="bf16")
    xv = rand(1, c, 8, 8)
    ref_y = ember.compile(mod).run(xv)[0]
    np.testing.assert_array_equal(exe.run(xv)[0], ref_y)  # (the first conv reads x as floats: y is exact)
