"""ATen view and layout ops: view/reshape, permute, expand, squeeze/unsqueeze, cat/stack, split,
slice/select/narrow/unfold, pads, flip, repeat, roll, and writes into slices (functionalized)."""
import torch
import torch.nn.functional as F

from .helpers import Fn, check


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_views_and_permutes():
    x = _x(2, 3, 4, 5)
    check(Fn(lambda x: (x.view(6, 20), x.reshape(2, -1), x.permute(0, 2, 3, 1), x.transpose(1, 3), x.flatten(1),
                        x.flatten(), x[0, 0].t(), x.unsqueeze(2), x[:, :1].squeeze(1), x.unsqueeze(-1).squeeze(),
                        x.expand(3, 2, 3, 4, 5), x[:, :, :1].expand(-1, -1, 4, -1), x.contiguous().clone(),
                        x.mT, x.movedim(1, -1))), x)


def test_cat_stack_split_chunk_unbind():
    a, b = _x(2, 3, 4), _x(2, 5, 4, seed=1)
    check(Fn(lambda a, b: (torch.cat([a, b], 1), torch.cat([a, a, a], -1), torch.stack([a, a], 2),
                           *torch.split(b, 2, dim=1), *torch.split(b, [1, 4], dim=1), *a.chunk(2, dim=-1),
                           *a.unbind(1), torch.hstack([a, a]))), a, b)


def test_slices_select_narrow():
    x = _x(4, 6, 8)
    check(Fn(lambda x: (x[1:3], x[:, ::2], x[..., 1:-1], x[:, -3:], x[:, 2], x[-1], x[..., -2], x[:, 1:5:3, 2:],
                        x.narrow(2, 3, 4), x[None, :, None, 0], x.select(2, -1), x[:, :100])), x)


def test_unfold_windows_of_static_and_symbolic_lengths():
    # PatchTST's patches: the windows along an axis as a new last axis
    x = _x(2, 17, 3)
    check(Fn(lambda x: (x.unfold(1, 4, 2), x.unfold(-1, 1, 1), x.unfold(1, 17, 5))), x)
    class Patches(torch.nn.Module):
        def forward(self, x):
            return x.unfold(1, 5, 3)
    check(Patches(), x, dynamic_shapes={"x": {1: torch.export.Dim("t", min=5, max=64)}},
          more=[(_x(2, 30, 3, seed=1),), (_x(2, 5, 3, seed=2),)])


def test_pads_flip_repeat_roll():
    x = _x(2, 3, 5, 6)
    check(Fn(lambda x: (F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=0.5), F.pad(x, (-1, 2, 0, -2)),
                        F.pad(x, (2, 1, 1, 2), mode="reflect"), F.pad(x, (2, 1, 1, 2), mode="replicate"),
                        F.pad(x[0], (1, 2), mode="reflect"), x.flip(-1), x.flip(1, 2), x.repeat(1, 2, 1, 3),
                        x[0].repeat(2, 1, 1, 1), x.roll(2, -1), x.roll((1, -2), (1, 2)), x.roll(5),
                        torch.tril(x), torch.triu(x, 1), F.pixel_shuffle(x[:, :, :, :4].repeat(1, 4, 1, 1), 2),
                        F.pixel_unshuffle(x[:, :, :4, :6], 2))), x)


def test_diagonals():
    x = _x(2, 5, 4)
    check(Fn(lambda x: (x[0].diagonal(), x[0].diagonal(1), x[0].diagonal(-2), x.diagonal(0, 1, 2),
                        x.diagonal(2, -1, 1), torch.diag(x[0]))), x)


def test_writes_into_slices_become_values():
    x, y = _x(3, 6), _x(3, 2, seed=1)

    def f(x, y):
        z = x.clone()
        z[:, 1:3] = y  # slice_scatter
        z[0] = 7.0  # select_scatter
        z[:, ::2] *= 2  # a strided slice_scatter
        w = torch.zeros(4, 6)
        w[1:] = x
        return z, w
    check(Fn(f), x, y)
