"""Converters of ONNX layout, indexing and shape ops.

Many of these moved an attribute to an input over the opsets (Slice at 10, Pad at 11, TopK
at 10, Squeeze/Unsqueeze/Split at 13, ...). Such inputs decide the output shape, so they are
declared ``const_inputs`` and read with ``node.ints`` / ``node.dims`` at import time.
"""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...graph import Constant, Dim, TupleGetItem
from ...loop import dtype as dt
from .dtypes import to_ember
from .table import converter


def _tuple_outputs(node, call) -> list:
    return [TupleGetItem(call, i) for i in range(len(call.type.fields))]


# -- reshape family -----------------------------------------------------------------------------

@converter("Reshape", const_inputs=(1,))
def _reshape(node):
    return [node.call("reshape", node.input(0), newshape=node.dims(1, "shape"),
                      allowzero=bool(node.attr("allowzero", 0)))]


@converter("Flatten")
def _flatten(node):
    return [node.call("flatten", node.input(0), axis=node.attr("axis", 1))]


@converter("Transpose")
def _transpose(node):
    perm = node.attr("perm")
    return [node.call("transpose", node.input(0), axes=tuple(perm) if perm is not None else None)]


@converter("Squeeze")
def _squeeze_attr(node):
    axes = node.attr("axes")
    return [node.call("squeeze", node.input(0), axis=tuple(axes) if axes else None)]


@converter("Squeeze", since=13, const_inputs=(1,))
def _squeeze(node):
    axes = node.ints(1, "axes") if node.has(1) else None
    return [node.call("squeeze", node.input(0), axis=axes or None)]


@converter("Unsqueeze")
def _unsqueeze_attr(node):
    return [node.call("unsqueeze", node.input(0), axes=tuple(node.attr("axes")))]


@converter("Unsqueeze", since=13, const_inputs=(1,))
def _unsqueeze(node):
    return [node.call("unsqueeze", node.input(0), axes=node.ints(1, "axes"))]


@converter("Expand", const_inputs=(1,))
def _expand(node):
    return [node.call("expand", node.input(0), shape=node.dims(1, "shape"))]


@converter("Tile", const_inputs=(1,))
def _tile(node):
    return [node.call("tile", node.input(0), reps=node.dims(1, "repeats"))]  # (sizes from values allowed)


@converter("DepthToSpace")
def _depth_to_space(node):
    return [node.call("depth_to_space", node.input(0), block_size=node.attr("blocksize"),
                      mode=node.attr("mode", "DCR"))]


@converter("SpaceToDepth")
def _space_to_depth(node):
    return [node.call("space_to_depth", node.input(0), block_size=node.attr("blocksize"),
                      mode=node.attr("mode", "DCR"))]


# -- concat, split, slice, pad --------------------------------------------------------------------

@converter("Concat")
def _concat(node):
    return [node.call("concat", *[node.input(i) for i in range(len(node.inputs)) if node.has(i)],
                      axis=node.attr("axis"))]


def _split(sizes_from_input: bool):
    def convert(node):
        sizes = None
        if sizes_from_input and node.has(1):
            sizes = node.dims(1, "split sizes")  # (sizes from values allowed)
        elif not sizes_from_input and node.attr("split"):
            sizes = tuple(node.attr("split"))
        num = None if sizes else node.attr("num_outputs", node.num_outputs)
        call = node.call("split", node.input(0), axis=node.attr("axis", 0), sizes=sizes, num_outputs=num)
        return _tuple_outputs(node, call)
    return convert


converter("Split")(_split(False))
converter("Split", since=13, const_inputs=(1,))(_split(True))


@converter("Slice")
def _slice_attrs(node):
    starts, ends = tuple(node.attr("starts")), tuple(node.attr("ends"))
    axes = node.attr("axes")
    return [node.call("strided_slice", node.input(0), begin=starts, end=ends,
                      axes=tuple(axes) if axes is not None else None)]


@converter("Slice", since=10, const_inputs=(1, 2, 3, 4))
def _slice(node):
    begin, end = node.dims(1, "starts"), node.dims(2, "ends")  # a bound may be a symbolic size
    axes = node.ints(3, "axes") if node.has(3) else None
    steps = node.ints(4, "steps") if node.has(4) else None
    return [node.call("strided_slice", node.input(0), begin=begin, end=end, axes=axes, strides=steps)]


def _full_pads(nd: int, pads, axes) -> tuple:
    """Pads for every axis from pads for ``axes`` only (opset 18: the others get none)."""
    if axes is None:
        return tuple(pads)
    full = [0] * (2 * nd)
    k = len(axes)
    for j, a in enumerate(axes):
        a %= nd
        full[a], full[a + nd] = pads[j], pads[j + k]
    return tuple(full)


