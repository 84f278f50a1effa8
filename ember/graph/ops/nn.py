"""Neural-network ops: convolutions, dense/matmul, normalization, pooling, softmax.

Layouts are ONNX's: data ``NC<spatial>``, convolution weights ``O I/groups <kernel>``,
transposed-convolution weights ``I O/groups <kernel>``. Convolution and pooling ops exist for
1, 2 and 3 spatial dimensions (``nn.conv1d``, ``nn.conv2d``, ``nn.conv3d``, ...) and share one
rule. ``padding`` lists the leading pads of every spatial axis, then the trailing ones
(``(top, left, bottom, right)`` in 2-D); a missing ``strides``/``dilation``/``padding`` means
ones/ones/zeros.
"""
from __future__ import annotations

from ...errors import DTypeError, ShapeError
from ...loop import dtype as dt
from ..types import TensorType
from . import dims as D
from .registry import Pattern, attr, norm_axis, register_op, same_dtype, tensor

_NDIM_NAME = {1: "1d", 2: "2d", 3: "3d"}


def _float(t: TensorType, what: str = "the input") -> None:
    if not dt.is_float(t.dtype):
        raise DTypeError(f"{what} must have a float dtype, got {t.dtype}")


def _spatial(attrs: dict, key: str, n: int, fill: int) -> tuple:
    v = attrs.get(key)
    if v is None:
        return (fill,) * (2 * n if key == "padding" else n)
    want = 2 * n if key == "padding" else n
    if len(v) != want:
        raise ShapeError(f"{key} has {len(v)} values, expected {want} for {n} spatial dimension(s)")
    if key != "padding" and any(isinstance(x, int) and x < 1 for x in v):  # (a tier-0 pool's may be sizes)
        raise ShapeError(f"{key} must be >= 1, got {v}")
    if key == "padding" and any(isinstance(x, int) and x < 0 for x in v):
        raise ShapeError(f"padding must be >= 0, got {v}")
    return tuple(v)


def _data(t, n: int) -> TensorType:
    t = tensor(t, "the data")
    if t.ndim != n + 2:
        raise ShapeError(f"the data must have rank {n + 2} (N, C and {n} spatial), got {t}")
    return t


def _window(shape, kernel, attrs, n, ceil_mode=False) -> tuple:
    strides = _spatial(attrs, "strides", n, 1)
    dilation = _spatial(attrs, "dilation", n, 1)
    pads = _spatial(attrs, "padding", n, 0)
    out = []
    for i in range(n):
        try:
            out.append(D.window_out(shape[i], kernel[i], strides[i], dilation[i], pads[i], pads[i + n],
                                    ceil_mode))
        except ShapeError as e:
            raise ShapeError(f"spatial axis {i}: {e}") from None
    return tuple(out)


_WINDOW = {"strides": attr("ints", None), "padding": attr("ints", None), "dilation": attr("ints", None)}
# (a tier-0 kernel's window may be sizes, each call passing its own: ember.compiler.generic)
_SIZED_WINDOW = {"strides": attr("dims", None), "padding": attr("dims", None), "dilation": attr("dims", None)}

# -- convolution --------------------------------------------------------------------------------


