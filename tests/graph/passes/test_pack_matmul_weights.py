import numpy as np
import pytest

import ember
from ember.graph import Var, const, topo_calls
from ember.graph.passes import PassContext, fold_constant, pack_matmul_weights
from ember.compiler.fold import evaluate_constants

FOLD = {"evaluate": evaluate_constants}  # (fold_constant computes with the compiler)

from .conftest import T, call, module, rand


def run(mod):
    return PassContext(opt_level=3, config=FOLD).run(mod, [pack_matmul_weights, fold_constant])


def test_a_product_by_a_constant_weight_reads_it_packed_at_compile_time():
    x = Var("x", T(37, 24))
    w, b = rand(30, 24), rand(24, 30)
    mod = module([x], call("add", call("nn.dense", x, const(w)), call("nn.matmul", x, const(b))))
    after = run(mod)
    products = [c for c in topo_calls(after) if c.op.startswith("nn.")]
    assert [c.op for c in products] == ["nn.matmul_packed", "nn.matmul_packed"]
    # the packed weights are folded constants: no call left packing them
    assert all(c.args[1].type.ndim == 3 and not topo_calls(c.args[1]) for c in products)
    xv = rand(37, 24)
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], xv @ w.T + xv @ b, rtol=1e-4, atol=1e-4)


def test_few_rows_and_runtime_weights_are_left_alone():
    x, y = Var("x", T(3, 24)), Var("y", T(24, 20))
    mod = module([x, y], call("add", call("nn.dense", x, const(rand(20, 24))), call("nn.matmul", x, y)))
    assert "nn.matmul_packed" not in [c.op for c in topo_calls(run(mod))]


def test_a_symbolic_number_of_rows_is_packed():
    x = Var("x", T("n", 16))
    w = rand(16, 40)
    after = run(module([x], call("nn.matmul", x, const(w))))
    assert [c.op for c in topo_calls(after)] == ["nn.matmul_packed"]
    xv = rand(9, 16)
    np.testing.assert_allclose(ember.compile(after).run(xv)[0], xv @ w, rtol=1e-4, atol=1e-4)


def _bf16_context():
    from ember.options import CompileOptions
    from ember.target import Target

    t = Target.host()
    if not t.has_feature("avx512bf16"):  # the pass itself runs anywhere; the option checks the host
        t = Target.from_string("llvm -mcpu=znver4")
    return PassContext(opt_level=3, config={**FOLD, "target": t,
                                            "options": CompileOptions.create(t, precision="bf16")})


def test_bf16_products_read_both_operands_as_words_of_two_bfloat16():
    x = Var("x", T(37, 24))
    w = rand(30, 24)
    mod = module([x], call("nn.dense", x, const(w)))
    after = _bf16_context().run(mod, [pack_matmul_weights, fold_constant])
    (p,) = [c for c in topo_calls(after) if c.op == "nn.matmul_packed"]
    assert p.attrs["dot"] == "dot_bf16x2" and p.type.dtype == "float32"
    assert p.args[0].type.shape == (37, 12) and p.args[0].type.dtype == "int32"  # (a view of x in bfloat16)
    assert p.args[1].type.dtype == "int32" and not topo_calls(p.args[1])  # packed at compile time


@pytest.mark.parametrize("rows", [1, 37])
def test_bf16_packs_a_gemv_too_and_it_matches_float32(rows):
    """A row or a few (a classifier, a decoding step) read every weight once: in bf16 the words
    are half the bytes; an odd contraction keeps the plain float32 kernel."""
    import ember
    from ember.target import Target

    x = Var("x", T(rows, 64))
    w = rand(40, 64)
    mod = module([x], call("nn.dense", x, const(w)))
    after = _bf16_context().run(mod, [pack_matmul_weights, fold_constant])
    (p,) = [c for c in topo_calls(after) if c.op == "nn.matmul_packed"]
    assert p.attrs["dot"] == "dot_bf16x2"
    odd = _bf16_context().run(module([Var("y", T(1, 63))], call("nn.dense", Var("y", T(1, 63)), const(rand(40, 63)))),
                              [pack_matmul_weights, fold_constant])
    assert not [c for c in topo_calls(odd) if c.op == "nn.matmul_packed"]
    if Target.host().has_feature("avx512bf16"):
        xv = rand(rows, 64)
        got = ember.compile(mod, precision="bf16").run(xv)[0]
        np.testing.assert_allclose(got, xv @ w.T, rtol=2e-2, atol=2e-2 * np.abs(xv @ w.T).max())


def test_bf16_leaves_an_odd_contraction_in_float32():
    x = Var("x", T(37, 23))
    mod = module([x], call("nn.dense", x, const(rand(30, 23))))
    after = _bf16_context().run(mod, [pack_matmul_weights, fold_constant])
    (p,) = [c for c in topo_calls(after) if c.op == "nn.matmul_packed"]
    assert p.attrs.get("dot") is None and p.args[0].type.dtype == "float32"