def _pad_call(node, pads, value, axes=None):
    x = node.input(0)
    pads = _full_pads(x.type.ndim, pads, axes)
    mode = node.attr("mode", "constant")
    if isinstance(value, np.generic):
        value = value.item()
    return [node.call("pad", x, pad_width=tuple(pads), mode=mode, pad_value=value)]


def _check_pad(attrs, opset, proto):
    mode = attrs.get("mode", "constant")
    return None if mode in ("constant", "reflect", "edge", "wrap") else f"pad mode {mode!r} is not supported"


@converter("Pad", check=_check_pad)
def _pad_attrs(node):
    return _pad_call(node, tuple(node.attr("pads")), float(node.attr("value", 0.0)))


@converter("Pad", since=11, const_inputs=(1, 2, 3), check=_check_pad)
def _pad(node):
    pads = node.dims(1, "pads")  # (sizes from values allowed)
    if node.has(2) and node.value(2) is None:  # the pad value from an input: read while running
        x = node.input(0)
        v = node.call("cast", node.call("reshape", node.input(2), newshape=(1,)), dtype=x.type.dtype)
        axes = node.ints(3, "axes") if node.has(3) else None
        return [node.call("pad", x, v, pad_width=tuple(_full_pads(x.type.ndim, pads, axes)),
                          mode=node.attr("mode", "constant"))]
    value = node.scalar(2, "constant value") if node.has(2) else 0
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = float(value)
    axes = node.ints(3, "axes") if node.has(3) else None
    return _pad_call(node, pads, value, axes)


@converter("CenterCropPad", since=18, const_inputs=(1,))
def _center_crop_pad(node):
    """Each listed axis cropped or zero-padded to its target size about its center (the odd
    element on the end side): one pad whose negative widths crop."""
    x = node.input(0)
    nd = x.type.ndim
    target = node.ints(1, "shape")
    axes = [a % nd for a in (node.attr("axes") or range(nd))]
    if len(axes) != len(target):
        raise ShapeError(f"shape {target} gives {len(target)} sizes for {len(axes)} axes")
    begin, end = [0] * nd, [0] * nd
    for a, want in zip(axes, target):
        have = x.type.shape[a]
        if not isinstance(have, int):
            raise ShapeError(f"axis {a} of {x.type} must have a static size to crop or pad to {want}")
        d = want - have  # > 0: pad, < 0: crop; the begin side gets the smaller half either way
        begin[a] = d // 2 if d >= 0 else -((-d) // 2)
        end[a] = d - begin[a]
    return [node.call("pad", x, pad_width=tuple(begin + end), mode="constant", pad_value=0.0)]


# -- indexing -------------------------------------------------------------------------------------

@converter("Gather")
def _gather(node):
    return [node.call("gather", node.input(0), node.input(1), axis=node.attr("axis", 0))]


@converter("GatherElements")
def _gather_elements(node):
    return [node.call("gather_elements", node.input(0), node.input(1), axis=node.attr("axis", 0))]


@converter("GatherND")
def _gather_nd(node):
    return [node.call("gather_nd", node.input(0), node.input(1), batch_dims=node.attr("batch_dims", 0))]


@converter("ScatterElements", "Scatter")
def _scatter_elements(node):
    return [node.call("scatter_elements", node.input(0), node.input(1), node.input(2), axis=node.attr("axis", 0),
                      reduction=node.attr("reduction", "none"))]


@converter("ScatterND")
def _scatter_nd(node):
    return [node.call("scatter_nd", node.input(0), node.input(1), node.input(2),
                      reduction=node.attr("reduction", "none"))]


def _topk(k_from_input: bool):
    def convert(node):
        k = node.scalar(1, "k") if k_from_input else node.attr("k")  # (a data size when from an input)
        call = node.call("topk", node.input(0), k=k if isinstance(k, Dim) else int(k), axis=node.attr("axis", -1),
                         largest=bool(node.attr("largest", 1)), sorted=bool(node.attr("sorted", 1)))
        return _tuple_outputs(node, call)
    return convert


converter("TopK")(_topk(False))
converter("TopK", since=10, const_inputs=(1,))(_topk(True))


@converter("CumSum", const_inputs=(1,))
def _cumsum(node):
    return [node.call("cumsum", node.input(0), axis=node.int_scalar(1, "axis"),
                      exclusive=bool(node.attr("exclusive", 0)), reverse=bool(node.attr("reverse", 0)))]


@converter("Trilu", const_inputs=(1,))
def _trilu(node):
    upper = bool(node.attr("upper", 1))
    if node.has(1) and node.value(1) is None:  # k from an input's values: read while running
        k = node.call("cast", node.call("reshape", node.input(1), newshape=(1,)), dtype="int64")
        return [node.call("trilu", node.input(0), k, upper=upper)]
    k = node.int_scalar(1, "k") if node.has(1) else 0
    return [node.call("trilu", node.input(0), upper=upper, k=k)]


