import numpy as np

from ember.graph import Call, Constant, Tuple, Var, assert_structural_equal, const
from ember.graph.visit import post_order
from ember.graph.passes import PassContext, fold_constant
from ember.compiler.fold import evaluate_constants

FOLD = {"evaluate": evaluate_constants}  # (fold_constant computes with the compiler)

from .conftest import T, call, module


def run(mod):
    return PassContext(opt_level=3, config=FOLD).run(mod, [fold_constant])


def test_shape_of_a_static_value_is_a_constant():
    x = Var("x", T(2, 3))
    before = module([x], call("reshape", x, newshape=(6,)))
    shape = call("shape_of", x)
    before = module([x], call("add", call("cast", shape, dtype="float32"), const(np.zeros(2, "float32"))))
    after = run(before)
    assert_structural_equal(after, module([x], Constant(np.array([2.0, 3.0], "float32"))))


def test_constant_of_shape_and_relabels_fold_without_compiling():
    x = Var("x", T(6))
    w = call("reshape", call("constant_of_shape", shape=(2, 3), value=0.5), newshape=(6,))
    after = run(module([x], call("add", x, w)))
    expected = module([x], call("add", x, Constant(np.full(6, 0.5, "float32"))))
    assert_structural_equal(after, expected)


def test_arithmetic_on_constants_is_computed_by_ember():
    a = np.arange(6, dtype="float32").reshape(2, 3)
    b = np.full((3,), 2.0, "float32")
    x = Var("x", T(2, 3))
    folded = call("sqrt", call("multiply", const(a), const(b)))
    after = run(module([x], call("add", x, folded)))
    np.testing.assert_allclose(after.main.body.args[1].value, np.sqrt(a * b), rtol=1e-6)
    assert after.main.body.args[0] is x


def test_a_shared_constant_subexpression_is_computed_once():
    x = Var("x", T(3))
    c = call("exp", const(np.ones(3, "float32")))
    after = run(module([x], call("add", call("multiply", x, c), c)))
    (m, c2) = after.main.body.args
    assert isinstance(c2, Constant) and m.args[1] is c2


def test_relabels_of_a_computed_value_are_views_of_its_one_result(monkeypatch):
    """A blocked per-channel vector (reshape, then block_channels into whole blocks) and a
    reshape of a computed value are its bytes relabelled: the evaluator computes the value
    alone, once, and both folded constants view its result."""
    seen = []

    def spy(exprs, ctx):
        seen.append([e.op for e in exprs])
        return evaluate_constants(exprs, ctx)

    monkeypatch.setitem(FOLD, "evaluate", spy)
    g = np.arange(1, 33, dtype="float32")
    scale = call("sqrt", const(g))
    blocked = call("block_channels", call("reshape", scale, newshape=(1, 32, 1, 1)), block=16)
    flat = call("reshape", scale, newshape=(2, 16))
    x, y = Var("x", T(1, 2, 4, 4, 16)), Var("y", T(2, 16))
    after = run(module([x, y], Tuple([call("multiply", x, blocked), call("add", y, flat)])))
    assert seen == [["sqrt"]]
    b, f = after.main.body.fields[0].args[1], after.main.body.fields[1].args[1]
    np.testing.assert_allclose(b.value.reshape(-1), np.sqrt(g), rtol=1e-6)
    assert b.value.shape == (1, 2, 1, 1, 16) and f.value.shape == (2, 16)
    assert np.shares_memory(b.value, f.value)


def test_blocking_that_pads_or_moves_bytes_is_computed():
    """Channels that do not fill the last block, or a value with other dims than the channels,
    are not relabels: block_channels is computed (and padded with zeros)."""
    v = np.arange(1, 21, dtype="float32")
    blocked = call("block_channels", call("reshape", const(v), newshape=(1, 20, 1, 1)), block=16)
    x = Var("x", T(1, 2, 1, 1, 16))
    after = run(module([x], call("multiply", x, blocked)))
    got = after.main.body.args[1].value
    np.testing.assert_array_equal(got.reshape(-1), np.concatenate([v, np.zeros(12, "float32")]))


