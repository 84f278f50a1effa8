"""Products of two activations as packed bfloat16 dots, or as int16 offset codes on pmaddwd
where the CPU has no bf16 dot (``activation_products``)."""
import numpy as np
import pytest

import ember
from ember.graph import Var, const, topo_calls
from ember.graph.passes import PassContext, activation_products
from ember.options import CompileOptions
from ember.target import Target

from .conftest import T, call, module, rand

BF16 = Target.from_string("llvm -mcpu=znver4")  # (a CPU with vdpbf16ps, whatever the host)
AVX2 = Target.from_string("llvm -mcpu=znver3")  # (AVX2 alone: quantized products on pmaddwd)
DOTS = [(BF16, "dot_bf16x2"), (AVX2, "dot_i16x2")]


def run(mod, target=BF16, precision="fp32"):
    opts = CompileOptions.create(target, precision=precision) if precision != "fp32" else None
    return PassContext(opt_level=3, config={"target": target, "options": opts}).run(mod, [activation_products])


def dequantized(q, zero: float, scale: float):
    return call("multiply", call("subtract", call("cast", q, dtype="float32"), const(np.float32(zero))),
                const(np.float32(scale)))


def attention_scores(rows=37, keys=24, dim=32):
    """``Q @ K^T`` of QDQ codes, the keys transposed by the graph (as exporters write it)."""
    q, k = Var("q", T(2, rows, dim, dtype="uint8")), Var("k", T(2, keys, dim, dtype="uint8"))
    kt = call("transpose", k, axes=(0, 2, 1))
    return module([q, k], call("nn.matmul", dequantized(q, 131, 0.02), dequantized(kt, 119, 0.03)))


@pytest.mark.parametrize("target,dot", DOTS)
def test_quantized_scores_read_the_keys_untransposed_and_are_exact(target, dot):
    mod = attention_scores()
    after = run(mod, target)
    ops = [c.op for c in topo_calls(after)]
    assert "nn.matmul" not in ops and "transpose" not in ops
    (p,) = [c for c in topo_calls(after) if c.op == "nn.matmul_packed"]
    (pack,) = [c for c in topo_calls(after) if c.op == "nn.pack_matmul_weight"]
    assert p.attrs["dot"] == dot and pack.attrs["trans"] and pack.type.ndim == 5  # (batched panels)
    assert p.attrs["runtime"]  # (packed at run time: no backend may keep a copy per buffer)
    rng = np.random.default_rng(1)
    qv = rng.integers(0, 256, (2, 37, 32)).astype(np.uint8)
    kv = rng.integers(0, 256, (2, 24, 32)).astype(np.uint8)
    # the offset codes' integer dot, exact in float64, times the scales: what the kernel sums exactly
    exact = ((qv.astype(np.float64) - 131) @ (kv.astype(np.float64) - 119).transpose(0, 2, 1)) * (0.02 * 0.03)
    got = ember.compile(after).run(qv, kv)[0]
    np.testing.assert_allclose(got, exact, rtol=1e-6, atol=1e-6 * np.abs(exact).max())


@pytest.mark.parametrize("target,dot", DOTS)
def test_quantized_probabilities_by_values_and_a_batch_that_broadcasts(target, dot):
    p, v = Var("p", T(2, 3, 40, 48, dtype="uint8")), Var("v", T(1, 3, 48, 16, dtype="int8"))
    mod = module([p, v], call("nn.matmul", dequantized(p, 0, 1 / 255), call("multiply", call("cast", v, dtype="float32"),
                                                                          const(np.float32(0.05)))))
    after = run(mod, target)
    (pack,) = [c for c in topo_calls(after) if c.op == "nn.pack_matmul_weight"]
    assert not pack.attrs["trans"] and pack.args[0].type.dtype == {"dot_bf16x2": "bfloat16", "dot_i16x2": "int16"}[dot]
    rng = np.random.default_rng(2)
    pv = rng.integers(0, 256, (2, 3, 40, 48)).astype(np.uint8)
    vv = rng.integers(-128, 128, (1, 3, 48, 16)).astype(np.int8)
    exact = (pv.astype(np.float64) @ vv.astype(np.float64)) * (0.05 / 255)
    np.testing.assert_allclose(ember.compile(after).run(pv, vv)[0], exact, rtol=1e-6, atol=1e-6 * np.abs(exact).max())


