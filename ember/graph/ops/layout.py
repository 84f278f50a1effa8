"""Layout ops: ops that move elements without computing new values.

reshape, flatten, transpose, squeeze, unsqueeze, expand, tile, concat, split, strided_slice,
pad, depth_to_space, space_to_depth, resize. (Indexing ops live in :mod:`.index`, ops that
create tensors from shapes in :mod:`.creation`.)

Shapes are attributes and may hold symbolic dims: ``reshape(x, newshape=(batch, -1))``. The
values follow ONNX: in ``newshape`` 0 copies the input's dimension (unless ``allowzero``) and
-1 is inferred; slices clamp out-of-range bounds; pads may be negative (crop).
"""
from __future__ import annotations

import fractions
import math

from ...errors import ShapeError
from ...loop import expr as E
from ..types import Dim, TensorType, TupleType
from . import dims as D
from .registry import Pattern, attr, norm_axis, register_op, same_dtype, tensor

INJ = Pattern.INJECTIVE

# -- reshape family -----------------------------------------------------------------------------


def _infer_reshape(args, attrs):
    x = tensor(args[0])
    new = list(attrs["newshape"])
    if sum(1 for d in new if d == -1) > 1:
        raise ShapeError(f"newshape {attrs['newshape']} has more than one -1")
    for i, d in enumerate(new):
        if isinstance(d, int) and d < -1:
            raise ShapeError(f"newshape {attrs['newshape']}: dimension {d} is invalid")
        if d == 0 and not attrs["allowzero"]:
            if i >= x.ndim:
                raise ShapeError(f"newshape {attrs['newshape']} copies dimension {i} (0) of {x}, which has none")
            new[i] = x.shape[i]
    total = D.prod(x.shape)
    if -1 in new:
        i = new.index(-1)
        known = D.prod(d for d in new if d != -1)
        q = D.dim_div_exact(total, known)
        if q is None:
            if isinstance(total, int) and isinstance(known, int):
                raise ShapeError(f"cannot reshape {x} ({total} elements) to {attrs['newshape']}: "
                                 f"{total} is not a multiple of {known}")
            D.assume_equal(D.dim_mod(total, known), 0, f"reshape of {x} to {attrs['newshape']}: {total} "
                                                          f"must be a multiple of {known}")
            q = D.dim_floordiv(total, known)
        new[i] = q
    elif isinstance(total, int) and all(isinstance(d, int) for d in new) and D.prod(new) != total:
        raise ShapeError(f"cannot reshape {x} ({total} elements) to {tuple(new)} ({D.prod(new)} elements)")
    elif D.prod(new) != total:
        D.assume_equal(D.prod(new), total, f"reshape of {x} to {tuple(new)}: the element counts "
                                           f"{D.prod(new)} and {total} must agree")
    return TensorType(tuple(new), x.dtype)


