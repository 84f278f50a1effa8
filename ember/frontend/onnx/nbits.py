"""ONNX Runtime's MatMulNBits (domain ``com.microsoft``): a product with weights quantized to
2, 4 or 8 bits in blocks along K, each block with a scale and a zero point -- how LLMs ship
for CPUs.

The product is ``nn.matmul_nbits``: the codes stay as they are, decoded where the GEMM reads
them (``ember.kernels.weight_only``), so the weights take their quantized size in memory and
a decoding step reads a quarter (8 bits) or an eighth (4 bits) of the float32 bytes; the
zero points, packed or not, become a float (N, blocks) here.
"""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...graph.ops import dims as D
from .table import CONTRIB, converter


def _unpack(node, packed, bits: int):
    """uint8 (..., m) -> (..., m * 8 // bits): each byte's values, low bits first."""
    per = 8 // bits
    mask = node.const_like(np.uint8((1 << bits) - 1), "uint8")
    parts = []
    for j in range(per):
        shifted = node.call("right_shift", packed, node.const_like(np.uint8(j * bits), "uint8")) if j else packed
        parts.append(node.call("unsqueeze", node.call("bitwise_and", shifted, mask), axes=(packed.type.ndim,)))
    vals = node.call("concat", *parts, axis=packed.type.ndim) if per > 1 else parts[0]
    shape = tuple(packed.type.shape[:-1]) + (packed.type.shape[-1] * per,)
    return node.call("reshape", vals, newshape=shape)


@converter("MatMulNBits", domain=CONTRIB)
def _matmul_nbits(node):
    a, b, scales = node.input(0), node.input(1), node.input(2)
    K, N, bits, block = node.attr("K"), node.attr("N"), node.attr("bits", 4), node.attr("block_size")
    if bits not in (2, 4, 8):
        raise UnsupportedOpError(f"MatMulNBits of {bits} bits (2, 4 and 8 are supported)")
    if node.has(4):
        raise UnsupportedOpError("MatMulNBits with g_idx (act-order groups) is not supported")
    blocks = -(-K // block)
    if b.type.dtype != "uint8" or tuple(b.type.shape) != (N, blocks, block * bits // 8):
        raise ShapeError(f"B must be uint8 ({N}, {blocks}, {block * bits // 8}) for K={K}, N={N}, "
                         f"{bits} bits in blocks of {block}; got {b.type}")
    dtype = a.type.dtype
    if not node.has(3):
        zp = node.const_like(np.full((N, blocks), float(1 << (bits - 1))), dtype)
    elif node.type(3).dtype == "uint8":  # packed like the weights, a row of them per n
        z = node.call("reshape", node.input(3), newshape=(N, -(-(blocks * bits) // 8)))
        z = node.call("strided_slice", _unpack(node, z, bits), begin=(0,), end=(blocks,), axes=(1,))
        zp = node.call("cast", z, dtype=dtype)
    else:
        zp = node.call("reshape", node.call("cast", node.input(3), dtype=dtype), newshape=(N, blocks))
    s = node.call("reshape", scales, newshape=(N, blocks))
    # one (rows, K) product whatever A's leading dims (a batch of one-row products, a decoding
    # step's, would run each on one core)
    lead = tuple(a.type.shape[:-1])
    a = node.call("reshape", a, newshape=(D.prod(lead), K))
    y = node.call("nn.matmul_nbits", a, b, s, zp, bits=bits, block=block, units=N)
    y = node.call("reshape", y, newshape=lead + (N,))
    if node.has(5):
        y = node.call("add", y, node.input(5))
    return [y]
