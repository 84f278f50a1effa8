"""Reductions that keep the last axis: vectorized along it, the reduced axes outside, the
outer kept axes parallel (ember.graph.ops.schedule.reduce) -- against numpy."""
import numpy as np
import pytest

import ember
from ember.graph import Function, Module, Var
from ember.graph.ir import Call
from ember.graph.ops import infer_type

from .conftest import T


def _call(op, *args, **attrs):
    return Call(op, list(args), attrs, infer_type(op, [a.type for a in args], attrs))


@pytest.mark.parametrize("shape,axes,keepdims,op", [
    ((1, 6, 14, 14, 16), (2, 3), True, "mean"),   # squeeze-excitation's mean of a blocked tensor
    ((2, 5, 7, 9), (0, 2), False, "sum"),          # a last axis longer than a vector, not a multiple
    ((3, 40), (0,), True, "max"),
    ((4, 3, 5), (1,), False, "mean"),
    ((3, 1, 8), (1,), True, "min"),
    ((1, 3, 7, 7), (2, 3), True, "mean"),           # the last axis reduced: the generic schedule
    ((1, 14, 14, 384), (1, 2), True, "sum"),         # ConvNeXt-V2's norm over the plane, channels
    ((2, 7, 7, 100), (1, 2), True, "max"),           # last: past the 64 lanes one vector may hold
])
def test_reductions_keeping_the_last_axis_match_numpy(shape, axes, keepdims, op):
    x = Var("x", T(*shape))
    exe = ember.compile(Module({"main": Function([x], _call(op, x, axis=axes, keepdims=keepdims))}))
    xv = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(exe.run(xv)[0], getattr(np, op)(xv, axis=axes, keepdims=keepdims), rtol=1e-5, atol=1e-6)


def test_an_epilogue_runs_on_the_reduced_vectors():
    x = Var("x", T(2, 9, 24))
    y = _call("sigmoid", _call("mean", x, axis=(1,), keepdims=True))
    exe = ember.compile(Module({"main": Function([x], y)}))
    xv = np.random.default_rng(1).standard_normal((2, 9, 24)).astype(np.float32)
    np.testing.assert_allclose(exe.run(xv)[0], 1 / (1 + np.exp(-xv.mean(axis=1, keepdims=True))), rtol=1e-5)


def test_a_norm_over_the_plane_of_wide_channels_matches_numpy():
    """ConvNeXt-V2's global response norm: the L2 norm over H and W of N H W C, 384 channels
    (its scheduling once refused to vectorize a 384-wide axis)."""
    x = Var("x", T(1, 14, 14, 384))
    exe = ember.compile(Module({"main": Function([x], _call("l2_norm", x, axis=(1, 2), keepdims=True))}))
    xv = np.random.default_rng(2).standard_normal((1, 14, 14, 384)).astype(np.float32)
    np.testing.assert_allclose(exe.run(xv)[0], np.sqrt((xv * xv).sum(axis=(1, 2), keepdims=True)), rtol=1e-5)


@pytest.mark.parametrize("shape,axes,keepdims,op", [
    ((1, 128, 256), None, False, "max"),        # a dynamic quantizer's range: the whole tensor
    ((1, 128, 1024), None, True, "min"),
    ((64, 512), (1,), True, "sum"),              # rows in parallel, each through lane partials
    ((4, 8, 256), (1, 2), False, "mean"),        # two trailing axes: chunks never split a lane run
])
def test_trailing_reductions_run_through_lane_partials_in_registers(shape, axes, keepdims, op):
    """A float sum/max/min over trailing axes of static sizes keeps a few vectors of partials in
    registers (``reduce_lanes``: the partial stage computed inside the row loop, or through a
    local copy for a whole tensor), instead of one scalar chain; results as numpy's, NaN kept."""
    from ember.compiler.group import compute_group

    x = Var("x", T(*shape))
    fn = Function([x], _call(op, x, axis=axes, keepdims=keepdims))
    _, _, stages_of, anchor, env = compute_group(fn, "g")
    acc = env[anchor].op.attrs.get("acc", env[anchor])
    assert acc.op.attrs.get("kind") == "reduce_lanes"
    exe = ember.compile(Module({"main": fn}))
    xv = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    want = getattr(np, op)(xv, axis=axes, keepdims=keepdims)
    np.testing.assert_allclose(exe.run(xv)[0], want, rtol=1e-5, atol=1e-5)
    if op in ("max", "min"):
        xv.reshape(-1)[12345 % xv.size] = np.nan
        assert np.isnan(exe.run(xv)[0]).all()
