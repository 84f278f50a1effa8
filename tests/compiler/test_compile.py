"""ember.compile on graph modules: running, input checking, the program and its memory plan."""
import numpy as np
import pytest

import ember
from ember.errors import ArgumentError, DTypeError, ShapeError
from ember.graph import Call, Function, Module, Tuple, Var, const
from ember.graph.infer import infer_types
from ember.graph.types import TensorType


def T(*shape, dtype="float32"):
    return TensorType(shape, dtype)


def mod_of(params, body):
    return infer_types(Module({"main": Function(params, body)}))


@pytest.fixture(scope="module")
def chain():
    x, y = Var("x", T(4, 8)), Var("y", T(8))
    a = Call("exp", [x])
    b = Call("add", [a, y])
    c = Call("sum", [b], {"axis": (1,), "keepdims": False})
    return ember.compile(mod_of([x, y], Tuple([Call("nn.relu", [b]), c])))


def test_runs_and_matches_numpy(chain):
    x = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    y = np.linspace(-1, 1, 8).astype("float32")
    r, s = chain.run(x, y)
    np.testing.assert_allclose(r, np.maximum(np.exp(x) + y, 0), rtol=1e-6)
    np.testing.assert_allclose(s, (np.exp(x) + y).sum(1), rtol=1e-5)
    r2, _ = chain.run(y=y, x=x)  # by name
    np.testing.assert_array_equal(r, r2)


def test_info(chain):
    assert [tuple(i) for i in chain.input_info] == [("x", (4, 8), "float32"), ("y", (8,), "float32")]
    assert [i.shape for i in chain.output_info] == [(4, 8), (4,)]


def test_wrong_inputs_are_named(chain):
    x, y = np.zeros((4, 8), "float32"), np.zeros(8, "float32")
    with pytest.raises(ShapeError, match=r"input 'x' must have shape \(4, 8\), got \(8, 4\)"):
        chain.run(x.T.copy(), y)
    with pytest.raises(DTypeError, match="input 'y' must have dtype float32, got float64"):
        chain.run(x, y.astype("float64"))
    with pytest.raises(ArgumentError, match="no input named 'z'.*x, y"):
        chain.run(x, z=y)
    with pytest.raises(ArgumentError, match="missing input"):
        chain.run(x)
    with pytest.raises(ArgumentError, match="given twice"):
        chain.run(x, y, x=x)


def test_outputs_are_fresh_arrays(chain):
    x, y = np.ones((4, 8), "float32"), np.ones(8, "float32")
    a, _ = chain.run(x, y)
    b, _ = chain.run(x * 2, y)
    assert not np.shares_memory(a, b) and not np.array_equal(a, b)


def test_memory_plan_reuses_the_arena():
    # a chain of materialized values: each dies two steps later, so the arena holds ~2-3 of them
    x = Var("x", T(256, 256))
    v = x
    for _ in range(8):
        v = Call("mean", [Call("tanh", [v])], {"axis": (1,), "keepdims": True})
        v = Call("add", [v, x])
    exe = ember.compile(mod_of([x], v))
    p = exe.program
    assert p["arena_bytes"] < p["intermediate_bytes"] / 2
    assert "saved by reuse" in exe.memory_summary()
    xv = np.random.default_rng(1).random((256, 256)).astype("float32") * 0.01
    want = xv
    for _ in range(8):
        want = np.tanh(want).mean(1, keepdims=True) + xv
    np.testing.assert_allclose(exe.run(xv)[0], want, rtol=1e-4)


def test_outputs_that_are_inputs_or_constants_are_copies():
    x = Var("x", T(3))
    c = const(np.arange(3, dtype="float32"))
    exe = ember.compile(mod_of([x], Tuple([x, c, Call("add", [x, c])])))
    xv = np.ones(3, "float32")
    a, b, s = exe.run(xv)
    np.testing.assert_array_equal(a, xv)
    np.testing.assert_array_equal(b, [0, 1, 2])
    np.testing.assert_array_equal(s, [1, 2, 3])
    assert not np.shares_memory(a, xv)