@converter("OneHot", const_inputs=(1, 2))
def _one_hot(node):
    depth = node.scalar(1, "depth", sizes_from_floats=True)  # (a size from a value allowed)
    dtype = node.type(2).dtype
    if node.value(2) is None:  # (off, on) from an input: read while running
        values = node.call("reshape", node.input(2), newshape=(2,))
        return [node.call("one_hot", node.input(0), values, depth=depth if isinstance(depth, Dim) else int(depth),
                          axis=node.attr("axis", -1), dtype=dtype)]
    values = node.const(2, "values").reshape(-1)
    return [node.call("one_hot", node.input(0), depth=depth if isinstance(depth, Dim) else int(depth),
                      axis=node.attr("axis", -1), off_value=values[0].item(), on_value=values[1].item(), dtype=dtype)]


# -- shapes and creation --------------------------------------------------------------------------

@converter("Shape")
def _shape(node):
    x = node.input(0)
    out = node.call("shape_of", x)
    start, end = node.attr("start", 0), node.attr("end", None)
    if start != 0 or end is not None:
        out = node.call("strided_slice", out, begin=(start,), end=(end if end is not None else x.type.ndim,))
    return [out]


@converter("Size")
def _size(node):
    return [node.call("size", node.input(0))]


@converter("ConstantOfShape", const_inputs=(0,))
def _constant_of_shape(node):
    value = node.attr("value")
    if value is None:
        value = np.zeros(1, np.float32)
    v = value.reshape(-1)[0].item()
    dtype = dt.from_numpy(value.dtype)
    if not isinstance(v, bool):
        v = float(v)
    return [node.call("constant_of_shape", shape=node.dims(0, "shape"), value=v, dtype=dtype)]


@converter("Range", const_inputs=(0, 1, 2))
def _range(node):
    if any(node.value(i) is None for i in range(3)):
        return [_range_at_run(node)]
    start, stop, step = (node.scalar(i, what) for i, what in enumerate(("start", "limit", "delta")))
    return [node.call("range", start=start, stop=stop, step=step, dtype=node.type(0).dtype)]


def _range_at_run(node):
    """A Range whose bounds come from inputs' values: its length ``max(ceil((limit - start) /
    delta), 0)`` is computed and bound as a data size, then ``start + i * delta``."""
    from .dynamic import bound_size

    dtype = node.type(0).dtype
    s, lim, d = (node.call("reshape", node.input(i), newshape=()) for i in range(3))
    f = [node.call("cast", v, dtype="float64") for v in (s, lim, d)]
    count = node.call("ceil", node.call("divide", node.call("subtract", f[1], f[0]), f[2]))
    count = node.call("cast", node.call("maximum", count, Constant(np.float64(0))), dtype="int64")
    count, size = bound_size(node, count)
    return node.call("range", s, d, count, start=0, stop=size, step=1, dtype=dtype)


def _check_constant(attrs, opset, proto):
    for key in ("sparse_value", "value_string", "value_strings"):
        if key in attrs:
            return f"a Constant with {key} is not supported"
    return None


@converter("Constant", check=_check_constant)
def _constant(node):
    a = node.attrs
    if "value" in a:
        v = a["value"]
    elif "value_float" in a:
        v = np.array(a["value_float"], np.float32)
    elif "value_floats" in a:
        v = np.array(a["value_floats"], np.float32)
    elif "value_int" in a:
        v = np.array(a["value_int"], np.int64)
    elif "value_ints" in a:
        v = np.array(a["value_ints"], np.int64)
    else:
        raise UnsupportedOpError(f"Constant with attributes {sorted(a)} is not supported")
    return [Constant.adopt(v)]  # decoded for this node alone: no second copy


# -- resize ---------------------------------------------------------------------------------------

def _check_resize(attrs, opset, proto):
    if attrs.get("antialias", 0):
        return "Resize with antialias=1 is not supported"
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic", "bilinear"):
        return f"Resize mode {mode!r} is not supported"
    return None


def _resize_call(node, scales, sizes, roi=None, **modes):
    x = node.input(0)
    mode = node.attr("mode", "nearest")
    method = "linear" if mode in ("linear", "bilinear") else mode
    return [node.call("resize", x, scales=scales, sizes=sizes, roi=roi, method=method, **modes)]


@converter("Upsample", check=_check_resize)
def _upsample_attr(node):
    return _resize_call(node, tuple(float(s) for s in node.attr("scales")), None,
                        coordinate_transformation_mode="asymmetric", nearest_mode="floor")


