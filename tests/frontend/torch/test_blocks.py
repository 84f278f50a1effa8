"""Realistic blocks with dynamic sizes: a ResNet basic block, a transformer encoder layer with a
padding mask, attention as models write it (scaled_dot_product_attention with causal and
explicit masks, grouped-query heads)."""
import math

import torch
import torch.nn.functional as F

from .helpers import check, ops_of


class BasicBlock(torch.nn.Module):
    """torchvision's ResNet basic block with a strided projection shortcut."""

    def __init__(self, cin=8, cout=16, stride=2):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.down = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout))
        for bn in (self.bn1, self.bn2, self.down[1]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.down(x))


def test_resnet_basic_block_dynamic_batch():
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=32)
    compiled = check(BasicBlock(), torch.randn(2, 8, 14, 14), dynamic_shapes={"x": {0: batch}},
                     more=[(torch.randn(1, 8, 14, 14),), (torch.randn(5, 8, 14, 14),)])
    assert compiled.input_info[0].shape == ("batch", 8, 14, 14)
    assert ops_of(compiled).count("nn.batch_norm") == 3  # (folded into the convs by the compiler)


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True, norm_first=True)

    def forward(self, x, pad):
        return self.layer(x, src_key_padding_mask=pad)


def test_transformer_encoder_layer_dynamic_batch_and_sequence():
    torch.manual_seed(0)
    batch, seq = torch.export.Dim("batch", min=1, max=16), torch.export.Dim("seq", min=2, max=128)

    def inputs(b, s):
        pad = torch.zeros(b, s, dtype=torch.bool)
        pad[-1, s - 2:] = True
        return torch.randn(b, s, 32), pad
    compiled = check(Encoder(), *inputs(2, 9), dynamic_shapes={"x": {0: batch, 1: seq}, "pad": {0: batch, 1: seq}},
                     more=[inputs(3, 17), inputs(1, 5)])
    assert compiled.input_info[0].shape == ("batch", "seq", 32)


class Attention(torch.nn.Module):
    def forward(self, q, k, v, mask, bias):
        return (F.scaled_dot_product_attention(q, k, v),
                F.scaled_dot_product_attention(q, k, v, is_causal=True),
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3),
                F.scaled_dot_product_attention(q, k[:, :2], v[:, :2], enable_gqa=True))


def test_scaled_dot_product_attention_is_converted_whole():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8, generator=g) for _ in range(3))
    mask = torch.rand(6, 6, generator=g) > 0.3
    mask[:, 0] = True  # (every row attends somewhere)
    bias = torch.randn(2, 1, 6, 6, generator=g)
    compiled = check(Attention(), q, k, v, mask, bias)
    ops = ops_of(compiled)
    # q @ k^T once for the four calls on (q, k) (equal nodes are one), once for the grouped heads
    assert ops.count("nn.softmax") == 5 and ops.count("nn.matmul") == 2 + 5


class CausalSelfAttention(torch.nn.Module):
    """A GPT-style block: fused qkv projection, heads split by view, causal attention."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.qkv, self.proj, self.heads = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim), heads

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        return self.proj(y)


def test_causal_self_attention_dynamic_sequence():
    torch.manual_seed(0)
    seq = torch.export.Dim("seq", min=2, max=64)
    compiled = check(CausalSelfAttention(), torch.randn(1, 7, 32), dynamic_shapes={"x": {1: seq}},
                     more=[(torch.randn(1, 30, 32),), (torch.randn(1, 2, 32),)])
    assert compiled.input_info[0].shape == (1, "seq", 32)


class MultiheadBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


def test_projections_of_a_transposed_input_with_a_dynamic_batch_are_dense_products():
    """torch's matmul of a (seq, batch, E) activation it cannot flatten multiplies by the weight
    expanded over seq; the frontend multiplies by the weight itself (ViT-B's 12 such copies would
    be 15.6 GiB of constants)."""
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=16)
    compiled = check(MultiheadBlock(), torch.randn(2, 7, 32), dynamic_shapes={"x": {0: batch}},
                     more=[(torch.randn(5, 7, 32),)])
    ops = ops_of(compiled)
    assert ops.count("nn.dense") == 2 and "expand" not in ops
