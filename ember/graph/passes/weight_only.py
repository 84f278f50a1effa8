"""Products by weights dequantized from a few bits: keep the codes.

An exporter's weight-only quantization (ONNX Runtime's ``MatMulNBitsQuantizer`` in its QDQ
format, any blocked or per-column ``DequantizeLinear`` of int4/uint4/int8/uint8 weights
feeding a MatMul) reaches the graph as ``nn.matmul(a, (cast(q) - zero) * scale)`` over
constants. Folding would store the float weights: four or eight times the bytes, which a
decoding step (one row) reads whole. This pass recognizes the pattern before folding and
writes ``nn.matmul_nbits`` (the op of ONNX Runtime's ``MatMulNBits``): the codes stay, the
scale and zero point per block of K, and the GEMM decodes B as it reads it
(``ember.kernels.weight_only``).

The scale and zero point are whatever constant expressions the importer made (a gather that
repeats a block's scale along K, a per-column reshape, a scalar): they are evaluated (with
the weights' integer values, by Ember's folder, in one build for the whole model), and the
block is the longest run along K (a power of two from 16, or all of K) on which both are
constant in every column. Codes of 2, 4 or 8 bits: the fewest that hold their range.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import Call, Constant, Module
from ..types import TensorType
from ..visit import post_order
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call
from .fold_constant import evaluate
from .integer_products import _is
from .pack_conv_weights import _constant_valued

_BLOCKS = (256, 128, 64, 32, 16)


def _parts(w) -> Optional[tuple]:
    """``(codes, zero or None, scale)`` expressions where ``w`` is ``(codes - zero) * scale``
    with ``codes`` a float conversion of one 8-bit constant of ``w``'s size."""
    if not _is(w, "multiply"):
        return None
    size = int(np.prod(w.type.shape))
    for d, s in ((w.args[0], w.args[1]), (w.args[1], w.args[0])):
        x, z = (d.args[0], d.args[1]) if _is(d, "subtract") else (d, None)
        if not isinstance(x.type, TensorType) or tuple(x.type.shape) != tuple(w.type.shape):
            continue
        leaves = [c for c in post_order(x) if isinstance(c, Constant)]
        if any(c.value.dtype in (np.int8, np.uint8) and c.value.size == size for c in leaves):
            if all(c.value.size < size or c.value.dtype in (np.int8, np.uint8) for c in leaves):
                return x, z, s
    return None


def _candidate(n) -> Optional[tuple]:
    if not (_is(n, "nn.matmul") and len(n.args) == 2):
        return None
    a, w = n.args
    t = w.type
    if not (isinstance(t, TensorType) and t.ndim == 2 and t.is_static and t.dtype == "float32"):
        return None
    if not isinstance(a.type, TensorType) or a.type.ndim < 2:
        return None
    # (the pattern first, then whether the weights read no variable, and last the data's whole
    # graph: an unrolled LSTM's 512 steps each read all before them -- 9 s, quadratic, when
    # every product looked first)
    parts = _parts(w)
    if parts is None or not _constant_valued(w) or _constant_valued(a):
        return None
    return parts


def _per_row(e, K: int):
    """``(source, rows)``: ``e`` (broadcastable to (K, N)) is ``source[rows]`` along K --
    through the gather by which the importer repeats a block's value, without evaluating the
    repetition; ``rows`` None when ``e`` is ``source`` itself."""
    if _is(e, "gather") and isinstance(e.args[1], Constant) and e.attr("axis", 0) % max(e.type.ndim, 1) == 0 \
            and e.type.ndim == 2 and e.args[1].value.ndim == 1:
        return e.args[0], e.args[1].value.astype(np.int64)
    return e, None


def _rows(v: np.ndarray, rows, K: int, N: int) -> tuple:
    """``(values (R, N or 1), row of each k (K,))`` of a scale or zero point."""
    v = np.asarray(v, np.float32)
    if rows is None:
        v = v.reshape((1,) * (2 - v.ndim) + v.shape) if v.ndim < 2 else v
        rows = np.zeros(K, np.int64) if v.shape[0] == 1 else np.arange(K)
    return v, rows


def _block(S, Z, K: int) -> Optional[int]:
    """The longest run along K (all of it, or a power of two from 16) on which the scale and
    zero point (each ``(values, row of each k)``) are constant in every column, or None."""
    for b in (K,) + _BLOCKS:
        if b > K:
            continue
        first = np.repeat(np.arange(0, K, b), b)[:K]
        if all(np.array_equal(r[first], r) or np.array_equal(v[r[first]], v[r]) for v, r in (S, Z)):
            return b
    return None


def _nbits(n: Call, X: np.ndarray, Z: tuple, S: tuple) -> Optional[Call]:
    K, N = X.shape
    (sv, sr), (zv, zr) = S, Z
    if not (np.isfinite(sv).all() and np.isfinite(zv).all() and np.array_equal(zv, np.round(zv))):
        return None
    block = _block(S, Z, K)
    if block is None:
        return None
    low = min(int(X.min()), 0)
    codes = X.astype(np.int32) - low
    top = int(codes.max())
    bits = next((b for b in (2, 4, 8) if top < (1 << b) and block % (8 // b) == 0), None)
    if bits is None:
        return None
    per, blocks = 8 // bits, -(-K // block)
    q = np.zeros((N, blocks * block), np.uint8)
    q[:, :K] = codes.T
    q = q.reshape(N, blocks * block // per, per)
    packed = np.zeros(q.shape[:2], np.uint8)
    for j in range(per):
        packed |= (q[..., j] << (j * bits)).astype(np.uint8)
    first = np.arange(0, K, block)

    def per_block(v, r, shift=0):  # (N, blocks)
        return np.ascontiguousarray(np.broadcast_to(v[r[first]], (blocks, N)).T - shift, np.float32)
    args = [n.args[0], Constant(packed.reshape(N, blocks, block // per)), Constant(per_block(sv, sr)),
            Constant(per_block(zv, zr, low))]
    out = _call("nn.matmul_nbits", args, {"bits": bits, "block": block, "units": N}, n.span)
    return out if out.type == n.type else None


@graph_pass("weight_only", opt_level=2)
def weight_only(mod: Module, ctx: PassContext) -> Module:
    """Run products by dequantized 8-bit-or-narrower constant weights on their codes (see the
    module docstring)."""
    found = {}
    for n in post_order(mod.main.body):
        got = _candidate(n)
        if got is not None:
            found[n] = got
    if not found:
        return mod
    # every value to know, as a Constant or an expression to evaluate (all in one build)
    wanted, rows = [], []
    for n, (x, z, s) in found.items():
        K = n.args[1].type.shape[0]
        wanted.append(_call("cast", [x], {"dtype": "int16"}, n.span))  # (the codes: small integers)
        for e in (z if z is not None else Constant(np.zeros((), np.float32)), s):
            src, r = _per_row(e, K)
            wanted.append(src)
            rows.append(r)
    computed = iter(evaluate([e for e in wanted if not isinstance(e, Constant)], ctx))
    values = iter([(e if isinstance(e, Constant) else next(computed)).value for e in wanted])
    rows = iter(rows)
    mapping = {}
    for n in found:
        K, N = n.args[1].type.shape
        X = np.asarray(next(values))
        Z = _rows(next(values), next(rows), K, N)
        S = _rows(next(values), next(rows), K, N)
        out = _nbits(n, X, Z, S)
        if out is not None:
            mapping[n] = out
    return rewrite_main(mod, lambda n: mapping.get(n))


__all__ = ["weight_only"]