def test_nothing_to_fold_returns_the_same_module():
    x = Var("x", T(3))
    mod = module([x], call("exp", x))
    assert run(mod) is mod


def test_a_fully_constant_model():
    mod = module([], call("add", const(np.ones(2, "float32")), const(np.ones(2, "float32"))))
    after = run(mod)
    np.testing.assert_array_equal(after.main.body.value, [2, 2])


def test_the_folding_executable_is_freed_before_the_pass_returns(monkeypatch):
    import gc
    import weakref

    import ember.runtime.executable as ex

    made = []
    real_init = ex.Executable.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        made.append(weakref.ref(self))

    monkeypatch.setattr(ex.Executable, "__init__", init)
    w = np.arange(6, dtype="float32").reshape(2, 3)
    x = Var("x", T(3, 2))
    mod = module([x], call("add", x, call("transpose", const(w))))
    # by reference count, not the cyclic collector: a full collection costs ~330 ms per fold in
    # a process that has imported torch (the pass no longer calls gc.collect)
    gc.disable()
    try:
        after = PassContext(opt_level=3, config=FOLD).run(mod, [fold_constant])
        alive = [r() is not None for r in made]  # (looked at before the collector may run again)
    finally:
        gc.enable()
    folded = after.main.body.args[1]
    assert isinstance(folded, Constant)
    np.testing.assert_array_equal(folded.value, w.T)
    assert made and not any(alive)  # no executable (with its inputs) outlives the pass


def test_a_small_static_range_folds_with_what_it_feeds():
    """torch.arange over a static export's sizes: position ids, a causal mask's rows."""
    x = Var("x", T(5))
    rng = call("range", start=0, stop=5, step=1, dtype="float32")
    after = run(module([x], call("add", x, call("multiply", rng, const(np.full(5, 2.0, "float32"))))))
    assert after.main.body.args[0] is x
    np.testing.assert_array_equal(after.main.body.args[1].value, np.arange(5, dtype="float32") * 2)


def test_a_long_range_stays_a_kernel():
    from ember.graph.passes.fold_constant import SMALL_RANGE

    n = SMALL_RANGE + 1
    x = Var("x", T(n))
    after = run(module([x], call("add", x, call("range", start=0, stop=n, step=1, dtype="float32"))))
    assert after.main.body.args[1].op == "range"


def test_small_elementwise_folds_of_one_shape_are_computed_together(monkeypatch):
    """Batch norms' shifts (beta - mean * gamma / sqrt(var + eps)) over 3, 5 and 8 channels
    are one expression over their vectors laid end to end; each takes its slice. A shift with
    another eps joins them (each eps a leaf, repeated to its shift's length: the lookup tables
    of a quantized model differ so, in their scales); a fold that is not elementwise is
    computed on its own."""
    seen = []

    def spy(exprs, ctx):
        seen.append([e.type.shape for e in exprs])
        return evaluate_constants(exprs, ctx)

    monkeypatch.setitem(FOLD, "evaluate", spy)
    rng = np.random.default_rng(0)

    def shift(c, eps):
        beta, mean, gamma = (rng.standard_normal(c).astype("float32") for _ in range(3))
        var = rng.random(c).astype("float32") + 0.5
        e = call("subtract", const(beta), call("multiply", const(mean), call("divide", const(gamma), call(
            "sqrt", call("add", const(var), const(np.float32(eps)))))))
        return e, beta - mean * (gamma / np.sqrt(var + np.float32(eps)))

    folds = [shift(3, 1e-5), shift(5, 1e-5), shift(8, 1e-5), shift(4, 1e-3)]
    m = rng.standard_normal((2, 6)).astype("float32")
    folds.append((call("transpose", call("exp", const(m)), axes=(1, 0)), np.exp(m).T))
    xs = [Var(f"x{i}", T(*want.shape)) for i, (_, want) in enumerate(folds)]
    after = run(module(xs, Tuple([call("add", x, e) for x, (e, _) in zip(xs, folds)])))
    assert sorted(seen[0]) == sorted([(20,), (6, 2)])  # four shifts at once: 3 + 5 + 8 + 4
    for field, (_, want) in zip(after.main.body.fields, folds):
        np.testing.assert_allclose(field.args[1].value, want, rtol=1e-5, atol=1e-6)
    # each bit for bit what it is computed alone (its scalar eps, not a vector of it)
    from ember.graph.infer import infer_types

    for field, (e, _) in zip(after.main.body.fields[:4], folds):
        alone, = evaluate_constants([infer_types(e)], PassContext(opt_level=0, config=FOLD))
        np.testing.assert_array_equal(field.args[1].value, alone.value)


