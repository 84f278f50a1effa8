"""ATen neural-network ops: convolutions, matrix products, normalizations, softmax, grid sampling,
pooling and upsampling, against eager PyTorch."""
import pytest
import torch
import torch.nn.functional as F

from .helpers import Fn, check, ops_of


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_conv2d_variants():
    torch.manual_seed(0)
    net = torch.nn.ModuleList([
        torch.nn.Conv2d(4, 8, 3, padding=1),
        torch.nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, bias=False),
        torch.nn.Conv2d(4, 4, 5, padding=2, groups=4),  # depthwise
        torch.nn.Conv2d(4, 8, (1, 3), padding=(0, 1), groups=2),
    ])
    check(Fn(lambda x: tuple(c(x) for c in net), net), _x(2, 4, 9, 11))


def test_conv1d_conv3d_and_transposed():
    torch.manual_seed(0)
    c1, c3 = torch.nn.Conv1d(3, 5, 3, stride=2, padding=1), torch.nn.Conv3d(2, 4, 3, padding=1)
    t2 = torch.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)
    t1 = torch.nn.ConvTranspose1d(3, 2, 4, stride=2, groups=1)
    check(Fn(lambda a, b, c: (c1(a), c3(b), t2(c), t1(a)), c1, c3, t2, t1), _x(2, 3, 16), _x(1, 2, 5, 6, 7),
          _x(2, 4, 5, 6))


def test_linear_layers_become_dense_products():
    torch.manual_seed(0)
    lin, lin3, nob = torch.nn.Linear(16, 8), torch.nn.Linear(16, 4), torch.nn.Linear(8, 3, bias=False)
    compiled = check(Fn(lambda x, y: (nob(lin(x)), lin3(y)), lin, lin3, nob), _x(5, 16), _x(2, 7, 16))
    ops = ops_of(compiled)
    assert ops.count("nn.dense") == 3 and "transpose" not in ops  # (torch's permute of the weight is undone)


def test_matmul_bmm_and_baddbmm():
    a, b, c, d, e = _x(3, 4, 5), _x(3, 5, 6), _x(5, 2), _x(3, 4, 6), _x(2)
    check(Fn(lambda a, b, c, d, e: (a @ b, torch.bmm(a, b), a @ c, torch.baddbmm(d, a, b, alpha=0.5, beta=2),
                                    torch.einsum("bij,bjk->bik", a, b), torch.addmm(e, a[0], c, alpha=2),
                                    a[0] @ b[0], e @ c.t())), a, b, c, d, e)


def test_normalizations():
    torch.manual_seed(0)
    bn, ln, gn = torch.nn.BatchNorm2d(6), torch.nn.LayerNorm(10), torch.nn.GroupNorm(3, 6)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    bn.weight.data.uniform_(0.5, 1.5)
    ln_plain = torch.nn.LayerNorm((5, 10), elementwise_affine=False)
    inorm = torch.nn.InstanceNorm2d(6, affine=True)
    check(Fn(lambda x, y: (bn(x), gn(x), ln(y), ln_plain(y), inorm(x), F.normalize(y, dim=-1),
                           F.rms_norm(y, (10,), eps=1e-6)), bn, gn, ln, ln_plain, inorm), _x(2, 6, 4, 5), _x(3, 5, 10))


def test_softmax_family():
    x = _x(2, 3, 7)
    check(Fn(lambda x: (x.softmax(-1), x.softmax(1), F.log_softmax(x, -1), x.logsumexp(-1))), x)


def test_pooling():
    x = _x(2, 3, 11, 13)
    check(Fn(lambda x: (F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 2, ceil_mode=True), F.avg_pool2d(x, 3, 2, 1),
                        F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), F.avg_pool2d(x, 2, ceil_mode=True),
                        F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(x[..., :10, :12], (5, 3)),
                        F.adaptive_max_pool2d(x, 1), F.max_pool1d(x[0], 3), F.avg_pool1d(x[0], 2),
                        # bins of different sizes (UperNet's pyramid: 2, 3, 6 bins of a 7x7 map)
                        F.adaptive_avg_pool2d(x[..., :7, :7], 2), F.adaptive_avg_pool2d(x, (3, 6)),
                        F.adaptive_max_pool2d(x, (4, 5)), F.adaptive_avg_pool1d(x[0], 4))), x)


@pytest.mark.parametrize("align", [False, True])
def test_upsampling(align):
    x = _x(1, 2, 5, 7)
    check(Fn(lambda x: (F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=align),
                        F.interpolate(x, size=(8, 3), mode="bilinear", align_corners=align),
                        F.interpolate(x, scale_factor=2, mode="nearest"),
                        F.interpolate(x, size=(9, 14), mode="nearest"))), x)


@pytest.mark.parametrize("mode, padding, align", [("bilinear", "zeros", False), ("nearest", "border", True),
                                                  ("bicubic", "reflection", False), ("bilinear", "reflection", True)])
def test_grid_sample(mode, padding, align):
    # Deformable DETR's sampling of its value maps at learned offsets (some outside the image)
    x, grid = _x(2, 3, 6, 7), _x(2, 4, 5, 2, seed=1) * 0.8
    check(Fn(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)), x, grid)


def test_distances():
    x, y = _x(5, 4), _x(3, 4, seed=1)
    check(Fn(lambda x, y: (torch.cdist(x, y), torch.cdist(x[None], y[None], p=1), torch.cdist(x, y, p=float("inf")),
                           torch.pdist(x), torch.pdist(x, p=3))), x, y)