def _conv_rule(n: int):
    def infer(args, attrs):
        x, w = _data(args[0], n), tensor(args[1], "the weight")
        same_dtype([x, w], "the data and the weight")
        fb = attrs.get("weight_block") or 0
        if fb:
            # packed by nn.pack_conv_weight: (ceil(F / fb), I/groups, kernel..., fb)
            if w.ndim != n + 3 or w.shape[-1] != fb:
                raise ShapeError(f"a weight packed in blocks of {fb} must have rank {n + 3} and last dim {fb}, "
                                 f"got {w}")
            F, cw, kernel = attrs.get("channels") or 0, w.shape[1], w.shape[2:-1]
            if not isinstance(w.shape[0], int) or F <= 0 or -(-F // fb) != w.shape[0]:
                raise ShapeError(f"channels={F} does not match the packed weight {w} (blocks of {fb})")
        else:
            if w.ndim != n + 2:
                raise ShapeError(f"the weight must have rank {n + 2} (O, I/groups and {n} kernel dims), got {w}")
            F, cw, kernel = w.shape[0], w.shape[1], w.shape[2:]
        groups = attrs["groups"]
        cin = x.shape[1]
        if isinstance(cin, int) and isinstance(cw, int) and cin != cw * groups:
            raise ShapeError(f"the data has {cin} channels but the weight expects {cw} x {groups} groups "
                             f"(data {x}, weight {w})")
        if isinstance(F, int) and F % groups:
            raise ShapeError(f"{F} output channels do not divide into {groups} groups")
        if not all(isinstance(k, int) for k in kernel):
            raise ShapeError(f"the kernel size must be static, got weight {w}")
        return TensorType((x.shape[0], F) + _window(x.shape[2:], kernel, attrs, n), x.dtype)

    return infer


def _infer_pack_conv_weight(args, attrs):
    w = tensor(args[0], "the weight")
    fb = attrs["block"]  # (a size of its own in the folding program's shape-generic kernel)
    if isinstance(fb, int) and fb < 1 or w.ndim < 3:
        raise ShapeError(f"nn.pack_conv_weight needs a weight (O, I/groups, kernel...) and block >= 1, "
                         f"got {w} and block={fb}")
    # (symbolic sizes: the shape-generic kernel that packs the weights of every conv)
    return TensorType((D.dim_ceildiv(w.shape[0], fb),) + w.shape[1:] + (fb,), w.dtype)


def _conv_transpose_rule(n: int):
    def infer(args, attrs):
        x, w = _data(args[0], n), tensor(args[1], "the weight")
        same_dtype([x, w], "the data and the weight")
        if w.ndim != n + 2:
            raise ShapeError(f"the weight must have rank {n + 2} (I, O/groups and {n} kernel dims), got {w}")
        groups = attrs["groups"]
        if isinstance(x.shape[1], int) and isinstance(w.shape[0], int) and x.shape[1] != w.shape[0]:
            raise ShapeError(f"the data has {x.shape[1]} channels but the weight expects {w.shape[0]}")
        kernel = w.shape[2:]
        if not all(isinstance(k, int) for k in kernel):
            raise ShapeError(f"the kernel size must be static, got weight {w}")
        strides = _spatial(attrs, "strides", n, 1)
        dilation = _spatial(attrs, "dilation", n, 1)
        pads = _spatial(attrs, "padding", n, 0)
        outpad = attrs["output_padding"] or (0,) * n
        if len(outpad) != n:
            raise ShapeError(f"output_padding has {len(outpad)} values, expected {n}")
        out = []
        for i in range(n):
            extra = outpad[i] + dilation[i] * (kernel[i] - 1) + 1 - pads[i] - pads[i + n]
            size = D.dim_add(D.dim_mul(D.dim_add(x.shape[2 + i], -1), strides[i]), extra)
            if isinstance(size, int) and size <= 0:
                raise ShapeError(f"spatial axis {i}: the output size would be {size}")
            out.append(size)
        return TensorType((x.shape[0], D.dim_mul(w.shape[1], groups)) + tuple(out), x.dtype)

    return infer


for _n, _s in _NDIM_NAME.items():
    register_op(f"nn.conv{_s}", infer=_conv_rule(_n), pattern=Pattern.OUT_ELEMWISE_FUSABLE, num_args=2,
                attrs_schema={**_WINDOW, "groups": attr("int", 1), "weight_block": attr("int", 0),
                              "channels": attr("int", 0)},
                doc=f"{_n}-D convolution (cross-correlation), data NC{'DHW'[3 - _n:]}, weight OI{'DHW'[3 - _n:]} "
                    f"(or, with weight_block=B, packed by nn.pack_conv_weight, and channels=O)")
    register_op(f"nn.conv{_s}_transpose", infer=_conv_transpose_rule(_n), pattern=Pattern.OUT_ELEMWISE_FUSABLE,
                num_args=2, attrs_schema={**_WINDOW, "groups": attr("int", 1),
                                          "output_padding": attr("ints", None)},
                doc=f"{_n}-D transposed convolution (gradient of conv{_s} w.r.t. its data)")


def _infer_conv2d_integer(args, attrs):
    x, w = _data(args[0], 2), tensor(args[1], "the weight")
    if x.dtype != "uint8" or w.dtype != "int8" or w.ndim != 4 or not w.is_static:
        raise ShapeError(f"nn.conv2d_integer takes uint8 data N C H W and a static int8 weight O I kh kw, got "
                         f"{x} and {w}")
    if not 0 <= attrs["zero"] <= 255:
        raise ShapeError(f"nn.conv2d_integer: the data's zero point must be a uint8, got {attrs['zero']}")
    if isinstance(x.shape[1], int) and x.shape[1] != w.shape[1]:
        raise ShapeError(f"the data has {x.shape[1]} channels but the weight expects {w.shape[1]} (data {x}, weight {w})")
    return TensorType((x.shape[0], w.shape[0]) + _window(x.shape[2:], w.shape[2:], attrs, 2), "int32")


# a quantized conv (``ember.graph.passes.integer_products``): exact int32 sums of (x - zero) * w,
# the data's padding at its zero point (a real zero); ``block_layout`` runs it on blocked uint8
# data as packed dots (vpdpbusd)
register_op("nn.conv2d_integer", infer=_infer_conv2d_integer, pattern=Pattern.OUT_ELEMWISE_FUSABLE, num_args=2,
            attrs_schema={**_WINDOW, "zero": attr("int", 0)},
            doc="2-D convolution of uint8 data less its zero point by an int8 weight (groups 1), int32 sums")


def _infer_conv2d_nchwc(args, attrs):
    from ...loop.intrinsics import PACKED_DOTS, WORD

    x, w = tensor(args[0], "the data"), tensor(args[1], "the packed weight")
    # (a grouped conv may read uint8 data as floats, its padding the data's zero point)
    narrow = attrs["groups"] != 1 and x.dtype == "uint8" and w.dtype == "float32" and attrs["dot"] is None
    if not narrow:
        same_dtype([x, w], "the data and the weight")
    elif not 0 <= attrs["pad_value"] <= 255:
        raise ShapeError(f"nn.conv2d_nchwc of uint8 data pads with a uint8, got pad_value={attrs['pad_value']}")
    dot = attrs["dot"]
    if dot is not None and (dot not in PACKED_DOTS or x.dtype != WORD or x.ndim != 5 or attrs["groups"] != 1
                            or len(args) > 2):
        raise ShapeError(f"nn.conv2d_nchwc with dot={dot!r}: a packed dot ({', '.join(PACKED_DOTS)}) of blocked "
                         f"data and packed weights, both {WORD} words along the channels, groups 1, no scale; "
                         f"got data {x}")
    out_dtype = x.dtype if dot is None else PACKED_DOTS[dot][3]
    if x.ndim not in (4, 5):
        raise ShapeError(f"the data must be N C H W or blocked N C/b H W b, got {x}")
    # (a tier-0 kernel, shared by convolutions of every width, takes F/FB and C as sizes: a
    # conv of groups 1 may have them symbolic, a grouped one its filter blocks)
    free = 2 if attrs["groups"] == 1 else 1 if x.ndim == 5 else 0
    # (... and a tier-0 conv of groups 1, of plain floats, its window: ember.kernels.conv_window)
    windowed = attrs["groups"] == 1 and dot is None and len(args) == 2 and w.ndim == 5 \
        and not all(isinstance(d, int) for d in w.shape[2:4])
    if w.ndim != 5 or not all(isinstance(d, int) for d in w.shape[4 if windowed else free:]):
        raise ShapeError(f"the weight must be packed by nn.pack_conv_weight (F/FB, C, kh, kw, FB) and static, got {w}")
    spatial = _window(x.shape[2:4], w.shape[2:4], attrs, 2)
    if attrs["groups"] != 1:
        # each channel block of the (blocked) data is filtered by its own block of weights:
        # depthwise (C/FB, 1, kh, kw, FB), groups of g channels (C/FB, g, kh, kw, FB) or
        # block-diagonal (C/FB, FB, kh, kw, FB)
        if x.ndim != 5 or w.shape[4] % w.shape[1] or x.shape[4] != w.shape[4] \
                or (isinstance(x.shape[1], int) and isinstance(w.shape[0], int) and x.shape[1] != w.shape[0]):
            raise ShapeError(f"a grouped nn.conv2d_nchwc needs blocked data N C/b H W b and weights "
                             f"(C/b, g, kh, kw, b), g dividing b, with the same block, got data {x} and "
                             f"weight {w}")
        D.assume_equal(x.shape[1], w.shape[0], f"the data's channel blocks ({x.shape[1]}) must be the weight's "
                       f"({w.shape[0]})")
        if len(args) > 2:
            raise ShapeError("a grouped nn.conv2d_nchwc takes no per-channel scale")
        return TensorType((x.shape[0], w.shape[0]) + spatial + (w.shape[4],), w.dtype)
    if len(args) > 2:  # a per-channel scale of the data: N|1 C/b 1 1 b
        sc = tensor(args[2], "the scale")
        same_dtype([x, sc], "the data and the scale")
        if x.ndim != 5 or sc.ndim != 5 or tuple(sc.shape[1:]) != (x.shape[1], 1, 1, x.shape[4]) \
                or sc.shape[0] not in (1, x.shape[0]):
            raise ShapeError(f"the scale of nn.conv2d_nchwc must be N|1 C/b 1 1 b against blocked data "
                             f"N C/b H W b, got data {x} and scale {sc}")
    cin = D.dim_mul(x.shape[1], x.shape[4]) if x.ndim == 5 else x.shape[1]
    if attrs["pairs"]:  # (each word of four uint8 values read as two of int16 pairs)
        if dot != "dot_i16x2":
            raise ShapeError(f"nn.conv2d_nchwc with pairs (uint8 words read as int16 pairs) needs "
                             f"dot='dot_i16x2', got dot={dot!r}")
        cin = D.dim_mul(cin, 2)
    if isinstance(cin, int) and isinstance(w.shape[1], int) and cin != w.shape[1]:
        raise ShapeError(f"the data has {cin} channels but the weight expects {w.shape[1]} (data {x}, weight {w})")
    D.assume_equal(cin, w.shape[1], f"the data's channels ({cin}) must be the weight's ({w.shape[1]})")
    return TensorType((x.shape[0], w.shape[0]) + spatial + (w.shape[4],), out_dtype)


register_op("nn.conv2d_nchwc", infer=_infer_conv2d_nchwc, pattern=Pattern.OUT_ELEMWISE_FUSABLE, num_args=(2, 3),
            attrs_schema={**_SIZED_WINDOW, "groups": attr("int", 1), "dot": attr("str", None),
                          "pad_value": attr("int", 0), "pairs": attr("bool", False)},
            doc="2-D convolution in the blocked channel layout: data N C H W or N C/b H W b, weight packed "
                "by nn.pack_conv_weight (F/FB, C, kh, kw, FB), result N F/FB OH OW FB; with groups > 1 "
                "each block reads its own: blocked data and weights (C/b, 1, kh, kw, b) (depthwise) or "
                "(C/b, g, kh, kw, b) (groups of g channels; g = b: block-diagonal), its data float or uint8 "
                "(padded with pad_value) read as float; with dot, words of packed values (pairs: uint8 words "
                "read as two of int16 pairs, for dot_i16x2); an optional third "
                "argument N|1 C/b 1 1 b scales the blocked data per channel first (folded into the weights)")


register_op("nn.pack_conv_weight", infer=_infer_pack_conv_weight, pattern=Pattern.INJECTIVE,
            attrs_schema={"block": attr("dim")},
            doc="convolution weights (O, I/groups, kernel...) in blocks of output channels: "
                "(ceil(O / block), I/groups, kernel..., block), zero past O")


def _infer_bias_add(args, attrs):
    x, b = tensor(args[0]), tensor(args[1], "the bias")
    same_dtype([x, b], "the data and the bias")
    axis = norm_axis(attrs["axis"], x.ndim)
    if b.ndim != 1 or (isinstance(b.shape[0], int) and isinstance(x.shape[axis], int) and b.shape[0] != x.shape[axis]):
        raise ShapeError(f"the bias must be 1-D with {x.shape[axis]} elements (axis {axis} of {x}), got {b}")
    return x


register_op("nn.bias_add", infer=_infer_bias_add, pattern=Pattern.BROADCAST, num_args=2,
            attrs_schema={"axis": attr("int", 1)}, doc="x + bias along axis")

# -- dense and matmul ---------------------------------------------------------------------------


def _infer_dense(args, attrs):
    x, w = tensor(args[0], "the data"), tensor(args[1], "the weight")
    same_dtype([x, w], "the data and the weight")
    if x.ndim < 1 or w.ndim != 2:
        raise ShapeError(f"expects data (..., K) and weight (N, K), got {x} and {w}")
    k1, k2 = x.shape[-1], w.shape[1]
    if isinstance(k1, int) and isinstance(k2, int) and k1 != k2:
        raise ShapeError(f"the data's last dimension {k1} != the weight's {k2} (data {x}, weight {w})")
    return TensorType(x.shape[:-1] + (w.shape[0],), x.dtype)


register_op("nn.dense", infer=_infer_dense, pattern=Pattern.OUT_ELEMWISE_FUSABLE, num_args=2,
            doc="x @ weight.T with weight (units, K)")


def _infer_matmul(args, attrs):
    a, b = tensor(args[0], "the left operand"), tensor(args[1], "the right operand")
    same_dtype([a, b], "the operands")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"operands must have rank >= 1, got {a} and {b}")
    # numpy: a 1-D operand is a row (left) or a column (right) vector, removed from the result
    sa = (1,) + a.shape if a.ndim == 1 else a.shape
    sb = b.shape + (1,) if b.ndim == 1 else b.shape
    k1, k2 = sa[-1], sb[-2]
    if isinstance(k1, int) and isinstance(k2, int) and k1 != k2:
        raise ShapeError(f"contraction dimensions differ: {k1} vs {k2} ({a} @ {b})")
    batch = D.broadcast_shapes(sa[:-2], sb[:-2])
    out = batch + (sa[-2] if a.ndim > 1 else None, sb[-1] if b.ndim > 1 else None)
    return TensorType(tuple(d for d in out if d is not None), a.dtype)


