"""Computes of the linear NN ops: convolutions (1-3 spatial dims, groups, dilation), transposed
convolutions, ``nn.dense`` and ``nn.matmul``.

They are the kernels' computations (``ember.kernels.conv``, ``ember.kernels.matmul``) with the
ops' conventions: ONNX layouts (data ``N C <spatial>``, weights ``O I/groups <k>``, transposed
weights ``I O/groups <k>``), ``padding`` as all leading pads then all trailing pads,
``nn.dense`` as ``x @ weight^T`` with ``weight`` (units, K), ``nn.matmul`` as numpy's (batch
dims broadcast, a 1-D operand is a vector whose dim leaves the result). The result stage's
``attrs`` name its ``kind`` and internal stages, which the op schedules
(``ember.graph.ops.schedule``) read.

How a product is computed depends on its shape: packed GEMM panels in general; for a few rows
(static, at most the micro-tile's) the dense's dot products of contiguous rows, or the
matmul's micro-kernel on unpacked operands; a plain reduction (``kind: direct``) when an
operand is a vector.
"""
from __future__ import annotations

from ....errors import UnsupportedOpError
from ....kernels.common import const_int, plain
from ....kernels.conv import conv_compute, conv_transpose_compute, conv_window, pack_weight
from ....kernels import weight_only
from ....kernels.gpu_mma import mma_matmul
from ....kernels.matmul import dot_compute, matmul_compute, micro_tile, pack_b
from ....loop import compute as te
from ..nn import _NDIM_NAME
from ..registry import set_kernel
from .common import register_compute, stage_name, te_shape

DOT_ROWS = 4  # dense: up to this many (static) rows, dot products of contiguous rows


def _window(attrs: dict, n: int) -> tuple:
    """(strides, padding, dilation) with the defaults filled in."""
    return (tuple(attrs["strides"] or (1,) * n), tuple(attrs["padding"] or (0,) * (2 * n)),
            tuple(attrs["dilation"] or (1,) * n))


def _static_weight(op: str, w: te.Tensor) -> None:
    if any(const_int(d) is None for d in w.shape):
        raise UnsupportedOpError(f"{op}: the weight's shape must be static, got {w.shape}")


def _check_shape(op: str, out: te.Tensor, out_type) -> te.Tensor:
    want = te_shape(out_type)
    got = tuple(const_int(d) if const_int(d) is not None else d for d in out.shape)
    if len(got) != len(want) or any(isinstance(g, int) and isinstance(w, int) and g != w for g, w in zip(got, want)):
        raise UnsupportedOpError(f"{op}: computed shape {got} differs from the inferred {want}")
    return out


def _conv(n: int, transpose: bool):
    op = f"nn.conv{_NDIM_NAME[n]}" + ("_transpose" if transpose else "")

    def compute_fn(attrs, inputs, out_type):
        x, w = inputs
        _static_weight(op, w)
        strides, padding, dilation = _window(attrs, n)
        if not transpose and attrs.get("weight_block"):
            out = _packed_conv(x, w, attrs, strides, padding, dilation, op)
        elif transpose:
            out = conv_transpose_compute(x, w, strides, padding, dilation, attrs["output_padding"],
                                         attrs["groups"], name=stage_name(op))
        else:
            out = conv_compute(x, w, strides, padding, dilation, attrs["groups"], name=stage_name(op))
        return _check_shape(op, out, out_type)

    register_compute(op, compute_fn)


def _packed_conv(x, w, attrs, strides, padding, dilation, op):
    """A convolution whose weights ``nn.pack_conv_weight`` packed (at compile time when they are
    constants): the micro-kernel reads them directly."""
    n = len(strides)
    fb, F, groups = attrs["weight_block"], attrs["channels"], attrs["groups"]
    kernel = [const_int(d) for d in w.shape[2:-1]]
    return conv_window(x, None, F, groups, kernel, strides, dilation, padding[:n], padding[n:],
                       name=stage_name(op), blocks=(fb, None), packed=w)


def _pack_conv_weight(attrs, inputs, out_type):
    from ..dims import index

    (w,) = inputs
    F, Cg, *kernel = [const_int(d) if const_int(d) is not None else d for d in w.shape]
    fb = attrs["block"] if isinstance(attrs["block"], int) else index(attrs["block"])
    return pack_weight(lambda f, c, *k: w[(f, c, *k)], F, Cg, kernel, fb, w.dtype, stage_name("nn.pack_conv_weight"))


register_compute("nn.pack_conv_weight", _pack_conv_weight)


def _conv2d_integer(attrs, inputs, out_type):
    """The plain-layout integer conv (where ``block_layout`` did not block it): int32 throughout
    (the blocked one, ``nn.conv2d_nchwc`` with a packed dot, is the fast path)."""
    x, w = inputs
    zero = attrs["zero"]
    xi = te.compute(x.shape, lambda *i: x[i].astype("int32") - zero, stage_name("nn.conv2d_integer_data"))
    strides, padding, dilation = _window(attrs, 2)
    F, _, *kernel = [const_int(d) for d in w.shape]
    out = conv_window(xi, lambda f, c, *k: w[(f, c, *k)].astype("int32"), F, 1, kernel, strides, dilation,
                      padding[:2], padding[2:], name=stage_name("nn.conv2d_integer"))
    return _check_shape("nn.conv2d_integer", out, out_type)


