"""Weights quantized in blocks (weight-only low-bit: how LLMs ship for CPUs), decoded where the
product reads them.

A weight ``W (N, K)`` is stored as codes of 2, 4 or 8 bits, several to a byte along K (low bits
first), with a scale and a zero point per block of ``block`` values along K:
``W[n, k] = (code - zero[n, k // block]) * scale[n, k // block]``. The decoding is a stage the
product's schedule inlines, so the float weights are never stored:

- in the packed GEMM's layout (:func:`packed_weight`: codes, scales and offsets in panels of
  ``NR`` columns, made at compile time) the micro-kernel decodes each vector of B as it loads it
  (a load of bytes, a shift, a mask, a conversion and one FMA, ``code * scale + offset``) and
  uses it for all the rows of its block: memory traffic is the codes', a quarter of the float32
  weights' at 8 bits, an eighth at 4;
- in the stored layout (:func:`weight`) a product packs its B panels per call from the codes.
"""
from __future__ import annotations

from ..loop import compute as te
from ..loop.expr import cast


def _code(byte, k, bits: int):
    """The ``bits``-bit value at position ``k`` (along K) of ``byte``, as an int32."""
    v = cast("int32", byte)
    if bits == 8:
        return v
    per = 8 // bits
    return (v >> cast("int32", (k % per) * bits)) & ((1 << bits) - 1)


def weight(codes: te.Tensor, scales: te.Tensor, zeros: te.Tensor, bits: int, block: int, K: int,
           name: str = "W") -> te.Tensor:
    """``W^T`` (K, N) decoded from codes in the stored layout ((N, blocks, block*bits/8),
    scales and zero points (N, blocks))."""
    per = 8 // bits
    N = codes.shape[0]

    def f(k, n):
        q = _code(codes[n, k // block, (k % block) // per], k, bits)
        return (cast(scales.dtype, q) - zeros[n, k // block]) * scales[n, k // block]
    return te.compute((K, N), f, name)


def packed_weight(codes: te.Tensor, scales: te.Tensor, offsets: te.Tensor, bits: int, block: int, K: int,
                  name: str = "Wp") -> te.Tensor:
    """The packed GEMM's B panels (N/NR, K, NR) decoded from codes in panels (N/NR, K/per, NR),
    scales and offsets (``-zero * scale``) in panels (N/NR, blocks, NR)."""
    per = 8 // bits
    panels, _, nr = codes.shape

    def f(jo, k, ji):
        q = _code(codes[jo, k // per, ji], k, bits)
        return cast(scales.dtype, q) * scales[jo, k // block, ji] + offsets[jo, k // block, ji]
    return te.compute((panels, K, nr), f, name)