def test_bf16_precision_runs_float_attention_in_bf16():
    q, k = Var("q", T(4, 50, 64)), Var("k", T(4, 50, 64))
    mod = module([q, k], call("nn.matmul", q, call("transpose", k, axes=(0, 2, 1))))
    assert "nn.matmul_packed" not in [c.op for c in topo_calls(run(mod))]  # (fp32: float kept)
    after = run(mod, precision="bf16")
    (p,) = [c for c in topo_calls(after) if c.op == "nn.matmul_packed"]
    assert p.attrs["dot"] == "dot_bf16x2"
    qv, kv = rand(4, 50, 64), rand(4, 50, 64)[::-1].copy()
    want = qv @ kv.transpose(0, 2, 1)
    np.testing.assert_allclose(ember.compile(after).run(qv, kv)[0], want, rtol=3e-2, atol=3e-2 * np.abs(want).max())


@pytest.mark.parametrize("target,dot", DOTS)
@pytest.mark.parametrize("trans", [False, True])
def test_an_odd_contraction_gets_a_zero_pair_and_stays_exact(target, dot, trans):
    # (ViT's P @ V: 197 tokens; and a transposed right operand of an odd head size)
    a, b = Var("a", T(2, 37, 31, dtype="uint8")), Var("b", T(2, *((24, 31) if trans else (31, 24)), dtype="uint8"))
    right = dequantized(call("transpose", b, axes=(0, 2, 1)) if trans else b, 119, 0.03)
    mod = module([a, b], call("nn.matmul", dequantized(a, 131, 0.02), right))
    after = run(mod, target)
    (p,) = [c for c in topo_calls(after) if c.op == "nn.matmul_packed"]
    (pack,) = [c for c in topo_calls(after) if c.op == "nn.pack_matmul_weight"]
    assert p.attrs["dot"] == dot and pack.attrs["trans"] == trans and [c.op for c in topo_calls(after)].count("pad") == 1
    rng = np.random.default_rng(3)
    av = rng.integers(0, 256, (2, 37, 31)).astype(np.uint8)
    bv = rng.integers(0, 256, (2, 24, 31) if trans else (2, 31, 24)).astype(np.uint8)
    bf = bv.astype(np.float64) - 119
    exact = ((av.astype(np.float64) - 131) @ (bf.transpose(0, 2, 1) if trans else bf)) * (0.02 * 0.03)
    np.testing.assert_allclose(ember.compile(after).run(av, bv)[0], exact, rtol=1e-6, atol=1e-6 * np.abs(exact).max())


@pytest.mark.parametrize("case", ["no AVX2", "few rows", "constant operand", "per-row scale",
                                  "symbolic columns"])
def test_left_alone(case):
    target = BF16
    q, k = Var("q", T(2, 37, 32, dtype="uint8")), Var("k", T(2, 32, 24, dtype="uint8"))
    a, b = dequantized(q, 3, 0.1), dequantized(k, 5, 0.2)
    params = [q, k]
    if case == "no AVX2":
        target = Target.from_string("llvm -mcpu=x86-64")
    elif case == "few rows":
        q = Var("q", T(2, 3, 32, dtype="uint8"))
        a, params = dequantized(q, 3, 0.1), [q, k]
    elif case == "constant operand":
        b, params = dequantized(const(np.ones((2, 32, 24), np.uint8)), 5, 0.2), [q]
    elif case == "symbolic columns":  # (the keys of a dynamic sequence: no static panels)
        k = Var("k", T(2, 32, "seq", dtype="uint8"))
        b, params = dequantized(k, 5, 0.2), [q, k]
    elif case == "per-row scale":
        a = call("multiply", call("subtract", call("cast", q, dtype="float32"), const(np.float32(3))),
                 const(rand(2, 37, 1)))
    after = run(module(params, call("nn.matmul", a, b)), target)
    assert "nn.matmul_packed" not in [c.op for c in topo_calls(after)]