def test_small_values_that_larger_folds_read_are_computed_first(monkeypatch):
    """A batch norm's scale folded into its conv's weights (ResNet's conv-BN, two layers): the
    scales are computed first, together; each weight's fold then reads its scale as a constant
    (a multiply by a constant vector, not the scale's own ops again)."""
    seen = []

    def spy(exprs, ctx):
        seen.append(sorted(n.op for n in post_order(Tuple(exprs)) if isinstance(n, Call)))
        return evaluate_constants(exprs, ctx)

    monkeypatch.setitem(FOLD, "evaluate", spy)
    rng = np.random.default_rng(1)
    xs, folds = [], []
    for i, (o, c) in enumerate([(4, 3), (6, 4)]):
        w = rng.standard_normal((o, c)).astype("float32")
        gamma, var = rng.standard_normal(o).astype("float32"), rng.random(o).astype("float32") + 0.5
        scale = call("divide", const(gamma), call("sqrt", call("add", const(var), const(np.float32(1e-5)))))
        folds.append((call("transpose", call("multiply", const(w), call("reshape", scale, newshape=(o, 1))), axes=(1, 0)),
                      (w * (gamma / np.sqrt(var + np.float32(1e-5)))[:, None]).T))
        xs.append(Var(f"x{i}", T(c, o)))
    after = run(module(xs, Tuple([call("add", x, e) for x, (e, _) in zip(xs, folds)])))
    assert seen == [["add", "divide", "sqrt"],  # the two scales, as one
                    ["multiply", "multiply", "transpose", "transpose"]]  # each weight times a constant
    for field, (_, want) in zip(after.main.body.fields, folds):
        np.testing.assert_allclose(field.args[1].value, want, rtol=1e-5, atol=1e-6)


def test_small_values_fold_op_by_op_and_large_ones_fused(monkeypatch):
    """A small value's ops are kernels of their own (the few every model's folds share, cached
    once); a large one's fuse (no intermediate copy of a big weight)."""
    import ember.compiler.compile as cc

    calls_per_group = []
    real = cc.compile_model

    def spy(*a, **k):
        exe = real(*a, **k)
        calls_per_group.append([sum(isinstance(n, Call) for n in post_order(fn.body)) for _, fn in exe.groups])
        return exe

    monkeypatch.setattr(cc, "compile_model", spy)
    rng = np.random.default_rng(2)
    for n in (8, 1 << 17):  # 32 bytes; 512 KB
        a, b = rng.random(n).astype("float32") + 0.5, rng.random(n).astype("float32")
        x = Var("x", T(n))
        after = run(module([x], call("add", x, call("add", call("sqrt", call("multiply", const(a), const(b))),
                                                    const(np.float32(1.0))))))
        np.testing.assert_allclose(after.main.body.args[1].value, np.sqrt(a * b) + 1, rtol=1e-6)
    a = rng.random(1 << 17).astype("float32")  # a small value of a big constant: fused too
    x = Var("x", T(1))
    after = run(module([x], call("add", x, call("sum", call("sqrt", const(a)), axis=(0,), keepdims=True))))
    np.testing.assert_allclose(after.main.body.args[1].value, [np.sqrt(a).sum()], rtol=1e-4)
    small, large, reduced = calls_per_group
    assert small == [1, 1, 1] and large == [3] and reduced == [2]