register_op("nn.matmul", infer=_infer_matmul, pattern=Pattern.OUT_ELEMWISE_FUSABLE, num_args=2,
            doc="numpy matmul: batched, batch dimensions broadcast, 1-D operands are vectors")


def _infer_pack_matmul_weight(args, attrs):
    b = tensor(args[0], "the weight")
    nr, g = attrs["nr"], attrs["group"]
    if b.ndim < 2 or nr < 1 or g < 1:
        raise ShapeError(f"nn.pack_matmul_weight needs a weight of rank >= 2, nr >= 1 and group >= 1, got {b}, "
                         f"nr={nr}, group={g}")
    *batch, d0, d1 = b.shape
    k, n = (d1, d0) if attrs["trans"] else (d0, d1)
    if g > 1:
        return TensorType((*batch, D.dim_ceildiv(n, nr), D.dim_ceildiv(k, g), nr, g), b.dtype)
    return TensorType((*batch, D.dim_ceildiv(n, nr), k, nr), b.dtype)


def _infer_matmul_packed(args, attrs):
    from ...loop.intrinsics import PACKED_DOTS, WORD

    a, bp = tensor(args[0], "the left operand"), tensor(args[1], "the packed weight")
    same_dtype([a, bp], "the operands")
    dot = attrs["dot"]
    if dot is not None and (dot not in PACKED_DOTS or a.dtype != WORD):
        raise ShapeError(f"nn.matmul_packed with dot={dot!r}: the dot must be one of {', '.join(PACKED_DOTS)} "
                         f"and the operands {WORD} words, got {a.dtype}")
    panels = tuple(bp.shape[-3:]) if bp.ndim >= 3 else ()
    # (the panel count and the contraction may be symbolic -- a shape-generic tier-0 kernel
    # for products of every depth --, the panel width not: the micro-kernel's vectors)
    if a.ndim < 2 or not panels or not isinstance(panels[2], int):
        raise ShapeError(f"expects (..., M, K) and a weight packed by nn.pack_matmul_weight (..., N/nr, K, nr), "
                         f"got {a} and {bp}")
    k, n = a.shape[-1], attrs["units"]
    why = f"{a} @ packed {bp} with {n} columns: the contraction or the columns do not match"
    if isinstance(n, int) and n <= 0:
        raise ShapeError(why)
    if not isinstance(k, int) or not isinstance(panels[1], int):
        D.assume_equal(k, panels[1], why)
    elif k != panels[1]:
        raise ShapeError(why)
    D.assume_le(n, D.dim_mul(panels[0], panels[2]), why)
    batch = D.broadcast_shapes(a.shape[:-2], bp.shape[:-3])  # (an activation packed at run time: batched)
    return TensorType(batch + (a.shape[-2], n), a.dtype if dot is None else PACKED_DOTS[dot][3])