def _infer_bitcast(args, attrs):
    from ...loop import dtype as dt

    x = tensor(args[0])
    src, dst = dt.nbytes(x.dtype), dt.nbytes(attrs["dtype"])  # (bool: one byte, as stored)
    if src == dst:
        return TensorType(x.shape, attrs["dtype"])
    # another width: the last dim's bytes regrouped (numpy's view), static and whole
    last = x.shape[-1] if x.ndim else None
    if not isinstance(last, int) or (last * src) % dst:
        raise ShapeError(f"bitcast: {x} as {attrs['dtype']}: its last dim's bytes ({last} x {src}) must be a "
                         f"known multiple of {dst}, the width of {attrs['dtype']}")
    return TensorType(x.shape[:-1] + (last * src // dst,), attrs["dtype"])


# the same bytes read as another type: a view in the program, never a kernel (opaque: nothing
# fuses with it; ``ember.compiler.program.is_relabel``). A type of another width regroups the
# last dim's bytes: (M, K) bfloat16 as int32 is (M, K/2), two values a word (packed dots)
register_op("bitcast", infer=_infer_bitcast, pattern=Pattern.OPAQUE, attrs_schema={"dtype": attr("dtype")},
            doc="reinterpret the bits as dtype (another width: the last dim regrouped)")

register_op("reshape", infer=_infer_reshape, pattern=INJ,
            attrs_schema={"newshape": attr("dims"), "allowzero": attr("bool", False)})


def _infer_block_channels(args, attrs):
    x, b = tensor(args[0]), attrs["block"]
    if x.ndim < 2 or isinstance(b, int) and b < 1:
        raise ShapeError(f"block_channels: expects N C <spatial> and block={b} >= 1, got {x}")
    # (symbolic channels: only constant folding's shape-generic kernels block them; the
    # blocked layout of a model's region needs static channels, which block_layout checks)
    return TensorType((x.shape[0], D.dim_ceildiv(x.shape[1], b)) + x.shape[2:] + (b,), x.dtype)


def _infer_unblock_channels(args, attrs):
    x, c = tensor(args[0]), attrs["channels"]
    if x.ndim < 3 or not isinstance(x.shape[-1], int):
        raise ShapeError(f"unblock_channels: expects N C/b <spatial> b with a static block, got {x}")
    full = D.dim_mul(x.shape[1], x.shape[-1])
    if isinstance(c, int) and c:
        if not isinstance(full, int) or not full - x.shape[-1] < c <= full:
            raise ShapeError(f"unblock_channels: channels={c} must lie in the last block of {x}")
        full = c
    elif c:  # (a tier-0 kernel's: a size each call passes, checked against its data's)
        why = f"unblock_channels: channels={c} must lie in the last block of {x}"
        D.assume_le(c, full, why)
        D.assume_le(D.dim_sub(full, x.shape[-1] - 1), c, why)
        full = c
    return TensorType((x.shape[0], full) + x.shape[2:-1], x.dtype)


register_op("block_channels", infer=_infer_block_channels, pattern=INJ, attrs_schema={"block": attr("dim")},
            doc="N C <spatial> -> N ceil(C/block) <spatial> block (the blocked channel layout, NCHW[b]c); "
                "channels past C are zero")
register_op("unblock_channels", infer=_infer_unblock_channels, pattern=INJ,
            attrs_schema={"channels": attr("dim", 0)},
            doc="N C/b <spatial> b -> N C <spatial> (back from the blocked channel layout); channels=K keeps "
                "the first K (the last block padded)")


def _infer_flatten(args, attrs):
    x = tensor(args[0])
    axis = attrs["axis"]
    if not -x.ndim <= axis <= x.ndim:
        raise ShapeError(f"axis {axis} is out of range for rank {x.ndim}")
    if axis < 0:
        axis += x.ndim
    return TensorType((D.prod(x.shape[:axis]), D.prod(x.shape[axis:])), x.dtype)


register_op("flatten", infer=_infer_flatten, pattern=INJ, attrs_schema={"axis": attr("int", 1)},
            doc="2-D: dimensions before axis multiplied, and those from axis on")


def _infer_transpose(args, attrs):
    x = tensor(args[0])
    axes = attrs["axes"]
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    if (len(axes) != x.ndim or any(not -x.ndim <= a < x.ndim for a in axes)
            or sorted(a % x.ndim for a in axes) != list(range(x.ndim))):
        raise ShapeError(f"axes {axes} is not a permutation of the {x.ndim} axes of {x}")
    return TensorType(tuple(x.shape[a] for a in axes), x.dtype)


register_op("transpose", infer=_infer_transpose, pattern=INJ, attrs_schema={"axes": attr("ints", None)},
            doc="permute axes (None: reverse them)")


def _infer_squeeze(args, attrs):
    x = tensor(args[0])
    if attrs["axis"] is None:
        sym = [i for i, d in enumerate(x.shape) if not isinstance(d, int)]
        if sym:
            raise ShapeError(f"squeeze without axes cannot tell whether symbolic dimension(s) of {x} are 1")
        axes = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        axes = {norm_axis(a, x.ndim) for a in attrs["axis"]}
        for a in axes:
            if isinstance(x.shape[a], int) and x.shape[a] != 1:
                raise ShapeError(f"cannot squeeze axis {a} of {x}: its size is {x.shape[a]}, not 1")
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


register_op("squeeze", infer=_infer_squeeze, pattern=INJ, attrs_schema={"axis": attr("ints", None)},
            doc="drop size-1 axes (None: all of them)")


def _infer_unsqueeze(args, attrs):
    x = tensor(args[0])
    nout = x.ndim + len(attrs["axes"])
    axes = {norm_axis(a, nout) for a in attrs["axes"]}
    if len(axes) != len(attrs["axes"]):
        raise ShapeError(f"axes {attrs['axes']} names an axis twice")
    it = iter(x.shape)
    return TensorType(tuple(1 if i in axes else next(it) for i in range(nout)), x.dtype)


register_op("unsqueeze", infer=_infer_unsqueeze, pattern=INJ, attrs_schema={"axes": attr("ints")},
            doc="insert size-1 axes at the given positions of the output")


def _infer_expand(args, attrs):
    x = tensor(args[0])
    try:
        shape = D.broadcast_shapes(x.shape, attrs["shape"])
    except ShapeError as e:
        raise ShapeError(f"cannot expand {x} to {attrs['shape']}: {e}") from None
    return TensorType(shape, x.dtype)


register_op("expand", infer=_infer_expand, pattern=Pattern.BROADCAST, attrs_schema={"shape": attr("dims")},
            doc="broadcast x and shape against each other (ONNX Expand: either side may be 1)")


def _infer_tile(args, attrs):
    x = tensor(args[0])
    reps = attrs["reps"]
    if len(reps) != x.ndim or any(isinstance(r, int) and r < 0 for r in reps):
        raise ShapeError(f"reps {reps} must have one value >= 0 per axis of {x}")
    return TensorType(tuple(D.dim_mul(d, r) for d, r in zip(x.shape, reps)), x.dtype)


register_op("tile", infer=_infer_tile, pattern=INJ, attrs_schema={"reps": attr("dims")},
            doc="repeat x reps[k] times along each axis k (a rep may be a size from a value)")

# -- concat and split ---------------------------------------------------------------------------


def _infer_concat(args, attrs):
    ts = [tensor(a, f"input {i}") for i, a in enumerate(args)]
    dtype = same_dtype(ts)
    nd = ts[0].ndim
    if nd == 0 or any(t.ndim != nd for t in ts):
        raise ShapeError(f"inputs must have one rank >= 1, got {', '.join(map(str, ts))}")
    axis = norm_axis(attrs["axis"], nd)
    out = list(ts[0].shape)
    out[axis] = 0
    for t in ts:
        for i, d in enumerate(t.shape):
            if i == axis:
                out[i] = D.dim_add(out[i], d)
            elif d != out[i]:
                if isinstance(d, int) and isinstance(out[i], int):
                    raise ShapeError(f"inputs differ in dimension {i} (not the axis {axis}): "
                                     f"{', '.join(map(str, ts))}")
                out[i] = D.assume_equal(out[i], d, f"concat of {', '.join(map(str, ts))}: dimension {i} "
                                                   f"must agree")
    return TensorType(tuple(out), dtype)


register_op("concat", infer=_infer_concat, pattern=INJ, num_args=(1, None), attrs_schema={"axis": attr("int")})


def split_sizes(dim, sizes, num_outputs) -> list:
    """The sizes of the parts of ``dim``: explicit ``sizes``, or ``num_outputs`` parts of
    ``ceil(dim / n)`` with a smaller last one (ONNX 18)."""
    if sizes is not None:
        if any(isinstance(s, int) and s < 0 for s in sizes):
            raise ShapeError(f"split sizes must be >= 0, got {sizes}")
        total = 0
        for s in sizes:
            total = D.dim_add(total, s)
        if isinstance(dim, int) and isinstance(total, int):
            if total != dim:
                raise ShapeError(f"split sizes {sizes} sum to {total}, not the axis size {dim}")
        else:  # sizes from values: checked when the run binds them
            D.assume(D.E.eq(D.index(total), D.index(dim)), f"split sizes {sizes} must sum to the axis size {dim}")
        return list(sizes)
    n = num_outputs
    if n is None or n < 1:
        raise ShapeError("split needs sizes or num_outputs >= 1")
    if isinstance(dim, int):
        chunk = -(-dim // n)
        if chunk * (n - 1) > dim:
            raise ShapeError(f"cannot split {dim} into {n} parts")
        return [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    part = D.dim_div_exact(dim, n)
    if part is None:
        part = D.dim_ceildiv(dim, n)
        last = D.dim_sub(dim, D.dim_mul(part, n - 1)) if n > 1 else part
        return [part] * (n - 1) + [last]
    return [part] * n


def _infer_split(args, attrs):
    x = tensor(args[0])
    axis = norm_axis(attrs["axis"], x.ndim)
    parts = split_sizes(x.shape[axis], attrs["sizes"], attrs["num_outputs"])
    return TupleType([TensorType(x.shape[:axis] + (p,) + x.shape[axis + 1:], x.dtype) for p in parts])


register_op("split", infer=_infer_split, pattern=INJ,
            attrs_schema={"axis": attr("int", 0), "sizes": attr("dims", None), "num_outputs": attr("int", None)},
            doc="a tuple of parts along axis: explicit sizes, or num_outputs (near-)equal parts")

# -- slice and pad ------------------------------------------------------------------------------


HUGE = 1 << 30  # ONNX models spell "to the end" as INT_MAX / INT64_MAX


def slice_bounds(dim, begin, end, step: int) -> tuple:
    """``(start, length)`` of ``x[begin:end:step]`` on an axis of size ``dim`` (ONNX clamping).

    On an axis of symbolic size, a constant bound is clamped in the dims themselves:
    ``x[:, :512]`` on an axis of size ``L`` has ``min(512, L)`` elements, as in torch and ONNX
    (the truncations exporters write, which a run at ``L < 512`` must take). A bound computed
    from sizes (``L - 4``, or ``L`` on a buffer of 512 positions) is taken to lie inside the
    axis and not to be negative (a negative one counts from the end), and the assumptions are
    checked when a run binds the sizes: the dims then stay as the model wrote them (``L``, not
    ``min(L, 512)``, which would not match the other tensors of length ``L``)."""
    if step == 0:
        raise ShapeError("slice step must not be 0")
    if all(isinstance(v, int) for v in (dim, begin, end)):
        start, stop, st = slice(begin, end, step).indices(dim)
        return start, len(range(start, stop, st))
    back = step < 0  # from begin down to (not including) end
    # the range a bound is clamped to: [0, dim] forward; [-1, dim - 1] stepping back (the index
    # of the first element taken, or of one past the last)
    low, high = (-1, D.dim_sub(dim, 1)) if back else (0, dim)

    def bound(v, what):
        if isinstance(v, int) and v >= HUGE:
            return high
        if isinstance(v, int) and v <= -HUGE:
            return low
        if isinstance(v, int):
            return D.dim_max(D.dim_add(dim, v), low) if v < 0 else D.dim_min(v, high)
        if not back and D.dim_compare("<=", v, 0):
            # ``-L`` (TorchScript's ``x[:, -L:]``: T5's position bias) counts from the end, as a
            # negative number does; at L = 0 it is 0, which ONNX reads from the start: the same
            # place only on an empty axis, so a run checks that L > 0 or the axis is empty
            from_end = D.dim_add(dim, v)
            if from_end != 0:
                D.assume(E.Or(E.LT(D.index(v), E.IntImm(0, "int64")), E.EQ(D.index(dim), E.IntImm(0, "int64"))),
                         f"slice {what} {v} on the axis of size {dim} must be negative (from the end) "
                         f"or 0 on an empty axis")
            return D.dim_max(from_end, low)
        D.assume_le(D.dim_add(v, 1) if back else v, dim,
                    f"slice {what} {v} must not pass the end of the axis of size {dim}")
        # a bound computed from sizes (``L - 4``) that is negative at run time would count
        # from the end: a different slice than the one this rule gives, so a run refuses it
        D.assume_le(0, v, f"slice {what} {v} must not be negative on the axis of size {dim} "
                          f"(a negative bound computed from sizes is not supported)")
        return v

    b, e = bound(begin, "start"), bound(end, "end")
    lo, hi = (e, b) if back else (b, e)
    if isinstance(b, int) and isinstance(e, int):
        return b, max(0, -(-(hi - lo) // abs(step)))
    D.assume_le(lo, hi, f"slice [{begin}:{end}:{step}] of an axis of size {dim} must not be empty")
    return b, D.dim_ceildiv(D.dim_sub(hi, lo), abs(step))


def slice_len(dim, begin, end, step: int):
    """Elements of ``range(begin, end, step)`` on an axis of size ``dim`` (ONNX clamping)."""
    return slice_bounds(dim, begin, end, step)[1]


def _infer_strided_slice(args, attrs):
    x = tensor(args[0])
    begin, end = attrs["begin"], attrs["end"]
    axes = attrs["axes"] if attrs["axes"] is not None else tuple(range(len(begin)))
    strides = attrs["strides"] if attrs["strides"] is not None else (1,) * len(axes)
    if not len(begin) == len(end) == len(axes) == len(strides):
        raise ShapeError(f"begin {begin}, end {end}, axes {axes} and strides {strides} differ in length")
    if x.ndim == 0 and axes:
        raise ShapeError(f"cannot slice {x}: it has no axes")
    out = list(x.shape)
    seen = set()
    for b, e, a, s in zip(begin, end, axes, strides):
        a = norm_axis(a, x.ndim)
        if a in seen:
            raise ShapeError(f"axes {axes} names axis {a} twice")
        seen.add(a)
        out[a] = slice_len(x.shape[a], b, e, s)
    return TensorType(tuple(out), x.dtype)


register_op("strided_slice", infer=_infer_strided_slice, pattern=INJ,
            attrs_schema={"begin": attr("dims"), "end": attr("dims"), "axes": attr("ints", None),
                          "strides": attr("ints", None)},
            doc="x[begin:end:stride] on each listed axis, bounds clamped like Python slices")


def _infer_pad(args, attrs):
    x = tensor(args[0])
    pw = attrs["pad_width"]
    if len(pw) != 2 * x.ndim:
        raise ShapeError(f"pad_width {pw} must have {2 * x.ndim} values (begins, then ends) for {x}")
    if attrs["mode"] not in ("constant", "reflect", "edge", "wrap"):
        raise ShapeError(f"unknown pad mode {attrs['mode']!r}")
    if len(args) > 1:
        v = tensor(args[1], "the pad value")
        if v.shape != (1,) or v.dtype != x.dtype:
            raise ShapeError(f"the pad value must be a one-element {x.dtype} tensor, got {v}")
    out = []
    for i, d in enumerate(x.shape):
        n = D.dim_add(D.dim_add(d, pw[i]), pw[i + x.ndim])
        if isinstance(n, int) and n < 0:
            raise ShapeError(f"pad_width {pw} crops axis {i} of {x} below zero")
        out.append(n)
    return TensorType(tuple(out), x.dtype)


register_op("pad", infer=_infer_pad, pattern=INJ, num_args=(1, 2),
            attrs_schema={"pad_width": attr("dims"), "mode": attr("str", "constant"),
                          "pad_value": attr(("float", "bool"), 0.0)},
            doc="pad (negative: crop) each axis; pad_width is all begins then all ends (ONNX order); "
                "a pad may be a size from a value (>= 0); the pad value may be a one-element second "
                "argument, read while running")

# -- depth/space --------------------------------------------------------------------------------


def _nchw(args, what="the data"):
    x = tensor(args[0], what)
    if x.ndim != 4:
        raise ShapeError(f"{what} must be 4-D (N, C, H, W), got {x}")
    return x


def _infer_depth_to_space(args, attrs):
    x, b = _nchw(args), attrs["block_size"]
    if attrs["mode"] not in ("DCR", "CRD"):
        raise ShapeError(f"mode must be 'DCR' or 'CRD', got {attrs['mode']!r}")
    c = D.dim_div_exact(x.shape[1], b * b)
    if c is None:
        raise ShapeError(f"{x.shape[1]} channels are not divisible by block_size^2 = {b * b}")
    return TensorType((x.shape[0], c, D.dim_mul(x.shape[2], b), D.dim_mul(x.shape[3], b)), x.dtype)


def _infer_space_to_depth(args, attrs):
    x, b = _nchw(args), attrs["block_size"]
    if attrs["mode"] not in ("DCR", "CRD"):
        raise ShapeError(f"mode must be 'DCR' or 'CRD', got {attrs['mode']!r}")
    h, w = (D.dim_div_exact(x.shape[i], b) for i in (2, 3))
    if h is None or w is None:
        raise ShapeError(f"height and width of {x} must be divisible by block_size {b}")
    return TensorType((x.shape[0], D.dim_mul(x.shape[1], b * b), h, w), x.dtype)


register_op("depth_to_space", infer=_infer_depth_to_space, pattern=INJ,
            attrs_schema={"block_size": attr("int"), "mode": attr("str", "DCR")})
register_op("space_to_depth", infer=_infer_space_to_depth, pattern=INJ,
            attrs_schema={"block_size": attr("int"), "mode": attr("str", "DCR")})

# -- resize -------------------------------------------------------------------------------------

RESIZE_METHODS = ("nearest", "linear", "cubic")
RESIZE_COORDS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                 "asymmetric", "tf_crop_and_resize")
RESIZE_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _infer_resize(args, attrs):
    x = tensor(args[0])
    sizes, scales = attrs["sizes"], attrs["scales"]
    for key, allowed in (("method", RESIZE_METHODS), ("coordinate_transformation_mode", RESIZE_COORDS),
                         ("nearest_mode", RESIZE_NEAREST)):
        if attrs[key] not in allowed:
            raise ShapeError(f"{key} {attrs[key]!r} is not one of {', '.join(allowed)}")
    if scales is not None and len(scales) != x.ndim:
        raise ShapeError(f"scales {scales} must have one value per axis of {x}")
    if sizes is not None:
        if len(sizes) != x.ndim:
            raise ShapeError(f"sizes {sizes} must have one value per axis of {x}")
        _assume_filled(x.shape, sizes)
        return TensorType(sizes, x.dtype)
    if scales is None:
        raise ShapeError("resize needs sizes or scales")
    roi = attrs["roi"]
    if attrs["coordinate_transformation_mode"] != "tf_crop_and_resize" or roi is None:
        roi = (0.0,) * x.ndim + (1.0,) * x.ndim
    if len(roi) != 2 * x.ndim:
        raise ShapeError(f"roi {roi} must have {2 * x.ndim} values (starts, then ends)")
    out = []
    for i, (d, s) in enumerate(zip(x.shape, scales)):
        if s <= 0:
            raise ShapeError(f"scales {scales} must be > 0")
        s = s * (roi[i + x.ndim] - roi[i])  # a crop box scales the output too
        if isinstance(d, int):
            out.append(int(math.floor(d * s)))  # ONNX: floor(size * scale)
        elif float(s).is_integer():
            out.append(D.dim_mul(d, int(s)))
        else:  # floor(d * p / q) for the scale's exact fraction
            frac = fractions.Fraction(float(s))
            out.append(D.dim_floordiv(D.dim_mul(d, frac.numerator), frac.denominator))
    _assume_filled(x.shape, out)
    return TensorType(tuple(out), x.dtype)


def _assume_filled(shape_in, shape_out) -> None:
    """A resized axis of symbolic size reads its input: that axis is not empty where the
    output's is not (checked per run; a static one is checked by the compute)."""
    for i, (a, b) in enumerate(zip(shape_in, shape_out)):
        if a != b and not (isinstance(a, int) and isinstance(b, int)):
            D.assume((D.index(a) >= 1) | E.eq(D.index(b), 0),
                     f"resize cannot fill axis {i} of size {b} from an empty input axis ({a})")


register_op("resize", infer=_infer_resize, pattern=INJ,
            attrs_schema={"sizes": attr("dims", None), "scales": attr("floats", None),
                          "roi": attr("floats", None), "method": attr("str", "nearest"),
                          "coordinate_transformation_mode": attr("str", "half_pixel"),
                          "nearest_mode": attr("str", "round_prefer_floor"),
                          "cubic_coeff_a": attr("float", -0.75), "exclude_outside": attr("bool", False),
                          "extrapolation_value": attr("float", 0.0)},
            doc="resample every axis to sizes (or floor(size * scale)); ONNX Resize semantics")
