"""ATen reductions: sum, mean, prod, amax/amin, argmax/argmin, any/all, var/std, cumsum."""
import torch

from .helpers import Fn, check


def test_reductions():
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0))
    i = torch.tensor([[1, 0, 2], [0, 0, 0]])
    check(Fn(lambda x, i: (x.sum(), x.sum(-1), x.sum((0, 2), keepdim=True), x.mean(1), x.mean((1, 2)),
                           x.amax(-1), x.amin((0, 1)), x.max(), x.min(), x.prod(1), (x * 0.5).prod(),
                           x.argmax(), x.argmax(1), x.argmin(-1, keepdim=True), (x > 0).any(-1), (x > -2).all(0),
                           (x > 3).any(), i.bool().all(), x.var(1), x.var(-1, unbiased=False), x.std(0),
                           x.std((1, 2), keepdim=True), torch.var_mean(x, 1), x.cumsum(1), i.cumsum(-1),
                           i.sum(-1), (x > 0).sum(-1), x.norm(dim=-1), x.logsumexp(0))), x, i)