@converter("Upsample", since=9, const_inputs=(1,), check=_check_resize)
@converter("Resize", since=10, const_inputs=(1,), check=_check_resize)
def _resize10(node):
    scales = tuple(float(s) for s in node.const(1, "scales").reshape(-1))
    return _resize_call(node, scales, None, coordinate_transformation_mode="asymmetric", nearest_mode="floor")


@converter("Resize", since=11, const_inputs=(1, 2, 3), check=_check_resize)
def _resize(node):
    x = node.input(0)
    nd = x.type.ndim
    axes = node.attr("axes")
    axes = [a % nd for a in axes] if axes is not None else list(range(nd))
    scales = sizes = None
    if node.has(3) and node.const(3, "sizes").size:
        given = node.dims(3, "sizes")
        sizes = list(x.type.shape)
        for a, s in zip(axes, given):
            sizes[a] = s
        policy = node.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            ins = [x.type.shape[a] for a in axes]
            if not all(isinstance(d, int) for d in given):
                # (the sizes come from a model input's values: ember.compile compiles per value)
                from .context import StructureValueError

                raise StructureValueError(f"keep_aspect_ratio_policy {policy!r} needs the sizes as numbers; they "
                                          f"come from {node.input_names[3]!r} when the model runs", 3)
            if not all(isinstance(d, int) for d in ins):
                raise UnsupportedOpError(f"keep_aspect_ratio_policy {policy!r} needs static input sizes")
            ratios = [s / d for s, d in zip(given, ins)]
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            scales = [1.0] * nd
            for a in axes:
                scales[a] = scale
                sizes[a] = int(scale * x.type.shape[a] + 0.5)  # ONNX rounds half up here
            scales = tuple(scales)
        sizes = tuple(sizes)
    elif node.has(2) and node.const(2, "scales").size:
        given = [float(s) for s in node.const(2, "scales").reshape(-1)]
        full = [1.0] * nd
        for a, s in zip(axes, given):
            full[a] = s
        scales = tuple(full)
    else:
        raise ShapeError("Resize needs scales or sizes")
    ctm = node.attr("coordinate_transformation_mode", "half_pixel")
    roi = None
    if ctm == "tf_crop_and_resize" and node.has(1) and node.const(1, "roi").size:
        given = [float(r) for r in node.const(1, "roi").reshape(-1)]
        full = [0.0] * nd + [1.0] * nd
        k = len(axes)
        for j, a in enumerate(axes):
            full[a], full[a + nd] = given[j], given[j + k]
        roi = tuple(full)
    return _resize_call(node, scales, sizes, roi, coordinate_transformation_mode=ctm,
                        nearest_mode=node.attr("nearest_mode", "round_prefer_floor"),
                        cubic_coeff_a=node.attr("cubic_coeff_a", -0.75),
                        exclude_outside=bool(node.attr("exclude_outside", 0)),
                        extrapolation_value=node.attr("extrapolation_value", 0.0))



@converter("CumProd", const_inputs=(1,))
def _cumprod(node):
    return [node.call("cumprod", node.input(0), axis=node.int_scalar(1, "axis"),
                      exclusive=bool(node.attr("exclusive", 0)), reverse=bool(node.attr("reverse", 0)))]


@converter("EyeLike")
def _eye_like(node):
    t = node.type(0)
    dtype = to_ember(node.attr("dtype"), "EyeLike's dtype") if node.attr("dtype") is not None else t.dtype
    return [node.call("eye", shape=t.shape, k=node.attr("k", 0), dtype=dtype)]


@converter("ReverseSequence", since=10)
def _reverse_sequence(node):
    """Each batch entry's first ``sequence_lens[b]`` steps reversed, the rest as they are: a
    gather along the time axis by ``lens[b] - 1 - t`` where ``t < lens[b]``."""
    x, lens = node.input(0), node.input(1)
    nd = x.type.ndim
    b_ax, t_ax = node.attr("batch_axis", 1), node.attr("time_axis", 0)
    steps = x.type.shape[t_ax]
    t = node.call("reshape", node.call("range", start=0, stop=steps, step=1, dtype="int64"),
                  newshape=tuple(steps if k == t_ax else 1 for k in range(nd)))
    n = node.call("reshape", node.call("cast", lens, dtype="int64"),
                  newshape=tuple(x.type.shape[b_ax] if k == b_ax else 1 for k in range(nd)))
    rev = node.call("subtract", node.call("subtract", n, Constant(np.array(1, np.int64))), t)
    idx = node.call("where", node.call("less", t, n), rev, t)
    idx = node.call("expand", idx, shape=tuple(x.type.shape))
    return [node.call("gather_elements", x, idx, axis=t_ax)]