register_op("nn.pack_matmul_weight", infer=_infer_pack_matmul_weight, pattern=Pattern.INJECTIVE,
            attrs_schema={"nr": attr("int"), "trans": attr("bool", False), "group": attr("int", 1)},
            doc="a (..., K, N) weight -- (..., N, K) with trans -- in panels of nr columns: (..., ceil(N/nr), K, nr), "
                "zero past N; with group g > 1, g values along K together: (..., ceil(N/nr), ceil(K/g), nr, g)")
register_op("nn.matmul_packed", infer=_infer_matmul_packed, pattern=Pattern.OUT_ELEMWISE_FUSABLE, num_args=2,
            attrs_schema={"units": attr("dim"), "dot": attr("str", None), "runtime": attr("bool", False)},
            doc="a (..., M, K) @ a weight packed by nn.pack_matmul_weight (its batch dims broadcast), with units (N) "
                "columns (runtime: the weight is an activation, packed at run time); with dot "
                "(a packed dot: dot_bf16x2, dot_u8i8x4) both are int32 words of narrow values along K")

def _infer_matmul_mma(args, attrs):
    a, b = tensor(args[0], "the left operand"), tensor(args[1], "the right operand")
    same_dtype([a, b], "the operands")
    if a.dtype not in ("float16", "bfloat16") or attrs["out_dtype"] not in ("float32", a.dtype):
        raise ShapeError(f"nn.matmul_mma multiplies float16 or bfloat16 operands into float32 or their own type, "
                         f"got {a.dtype} -> {attrs['out_dtype']}")
    if a.ndim < 2 or b.ndim < 2 or not (a.is_static and b.is_static) or (b.ndim > 2 and b.shape[:-2] != a.shape[:-2]):
        raise ShapeError(f"nn.matmul_mma needs static (..., M, K) and (K, N) operands, a batched right operand with "
                         f"the left's batch, got {a} and {b}")
    k, n = (b.shape[-1], b.shape[-2]) if attrs["trans_b"] else (b.shape[-2], b.shape[-1])
    if a.shape[-1] != k:
        raise ShapeError(f"contraction dimensions differ: {a.shape[-1]} vs {k} ({a} @ {b})")
    return TensorType(a.shape[:-1] + (n,), attrs["out_dtype"])