def test_symbolic_inputs_run_at_any_size_and_input_shapes_fixes_them():
    x = Var("x", T("n", 4))
    mod = mod_of([x], Call("exp", [x]))
    exe = ember.compile(mod)
    assert exe.input_info[0].shape == ("n", 4)
    for n in (3, 1, 17):
        xv = np.random.default_rng(n).random((n, 4)).astype("float32")
        np.testing.assert_allclose(exe.run(xv)[0], np.exp(xv), rtol=1e-6)
    with pytest.raises(ShapeError, match="axis 1 must be 4"):
        exe.run(np.zeros((3, 5), "float32"))
    with pytest.raises(ShapeError, match="at least 1"):
        exe.run(np.zeros((0, 4), "float32"))
    exe = ember.compile(mod, input_shapes={"x": (3, 4)})
    assert exe.input_info[0].shape == (3, 4)
    np.testing.assert_allclose(exe.run(np.zeros((3, 4), "float32"))[0], np.ones((3, 4)))


def test_symbolic_shapes_checks_and_memory_plan_per_size():
    # y broadcasts against x: its size m is assumed equal to n, which each run checks
    x, y = Var("x", T("n", 8)), Var("y", T("m", 8))
    h = Call("exp", [Call("add", [x, y])])  # (read by two reductions: an intermediate in the arena)
    out = Call("add", [Call("sum", [Call("multiply", [h, h])], {"axis": (1,), "keepdims": False}),
                       Call("sum", [h], {"axis": (1,), "keepdims": False})])
    exe = ember.compile(mod_of([x, y], out))
    assert exe.program["symbols"] == ["n", "m"] and len(exe.program["checks"]) == 1
    sizes = []
    for n in (2, 50, 2):
        xv, yv = (np.random.default_rng(n + k).random((n, 8)).astype("float32") for k in range(2))
        want = (np.exp(xv + yv) ** 2).sum(axis=1) + np.exp(xv + yv).sum(axis=1)
        np.testing.assert_allclose(exe.run(xv, yv)[0], want, rtol=1e-5)
        sizes.append(exe.memory_info.arena_per_run)
    assert sizes[1] > sizes[0]  # the arena grows with n (planned at the largest size seen)
    with pytest.raises(ShapeError, match="must be equal"):
        exe.run(np.zeros((3, 8), "float32"), np.zeros((4, 8), "float32"))


def test_compile_times_are_recorded(chain):
    assert {"import", "pass fuse_ops", "lower groups", "codegen", "total"} <= set(chain.compile_times)


def test_reshape_between_kernels_is_a_view_not_a_kernel():
    x = Var("x", T(4, 6))
    r = Call("reshape", [Call("exp", [x])], {"newshape": (24,)})
    y = Call("reshape", [Call("sum", [r], {"axis": (0,), "keepdims": True})], {"newshape": ()})
    exe = ember.compile(mod_of([x], Tuple([y, r])))
    assert [k for k, _ in exe.kernel_calls] == ["fused_exp_reshape", "fused_sum"]  # the last reshape: a view
    xv = np.random.default_rng(2).random((4, 6)).astype("float32")
    s, rv = exe.run(xv)
    np.testing.assert_allclose(rv, np.exp(xv).reshape(24), rtol=1e-6)
    np.testing.assert_allclose(s, np.exp(xv).sum(), rtol=1e-5)
    assert s.shape == () and rv.shape == (24,)


def test_reshape_of_an_input_and_of_a_constant():
    x = Var("x", T(2, 3))
    c = const(np.arange(6, dtype="float32").reshape(3, 2))
    body = Call("add", [Call("reshape", [x], {"newshape": (6,)}), Call("reshape", [c], {"newshape": (6,)})])
    exe = ember.compile(mod_of([x], body), opt_level=0)  # no folding: the constant's reshape stays
    xv = np.ones((2, 3), "float32")
    np.testing.assert_array_equal(exe.run(xv)[0], np.arange(6) + 1)


