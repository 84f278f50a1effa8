"""A narrowing cast after data movement is moved in front of it, where it joins its producer
as an epilogue (``ember.graph.passes.hoist_casts``)."""
import numpy as np
import pytest

import ember
from ember.graph import Var, const, topo_calls
from ember.graph.passes import PassContext, hoist_casts
from ember.target import Target

from .conftest import T, call, module, rand


def run(mod):
    return PassContext(opt_level=3).run(mod, [hoist_casts])


def _norm(x, d):
    return call("nn.layer_norm", x, const(rand(d) + 1), const(rand(d)))


def _bits(a):
    return np.asarray(a).view(np.uint16) if np.asarray(a).dtype.itemsize == 2 else np.asarray(a)


def test_a_cast_after_reshape_and_transpose_moves_before_them_and_joins_the_norm():
    x = Var("x", T(1, 6, 12, 32))
    moved = call("reshape", call("transpose", _norm(x, 32), axes=(0, 2, 1, 3)), newshape=(12, 192))
    mod = module([x], call("cast", moved, dtype="bfloat16"))
    after = run(mod)
    ops = [c.op for c in topo_calls(after)]
    assert ops == ["nn.layer_norm", "cast", "transpose", "reshape"]
    exe = ember.compile(after)
    kernels = [name for name, _ in exe.graph.functions]
    assert any("layer_norm_cast" in k for k in kernels), kernels  # (the cast is the norm's epilogue)
    xv = rand(1, 6, 12, 32)
    np.testing.assert_array_equal(_bits(exe.run(xv)[0]), _bits(ember.compile(mod).run(xv)[0]))  # (bit for bit)


@pytest.mark.parametrize("case", ["widening", "shared movement", "not movement"])
def test_left_alone(case):
    x = Var("x", T(4, 8, dtype="float16" if case == "widening" else "float32"))
    t = call("transpose", call("exp", x), axes=(1, 0))
    body = call("cast", t, dtype="float32" if case == "widening" else "bfloat16")
    if case == "shared movement":  # (the transpose read twice: moving the cast would not remove it)
        body = ember.graph.Tuple([body, call("exp", t)])
    elif case == "not movement":
        body = call("cast", call("nn.softmax", call("exp", x)), dtype="bfloat16")
    mod = module([x], body)
    assert run(mod) is mod


@pytest.mark.skipif(not Target.host().has_feature("avx512bf16"), reason="the host has no AVX512-BF16")
def test_in_bf16_a_linear_layer_after_a_norm_reads_the_norms_bf16_output():
    x = Var("x", T(1, 24, 64))
    h = call("reshape", _norm(x, 64), newshape=(24, 64))
    mod = module([x], call("nn.dense", h, const(rand(32, 64) * 0.1)))
    exe = ember.compile(mod, precision="bf16")
    kernels = [name for name, _ in exe.graph.functions]
    casts = [k for k in kernels if "cast" in k.replace("bitcast", "") and "layer_norm" not in k]
    assert not casts, kernels  # (no kernel of its own casts the norm's output)
    xv = rand(1, 24, 64)
    ref = ember.compile(mod).run(xv)[0]
    np.testing.assert_allclose(exe.run(xv)[0], ref, rtol=3e-2, atol=3e-2 * np.abs(ref).max())