register_op("nn.matmul_mma", infer=_infer_matmul_mma, pattern=Pattern.OPAQUE, num_args=2,
            attrs_schema={"out_dtype": attr("str", "float32"), "trans_b": attr("bool", False)},
            doc="a GPU's tensor-core product of float16/bfloat16 operands with float32 sums: a (..., M, K) @ b "
                "(K, N), b^T with trans_b, or batched b; the result in out_dtype")

# -- products by weights quantized in blocks (weight-only low-bit) -------------------------------


def _nbits_check(a: TensorType, codes: TensorType, scales: TensorType, third: TensorType, attrs, packed: bool):
    bits, block, n = attrs["bits"], attrs["block"], attrs["units"]
    _float(a, "the left operand")
    if bits not in (2, 4, 8) or block < 1 or block % (8 // bits) or n < 1:
        raise ShapeError(f"bits must be 2, 4 or 8 and block a multiple of the values a byte holds, got "
                         f"bits={bits}, block={block}, units={n}")
    if codes.dtype != "uint8" or not codes.is_static or a.ndim < 2:
        raise ShapeError(f"expects (..., M, K) and static uint8 codes, got {a} and {codes}")
    k = a.shape[-1]
    if not isinstance(k, int):
        raise ShapeError(f"the contraction of {a} must be static for weights quantized in blocks")
    per, blocks = 8 // bits, -(-k // block)
    if packed:
        nr = codes.shape[-1]
        want_codes, want_scales = (-(-n // nr), codes.shape[1], nr), (-(-n // nr), blocks, nr)
        ok = codes.ndim == 3 and codes.shape[0] == want_codes[0] and codes.shape[1] * per >= k
    else:
        want_codes, want_scales = (n, blocks, block // per), (n, blocks)
        ok = tuple(codes.shape) == want_codes
    if not ok or tuple(scales.shape) != want_scales or tuple(third.shape) != want_scales:
        raise ShapeError(f"K={k}, N={n}, {bits} bits in blocks of {block}: expects codes {want_codes} and scales "
                         f"{want_scales}, got {codes}, {scales} and {third}")
    same_dtype([a, scales, third], "the operand, the scales and the zero points")
    return TensorType(a.shape[:-1] + (n,), a.dtype)


def _infer_matmul_nbits(args, attrs):
    return _nbits_check(*(tensor(t) for t in args), attrs, packed=False)


def _infer_matmul_nbits_packed(args, attrs):
    return _nbits_check(*(tensor(t) for t in args), attrs, packed=True)


_NBITS_ATTRS = {"bits": attr("int"), "block": attr("int"), "units": attr("int")}
register_op("nn.matmul_nbits", infer=_infer_matmul_nbits, pattern=Pattern.OUT_ELEMWISE_FUSABLE, num_args=4,
            attrs_schema=_NBITS_ATTRS,
            doc="a (..., M, K) @ W^T, W (units, K) stored as codes of `bits` bits in blocks of `block` along K "
                "(uint8 (units, blocks, block*bits/8), low bits first: ONNX Runtime's MatMulNBits) with a "
                "scale and a zero point per block (units, blocks): W = (code - zero) * scale")
register_op("nn.matmul_nbits_packed", infer=_infer_matmul_nbits_packed, pattern=Pattern.OUT_ELEMWISE_FUSABLE,
            num_args=4, attrs_schema=_NBITS_ATTRS,
            doc="nn.matmul_nbits with its codes, scales and offsets in panels of nr columns (nn.pack_matmul_weight "
                "of the (units, K*bits/8) codes and of the (units, blocks) scales and -zero*scale offsets): "
                "W = code * scale + offset, decoded inside the GEMM's micro-kernel")

# -- normalization ------------------------------------------------------------------------------


def _infer_batch_norm(args, attrs):
    x = tensor(args[0])
    _float(x)
    axis = norm_axis(attrs["axis"], x.ndim)
    c = x.shape[axis]
    for i, name in enumerate(("gamma", "beta", "mean", "var"), 1):
        p = tensor(args[i], name)
        if p.ndim != 1 or (isinstance(c, int) and isinstance(p.shape[0], int) and p.shape[0] != c):
            raise ShapeError(f"{name} must be 1-D with {c} elements (axis {axis} of {x}), got {p}")
        if not dt.is_float(p.dtype):
            raise DTypeError(f"{name} must have a float dtype, got {p.dtype}")
    return x


register_op("nn.batch_norm", infer=_infer_batch_norm, pattern=Pattern.BROADCAST, num_args=5,
            attrs_schema={"axis": attr("int", 1), "epsilon": attr("float", 1e-5)},
            doc="inference batch norm: (x - mean) / sqrt(var + epsilon) * gamma + beta per channel")


def _infer_norm_affine(args, attrs):
    x = tensor(args[0])
    _float(x)
    axis = norm_axis(attrs["axis"], x.ndim)
    for i, name in ((1, "gamma"), (2, "beta"))[: len(args) - 1]:
        p = tensor(args[i], name)
        try:
            if D.broadcast_shapes(x.shape[axis:], p.shape) != x.shape[axis:]:
                raise ShapeError("")
        except ShapeError:
            raise ShapeError(f"{name} {p} does not broadcast to the normalized dimensions "
                             f"{x.shape[axis:]} of {x}") from None
    return x


register_op("nn.layer_norm", infer=_infer_norm_affine, pattern=Pattern.OUT_ELEMWISE_FUSABLE, num_args=(2, 3),
            attrs_schema={"axis": attr("int", -1), "epsilon": attr("float", 1e-5)},
            doc="normalize over axes [axis, ndim), then * gamma (+ beta)")


def _infer_instance_norm(args, attrs):
    x = tensor(args[0])
    if x.ndim < 3:
        raise ShapeError(f"the data must have rank >= 3 (N, C, spatial...), got {x}")
    _float(x)
    for i, name in ((1, "gamma"), (2, "beta")):
        p = tensor(args[i], name)
        if p.ndim != 1 or (isinstance(p.shape[0], int) and isinstance(x.shape[1], int) and p.shape[0] != x.shape[1]):
            raise ShapeError(f"{name} must be 1-D with {x.shape[1]} elements, got {p}")
    return x


register_op("nn.instance_norm", infer=_infer_instance_norm, pattern=Pattern.OPAQUE, num_args=3,
            attrs_schema={"epsilon": attr("float", 1e-5)},
            doc="normalize each (n, c) over its spatial dimensions, then * gamma + beta")


def _infer_lrn(args, attrs):
    x = tensor(args[0])
    _float(x)
    if x.ndim < 3:
        raise ShapeError(f"the data must have rank >= 3 (N, C, spatial...), got {x}")
    norm_axis(attrs["axis"], x.ndim)
    if attrs["size"] < 1:
        raise ShapeError(f"size must be >= 1, got {attrs['size']}")
    return x


register_op("nn.lrn", infer=_infer_lrn, pattern=Pattern.OPAQUE,
            attrs_schema={"size": attr("int"), "alpha": attr("float", 1e-4), "beta": attr("float", 0.75),
                          "bias": attr("float", 1.0), "axis": attr("int", 1)},
            doc="local response normalization across channels: x / (bias + alpha/size * sum sq)^beta")


def _infer_softmax(args, attrs):
    x = tensor(args[0])
    _float(x)
    norm_axis(attrs["axis"], x.ndim)
    return x


for _name in ("nn.softmax", "nn.log_softmax"):
    register_op(_name, infer=_infer_softmax, pattern=Pattern.OUT_ELEMWISE_FUSABLE,
                attrs_schema={"axis": attr("int", -1)})


def _infer_hardmax(args, attrs):
    return _infer_softmax(args, attrs)


register_op("nn.hardmax", infer=_infer_hardmax, pattern=Pattern.OPAQUE, attrs_schema={"axis": attr("int", -1)},
            doc="1 at the first maximum along axis, 0 elsewhere")


def _infer_lp_norm(args, attrs):
    x = tensor(args[0])
    _float(x)
    norm_axis(attrs["axis"], x.ndim)
    if attrs["p"] not in (1, 2):
        raise ShapeError(f"p must be 1 or 2, got {attrs['p']}")
    return x


register_op("nn.lp_normalize", infer=_infer_lp_norm, pattern=Pattern.OPAQUE,
            attrs_schema={"axis": attr("int", -1), "p": attr("int", 2)}, doc="x / ||x||_p along axis")

# -- pooling ------------------------------------------------------------------------------------


def _pool_rule(n: int):
    def infer(args, attrs):
        blocked = attrs.get("blocked", False)
        x = tensor(args[0], "the data")
        if x.ndim != n + 2 + blocked:
            raise ShapeError(f"the data must have rank {n + 2 + blocked} (N, C{'/b' if blocked else ''} and {n} "
                             f"spatial{', b' if blocked else ''}), got {x}")
        if dt.is_bool(x.dtype):
            raise DTypeError(f"the data must be numeric, got {x.dtype}")
        k = attrs["pool_size"]
        if len(k) != n or any(isinstance(v, int) and v < 1 for v in k):
            raise ShapeError(f"pool_size must be {n} values >= 1, got {k}")
        window = _window(x.shape[2:2 + n], k, attrs, n, attrs["ceil_mode"])
        return TensorType(x.shape[:2] + window + x.shape[2 + n:], x.dtype)

    return infer


def _global_pool_rule(n: int):
    def infer(args, attrs):
        x = _data(args[0], n)
        return TensorType(x.shape[:2] + (1,) * n, x.dtype)

    return infer


_POOL = {**_SIZED_WINDOW, "pool_size": attr("dims"), "ceil_mode": attr("bool", False)}
_BLOCKED = {"blocked": attr("bool", False)}  # data in the blocked channel layout N C/b <spatial> b
for _n, _s in _NDIM_NAME.items():
    register_op(f"nn.max_pool{_s}", infer=_pool_rule(_n), pattern=Pattern.OUT_ELEMWISE_FUSABLE,
                attrs_schema={**_POOL, **_BLOCKED}, doc="max over each window; padding never wins")
    register_op(f"nn.avg_pool{_s}", infer=_pool_rule(_n), pattern=Pattern.OUT_ELEMWISE_FUSABLE,
                attrs_schema={**_POOL, **_BLOCKED, "count_include_pad": attr("bool", False)},
                doc="mean over each window; count_include_pad: divide by the full window size")
    register_op(f"nn.lp_pool{_s}", infer=_pool_rule(_n), pattern=Pattern.OUT_ELEMWISE_FUSABLE,
                attrs_schema={**_POOL, "p": attr("int", 2)}, doc="(sum |x|^p)^(1/p) over each window")
    register_op(f"nn.global_avg_pool{_s}", infer=_global_pool_rule(_n), pattern=Pattern.OUT_ELEMWISE_FUSABLE)
    register_op(f"nn.global_max_pool{_s}", infer=_global_pool_rule(_n), pattern=Pattern.OUT_ELEMWISE_FUSABLE)