def test_warm_compile_finds_the_kernels_by_the_groups_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    x = Var("x", T(4, 8))
    mod = mod_of([x], Call("nn.relu", [Call("exp", [x])]))
    cold = ember.compile(mod)
    warm = ember.compile(mod)
    assert warm.module.path == cold.module.path
    assert all(k.cached for k in warm.compile_profile.kernels)
    assert all(not k.times for k in warm.compile_profile.kernels)  # no computes, schedules or lowering
    assert warm._kernel_sources == []  # scheduled only when a profiler asks
    assert [n for _, _, n in warm.kernel_sources] == [n for _, _, n in cold.kernel_sources]
    v = np.linspace(-2, 2, 32, dtype="float32").reshape(4, 8)
    np.testing.assert_array_equal(warm.run(v)[0], cold.run(v)[0])
    # another shape is another key (a group alone in its model keeps its static kernel)
    y = Var("x", T(2, 8))
    other = ember.compile(mod_of([y], Call("nn.relu", [Call("exp", [y])])))
    assert other.module.path != cold.module.path


def test_a_model_compiled_for_another_cpu_folds_its_constants_here_and_refuses_to_run_here():
    """Cross-compiling folds and packs the weights on the host (the folding program must not
    use the target's instructions); running the result needs the target's features."""
    from ember.errors import CompileError

    x = Var("x", T(1, 16, 6, 6))
    w = np.random.default_rng(0).standard_normal((32, 16, 3, 3)).astype("float32")
    mod = mod_of([x], Call("nn.relu", [Call("nn.conv2d", [x, const(w)], {"padding": (1, 1, 1, 1)})]))
    exe = ember.compile(mod, target="llvm -mcpu=skylake-avx512")
    xv = np.random.default_rng(1).standard_normal((1, 16, 6, 6)).astype("float32")
    want = ember.compile(mod).run(xv)[0]
    if exe.target.missing_on_host():
        with pytest.raises(CompileError, match="avx512f.*which this CPU lacks"):
            exe.run(xv)
    else:  # an AVX-512 host runs it
        np.testing.assert_allclose(exe.run(xv)[0], want, rtol=1e-4, atol=1e-4)


def test_the_program_runs_natively_and_agrees_with_python_calls(tmp_path):
    """Every static executable runs its calls from the library's native runner: one call into
    native code per run. Inputs reshaped inside the model (a view of a per-run slot), several
    kernels and outputs; the same outputs through the checked Python calls, and from an export."""
    x, y = Var("x", T(2, 12)), Var("y", T(3, 8))
    a = Call("nn.softmax", [Call("reshape", [x], {"newshape": (4, 6)})], {"axis": -1})
    b = Call("sum", [Call("exp", [y])], {"axis": (1,), "keepdims": False})
    exe = ember.compile(mod_of([x, y], Tuple([Call("nn.relu", [a]), b, Call("nn.softmax", [a], {"axis": 0})])))
    assert exe.native and len(exe.program["calls"]) >= 3
    rng = np.random.default_rng(3)
    for _ in range(2):  # a second run rebinds the per-run slots
        xv, yv = rng.standard_normal((2, 12)).astype("float32"), rng.standard_normal((3, 8)).astype("float32")
        got = exe.run(xv, y=yv)
        exe.native = False
        want = exe.run(xv, y=yv)
        exe.native = True
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    np.testing.assert_allclose(got[1], np.exp(yv).sum(1), rtol=1e-5)
    loaded = ember.load(exe.export(str(tmp_path / "m.so")))
    assert loaded.native
    assert all(np.array_equal(g, w) for g, w in zip(loaded.run(xv, yv), got))