register_compute("nn.conv2d_integer", _conv2d_integer)

for _n in _NDIM_NAME:
    _conv(_n, transpose=False)
    _conv(_n, transpose=True)


def _vector_product(a: te.Tensor, b: te.Tensor, out_type, name: str, trans_b: bool = False) -> te.Tensor:
    """numpy matmul as one reduction over the contraction axis (where an operand is 1-D, and
    every product under :func:`~ember.kernels.common.plain_computes`)."""
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    shape = te_shape(out_type)
    K = a.shape[-1]
    k = te.reduce_axis(K, "k")
    nb = len(shape) - (0 if a_vec else 1) - (0 if b_vec else 1)  # broadcast batch dims

    def bidx(t_batch, b_out):
        off = len(b_out) - len(t_batch)
        return tuple(0 if const_int(d) == 1 else b_out[off + i] for i, d in enumerate(t_batch))

    def body(*idx):
        batch, rest = idx[:nb], list(idx[nb:])
        i = None if a_vec else rest.pop(0)
        j = None if b_vec else rest.pop(0)
        av = a[k.var] if a_vec else a[(*bidx(a.shape[:-2], batch), i, k.var)]
        if b_vec:
            bv = b[k.var]
        elif trans_b:
            bv = b[(*bidx(b.shape[:-2], batch), j, k.var)]
        else:
            bv = b[(*bidx(b.shape[:-2], batch), k.var, j)]
        return te.sum(av * bv, axis=k)

    return te.compute(shape, body, name, attrs={"kind": "direct"})


def _dense(attrs, inputs, out_type):
    x, w = inputs
    name = stage_name("nn.dense")
    if x.ndim == 1:
        return _vector_product(x, w, out_type, name, trans_b=True)
    if plain():  # (a GPU's: one reduction over the operands as they are)
        return _vector_product(x, w, out_type, name, trans_b=True)
    batch = te_shape(out_type)[:-2]
    rows = const_int(x.shape[-2])
    if rows is not None and rows <= DOT_ROWS:
        return dot_compute(x, w, name=name, batch=batch)
    return matmul_compute(x, w, name=name, trans_b=True, batch=batch)[0]


def _matmul(attrs, inputs, out_type):
    a, b = inputs
    name = stage_name("nn.matmul")
    if a.ndim == 1 or b.ndim == 1 or plain():
        return _vector_product(a, b, out_type, name)
    rows = const_int(a.shape[-2])
    mr, _ = micro_tile(None, a.dtype)
    few = rows is not None and rows <= mr
    return matmul_compute(a, b, name=name, batch=te_shape(out_type)[:-2], pack=not few)[0]


def _pack_matmul_weight(attrs, inputs, out_type):
    return pack_b(inputs[0], attrs["nr"], stage_name("nn.pack_matmul_weight"), attrs["trans"],
                  attrs.get("group", 1))


def _matmul_packed(attrs, inputs, out_type):
    a, bp = inputs
    return matmul_compute(a, bp, name=stage_name("nn.matmul_packed"), batch=te_shape(out_type)[:-2],
                          units=attrs["units"], dot=attrs.get("dot"))[0]


def _matmul_nbits(attrs, inputs, out_type):
    a, codes, scales, zeros = inputs
    bits, block, K = attrs["bits"], attrs["block"], const_int(a.shape[-1])
    name = stage_name("nn.matmul_nbits")
    w = weight_only.weight(codes, scales, zeros, bits, block, K, f"{name}_W")
    rows = const_int(a.shape[-2])
    few = rows is not None and rows <= micro_tile(None, a.dtype)[0]
    return matmul_compute(a, w, name=name, batch=te_shape(out_type)[:-2], pack=not few, inline=(w,))[0]


def _matmul_nbits_packed(attrs, inputs, out_type):
    a, codes, scales, offsets = inputs
    name = stage_name("nn.matmul_nbits_packed")
    w = weight_only.packed_weight(codes, scales, offsets, attrs["bits"], attrs["block"], const_int(a.shape[-1]),
                                  f"{name}_W")
    return matmul_compute(a, w, name=name, batch=te_shape(out_type)[:-2], units=attrs["units"], inline=(w,))[0]


register_compute("nn.dense", _dense)
register_compute("nn.matmul_nbits", _matmul_nbits)
register_compute("nn.matmul_nbits_packed", _matmul_nbits_packed)
register_compute("nn.matmul", _matmul)
register_compute("nn.pack_matmul_weight", _pack_matmul_weight)
register_compute("nn.matmul_packed", _matmul_packed)


def _matmul_mma(attrs, param_types, out_type, name):
    """``nn.matmul_mma``'s GPU kernel: the tensor-core product of :mod:`ember.kernels.gpu_mma`."""
    a, b = param_types
    batch = 1
    for d in a.shape[:-2]:
        batch *= d
    M, K = a.shape[-2:]
    N = b.shape[-2] if attrs["trans_b"] else b.shape[-1]
    return mma_matmul(name, batch, M, N, K, a.dtype, attrs["out_dtype"], trans_b=attrs["trans_b"],
                      batched_b=b.ndim > 2)


set_kernel("nn.matmul_mma", _matmul_mma, kind="cuda")
