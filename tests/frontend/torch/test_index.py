"""ATen indexing ops: embedding, index_select, gather, advanced indexing, scatters, index_put,
topk, sort, masked fills."""
import torch
import torch.nn.functional as F

from .helpers import Fn, check


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_embedding_index_select_gather():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4)
    ids = torch.tensor([[1, 3, 9], [0, 0, 5]])
    x = _x(5, 6)
    idx = torch.tensor([[0, 5, 2], [4, 4, 1], [3, 0, 0], [1, 2, 3], [5, 5, 5]])
    check(Fn(lambda ids, x, idx: (emb(ids), x.index_select(1, idx[0]), x.index_select(0, idx[:, 1] % 5),
                                  torch.gather(x, 1, idx), F.embedding(ids % 5, x)), emb), ids, x, idx)


def test_advanced_indexing():
    x = _x(4, 5, 6)
    i, j = torch.tensor([0, 3, -1]), torch.tensor([[1], [3]])
    check(Fn(lambda x, i, j: (x[i], x[:, i], x[..., i], x[i, i], x[j, i], x[:, j, i], x[i, :, i], x[:, i, 2:],
                              x[1:, i])), x, i, j)


def test_scatters_and_index_put():
    x = _x(4, 6)
    idx = torch.tensor([[0, 1, 2], [5, 4, 3], [1, 1, 0], [2, 3, 5]])
    src = _x(4, 3, seed=1)
    rows = torch.tensor([3, 0])
    mask = x > 0

    def f(x, idx, src, rows, mask):
        a = x.scatter(1, idx[:, :2], src[:, :2])
        b = x.scatter(1, idx, 2.5)
        c = x.scatter_add(1, torch.tensor([[0, 0, 1]] * 4), src)
        d = x.index_put((rows,), torch.ones(2, 6))
        e = x.index_put((rows, torch.tensor([1, 2])), torch.tensor(9.0))
        g = x.index_put((rows,), torch.ones(6), accumulate=True)
        h = x.masked_fill(mask, 0.0)
        k = x.clone()
        k[mask] = -1.0
        m = x.scatter_reduce(1, idx, src, "amax")
        return a, b, c, d, e, g, h, k, m
    check(Fn(f), x, idx, src, rows, mask)


def test_index_put_on_inner_axes():
    # torch's fold: out[:, :, i, j] += patches, the indices adjacent (their dims stay in place)
    # or apart (their dims lead), with a batch of values to broadcast
    x = _x(2, 3, 5, 6)
    i, j = torch.tensor([[0, 1], [4, 4]]), torch.tensor([[2, 2], [5, 0]])

    def f(x, v, w):
        a, b, c = x.clone(), x.clone(), x.clone()
        a[:, :, i, j] += v
        b[:, i % 3, :, j[:, :1]] = w
        c[:, i[0]] = 7.0
        return a, b, c
    check(Fn(f), x, _x(2, 3, 2, 2, seed=1), _x(2, 2, 2, 5, seed=2))
    F = torch.nn.functional
    check(Fn(lambda p: F.fold(p, (6, 8), kernel_size=2, stride=2)), _x(2, 12, 12, seed=3))
    check(Fn(lambda p: F.fold(p, (5, 5), kernel_size=3, padding=1)), _x(1, 18, 25, seed=4))


def test_topk_sort_argsort():
    x = _x(3, 7)
    check(Fn(lambda x: (*x.topk(3), *x.topk(2, dim=0, largest=False), *x.sort(-1), *x.sort(0, descending=True),
                        x.argsort(-1), x.max(-1).values, x.max(-1).indices, x.min(0).indices)), x)


def test_data_dependent_sizes():
    """nonzero and boolean masks: the count is a size the program binds while it runs."""
    class Masked(torch.nn.Module):
        def forward(self, x, m):
            return x[m], torch.nonzero(m), x[m].sum(0), x[m[:, 0]]

    x = _x(6, 4)
    compiled = check(Masked(), x, x > 0, more=[(x, x > 1), (x, x > 9)])  # (an empty selection too)
    assert compiled.exe is not None