def test_a_reduction_with_leading_unit_axes_runs_its_outputs_in_parallel():
    from ember.driver import lower_kernel

    x = Var("x", T(1, 16, 6, 10))
    exe = ember.compile(mod_of([x], Call("mean", [x], {"axis": (2, 3), "keepdims": True})))
    (sch, args, name), = exe.kernel_sources
    text = lower_kernel(sch, args, name).script()
    assert "in parallel(16)" in text, text  # batch 1 leads: the fused spatial loops are the work
    xv = np.random.default_rng(3).random((1, 16, 6, 10)).astype("float32")
    np.testing.assert_allclose(exe.run(xv)[0], xv.mean((2, 3), keepdims=True), rtol=1e-5)


def test_a_bilinear_upsample_runs_one_pass_per_axis_each_in_parallel():
    """A resize of two axes by linear taps: the innermost axis's pass over the input's rows
    (materialized), then whole rows blended -- both passes parallel and vectorized -- against
    ONNX's reference."""
    from onnx.reference.ops.op_resize import _interpolate_nd, _linear_coeffs

    from ember.driver import lower_kernel

    x = Var("x", T(1, 5, 12, 9))
    attrs = {"scales": (1.0, 1.0, 8.0, 8.0), "method": "linear"}
    exe = ember.compile(mod_of([x], Call("resize", [x], attrs)))
    (sch, args, name), = exe.kernel_sources
    text = lower_kernel(sch, args, name).script()
    assert 'allocate("resize_axis3", (1, 5, 12, 72)' in text, text
    assert text.count("in parallel(") == 2 and "ramp(" in text, text
    xv = np.random.default_rng(4).standard_normal((1, 5, 12, 9)).astype("float32")
    want = _interpolate_nd(xv, _linear_coeffs, output_size=(1, 5, 96, 72), scale_factors=[1, 1, 8, 8],
                           coordinate_transformation_mode="half_pixel")
    np.testing.assert_allclose(exe.run(xv)[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ctm, mode, scale, table", [("asymmetric", "floor", 2.0, False),
                                                    ("half_pixel", "round_prefer_floor", 3.0, False),
                                                    ("half_pixel", "floor", 2.0, True),
                                                    ("asymmetric", "floor", 1.5, True),
                                                    ("asymmetric", "floor", 0.5, False)])
def test_a_nearest_resize_by_an_integer_factor_indexes_without_a_table(ctm, mode, scale, table):
    """Where a nearest axis's taps, evaluated at compile time, are ``j // s`` (PyTorch's
    Upsample(scale_factor=2) exports asymmetric/floor; ONNX's default is half-pixel/round) or
    ``s j + b``, the index is that arithmetic, which loads a window of the row and shuffles it;
    otherwise the taps come from a table. Against ONNX's reference either way."""
    from onnx.reference.ops.op_resize import _interpolate_nd, _nearest_coeffs

    from ember.driver import lower_kernel

    x = Var("x", T(1, 3, 6, 32))
    attrs = {"scales": (1.0, 1.0, scale, scale), "method": "nearest", "coordinate_transformation_mode": ctm,
             "nearest_mode": mode}
    exe = ember.compile(mod_of([x], Call("resize", [x], attrs)))
    (sch, args, name), = exe.kernel_sources
    text = lower_kernel(sch, args, name).script()
    assert ("resize_idx" in text) == table, text
    xv = np.random.default_rng(5).standard_normal((1, 3, 6, 32)).astype("float32")
    out = exe.run(xv)[0]
    want = _interpolate_nd(xv, lambda r, s: _nearest_coeffs(r, mode=mode), output_size=out.shape,
                           scale_factors=[1, 1, scale, scale], coordinate_transformation_mode=ctm)
    np.testing.assert_array_equal(out, want)


def _dense_block():
    """A DenseNet-like chain: each step concatenates the running value with a new feature
    computed from it (the first concat's result is itself a part of the second), and a
    softmax reads the whole. Softmax is an anchor: each part is its own kernel's output."""
    x = Var("x", T(1, 3, 4, 5))
    a = Call("nn.softmax", [x], {"axis": -1})
    c1 = Call("concat", [a, Call("nn.softmax", [a], {"axis": -1})], {"axis": 1})
    c2 = Call("concat", [c1, Call("nn.softmax", [c1], {"axis": 1})], {"axis": 1})
    return x, Call("nn.softmax", [c2], {"axis": 1})


