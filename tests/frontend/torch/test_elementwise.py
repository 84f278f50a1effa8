"""ATen elementwise ops: unary math, activations, arithmetic with torch's type promotion,
comparisons, logic, where, clamps and casts, each checked against eager PyTorch."""
import torch
import torch.nn.functional as F

from .helpers import Fn, check, ops_of


def _x(*shape, lo=-3.0, hi=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


def test_unary_math():
    pos = _x(4, 5, lo=0.1, hi=4.0)
    unit = _x(4, 5, lo=-0.9, hi=0.9)
    x = _x(4, 5)

    def f(x, pos, unit):
        return (x.exp(), pos.log(), pos.sqrt(), pos.rsqrt(), x.sin(), x.cos(), x.tan() * 0 + unit.tan(), x.tanh(),
                x.sigmoid(), torch.erf(x), x.abs(), -x, x.sign(), x.floor(), x.ceil(), (x * 2.3).round(),
                (x * 2.3).trunc(), pos.log2(), pos.log10(), unit.log1p(), unit.expm1(), pos.reciprocal(),
                unit.asin(), unit.acos(), x.atan(), x.sinh(), x.cosh(), unit.atanh(), x.asinh(), (pos + 1).acosh(),
                torch.atan2(x, unit))
    check(Fn(f), x, pos, unit)


def test_activations():
    x = _x(3, 16)
    check(Fn(lambda x: (F.relu(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.hardswish(x),
                        F.hardsigmoid(x), F.leaky_relu(x, 0.2), F.elu(x, 0.7), F.selu(x), F.celu(x, 1.3),
                        F.softplus(x), F.softplus(x, beta=2.0, threshold=3.0), F.mish(x), F.hardtanh(x, -0.5, 2.0),
                        F.relu6(x * 3), F.logsigmoid(x))), x)


def test_arithmetic_with_scalars_and_alpha():
    a, b = _x(2, 3, 4), _x(3, 4, seed=1)  # (b broadcasts)
    check(Fn(lambda a, b: (a + b, a - 2.5 * b, torch.add(a, b, alpha=3), torch.sub(a, b, alpha=0.5), a * b, a / b,
                           2 - a, 3 / b, a ** 2, a.abs() ** 0.5, b ** 3, 2 ** a, torch.maximum(a, b),
                           torch.minimum(a, b), torch.fmod(a, 1.3), torch.remainder(a, 1.3), a // 0.7)), a, b)


def test_integer_arithmetic_promotes_like_torch():
    i = torch.tensor([[7, -7, 5, -3], [0, 9, -11, 4]])
    j = torch.tensor([[2, 2, -3, 3], [1, -4, 3, 5]])
    x = _x(2, 4)
    compiled = check(Fn(lambda i, j, x: (i + j, i * 3, i / j, torch.div(i, j, rounding_mode="floor"),
                                         torch.div(i, j, rounding_mode="trunc"), i // j, i % j, torch.fmod(i, j),
                                         i + 0.5, x + i, x * i.to(torch.float32), i.to(torch.float32) / 2,
                                         (i > 0).sum(-1), i.abs(), -i, i.sign())), i, j, x)
    assert "cast" in ops_of(compiled)


def test_comparisons_logic_and_where():
    a, b = _x(3, 5), _x(3, 5, seed=1)
    m = torch.tensor([[True, False, True, False, True]] * 3)

    def f(a, b, m):
        c = a > b
        ra, rb = a.round(), b.round()  # (ties, so that > and >= differ)
        return (ra > rb, ra >= rb, ra < rb, ra <= rb, ra == rb, a == b, a != 0.5, a < b, a <= 0, a > b, a >= 0.1, c & m, c | m, c ^ m, ~c, torch.logical_not(a),
                torch.logical_and(a, b), torch.logical_or(c, b > 1), torch.logical_xor(a > 0, m),
                torch.where(c, a, b), torch.where(m, a, 0.0), torch.where(c, 1.0, b), a.isnan(), (a / 0).isinf(),
                a.masked_fill(m, -1.0))
    check(Fn(f), a, b, m)


def test_clamps():
    x, lo, hi = _x(4, 6), _x(4, 6, lo=-2, hi=0, seed=1), _x(6, lo=0, hi=2, seed=2)
    check(Fn(lambda x, lo, hi: (x.clamp(-1, 2), x.clamp(min=0.5), x.clamp(max=-0.5), torch.clamp(x, lo, hi),
                                x.clamp_min(lo), x.clamp(max=hi))), x, lo, hi)


def test_casts_and_bitwise():
    x = _x(3, 4) * 10
    i = torch.tensor([[1, 6, -3, 12], [0, 5, 9, -8], [3, 3, 2, 7]], dtype=torch.int32)
    check(Fn(lambda x, i: (x.to(torch.int64), x.to(torch.int32) + i, x.half().float(), x.to(torch.float64),
                           i.to(torch.float32) * 0.5, (x > 0).to(torch.float32), i & 6, i | 1, i ^ 3, ~i,
                           x.bool(), i.to(torch.uint8))), x, i)


def test_bfloat16_and_float16_round_trip():
    x = _x(8, 8).to(torch.bfloat16)
    h = _x(8, 8).to(torch.float16)
    check(Fn(lambda x, h: (x * 2 + 1, (h * h).float().sum(), x.float().exp())), x, h, rtol=1e-2, atol=1e-2)