def _softmax(v, axis):
    e = np.exp(v - v.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _dense_ref(xv):
    a = _softmax(xv, -1)
    c1 = np.concatenate([a, _softmax(a, -1)], 1)
    return _softmax(np.concatenate([c1, _softmax(c1, 1)], 1), 1)


def test_concat_parts_are_written_in_place():
    """Producers write a concat's parts straight into its bytes: no concat call remains, the
    parts are views at byte offsets (nested concats flattened to one base), and the results,
    through Python, the native runner and an export, are numpy's."""
    x, body = _dense_block()
    exe = ember.compile(mod_of([x], body))
    assert not any("concat" in k for k, _ in exe.kernel_calls)
    parts = [s for s in exe.program["slots"] if s["kind"] == "view" and "offset" in s]
    assert len({s["base"] for s in parts}) == 1 and sorted(s["offset"] for s in parts) == [0, 0, 240, 480]
    xv = np.random.default_rng(3).random((1, 3, 4, 5)).astype("float32")
    np.testing.assert_allclose(exe.run(xv)[0], _dense_ref(xv), rtol=1e-5)
    exe.native = False
    np.testing.assert_allclose(exe.run(xv)[0], _dense_ref(xv), rtol=1e-5)


def test_concat_whose_parts_do_not_lie_in_a_row_copies():
    """Along an axis with a batch before it, a part's elements are not contiguous in the
    result: the concat stays a kernel. So does a concat of a model input, or of a value
    that is also a model output."""
    x = Var("x", T(2, 3, 4))
    a = Call("exp", [x])
    exe = ember.compile(mod_of([x], Call("concat", [a, Call("negative", [a])], {"axis": 1})))
    assert any("concat" in k for k, _ in exe.kernel_calls)
    xv = np.random.default_rng(4).random((2, 3, 4)).astype("float32")
    np.testing.assert_allclose(exe.run(xv)[0], np.concatenate([np.exp(xv), -np.exp(xv)], 1), rtol=1e-6)
    y = Var("y", T(1, 3, 4))
    e = Call("exp", [y])
    exe = ember.compile(mod_of([y], Tuple([Call("concat", [e, Call("negative", [e]), y], {"axis": 1}), e])))
    assert any("concat" in k for k, _ in exe.kernel_calls)
    yv = xv[:1]
    got, ev = exe.run(yv)
    np.testing.assert_allclose(got, np.concatenate([np.exp(yv), -np.exp(yv), yv], 1), rtol=1e-6)
    np.testing.assert_allclose(ev, np.exp(yv), rtol=1e-6)


def test_an_export_with_parts_in_place_loads_and_runs(tmp_path):
    x, body = _dense_block()
    exe = ember.compile(mod_of([x], body))
    loaded = ember.load(exe.export(str(tmp_path / "dense.so")))
    xv = np.random.default_rng(5).random((1, 3, 4, 5)).astype("float32")
    np.testing.assert_allclose(loaded.run(xv)[0], _dense_ref(xv), rtol=1e-5)


def test_a_kernel_of_more_sizes_than_the_native_runner_takes_runs_from_python(monkeypatch):
    """The native runner has no case for a kernel of 64 sizes or more (a tier-0 concat of 25
    parts with a size per dim had 75): such an executable runs its calls from Python, and
    right, where the runner would have stopped at that call."""
    import ember.runtime.executable as rx

    x = Var("x", T("n", 8))
    mod = mod_of([x], Call("nn.relu", [Call("exp", [x])]))
    monkeypatch.setattr(rx, "RUNNER_MAX_SIZES", 1)  # (its kernel takes the batch: one size)
    exe = ember.compile(mod, wait=True)
    assert not exe.native
    xv = np.random.default_rng(0).standard_normal((3, 8)).astype("float32")
    np.testing.assert_allclose(exe.run(xv)[0], np.exp(xv), rtol=1e-6)
