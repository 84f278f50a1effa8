"""The compute of resize, which resamples (ONNX's Resize: nearest, linear and cubic modes,
every coordinate transformation mode, an n-D output as the product of its axes' taps).

Like the layout computes (:mod:`.layout`) it is one injective stage, but each output element
is a weighted sum of source elements: the index arithmetic here is in float64 coordinates.
"""
from __future__ import annotations

import itertools
import math
from typing import Optional

import numpy as np

from ....errors import DTypeError, ShapeError, UnsupportedOpError
from ....loop import compute as te
from ....loop import dtype as dt
from ....loop import intrinsics as intr
from ....loop.arith import simplify
from ....loop.expr import Expr, IntImm, as_expr, cast, const, eq, max_, min_, select
from .common import const_of, index_dims, out_stage, register_compute, stage_name, static_size

INDEX = dt.INDEX


# -- resize -------------------------------------------------------------------------------------
#
# Each resized axis maps its output index to a source coordinate (ONNX's coordinate
# transformation modes), then to taps: one index for nearest, two (linear) or four (cubic)
# weighted indices, clamped into the axis (ONNX pads the edge). An n-D output element is the
# weighted sum over the product of the axes' taps. Coordinates and weights are float64 and
# written op for op as ONNX's reference implementation does, so nearest's ties round the same;
# the sum is float32 (float64 for float64 and integer tensors, which round and saturate).


def _f64(v) -> Expr:
    return const(float(v), "float64")


def _real(v) -> Expr:
    """A size or scale as a float64 expression (a constant where it is static)."""
    if not isinstance(v, Expr):
        return _f64(v)
    return v if v.dtype == "float64" else cast("float64", v)


def _source_coord(ctm: str, y: Expr, scale, n_in, n_out, roi: tuple):
    """The input coordinate of output index ``y``, and where it lies outside the input
    (``tf_crop_and_resize`` extrapolates there) or None. ``scale``, ``n_in`` and ``n_out`` are
    numbers, or expressions for an axis of symbolic size (:func:`_symbolic_coord`)."""
    yf = cast("float64", y)
    if any(isinstance(v, Expr) for v in (scale, n_in, n_out)):
        return _symbolic_coord(ctm, yf, scale, n_in, n_out), None
    # ONNX's output_width: fractional when it comes from a scale (the reference implementation
    # divides by it); a crop box spans the output's real length, as the spec and onnxruntime do
    # (our output length includes the box's extent, the reference's does not)
    width = n_out if ctm == "tf_crop_and_resize" else scale * n_in
    if ctm == "align_corners":
        return (_f64(0) if width == 1 else yf * _f64(n_in - 1) / _f64(width - 1)), None
    if ctm == "asymmetric":
        return yf / _f64(scale), None
    if ctm == "pytorch_half_pixel":
        return (_f64(-0.5) if width == 1 else (yf + _f64(0.5)) / _f64(scale) - _f64(0.5)), None
    if ctm == "half_pixel":
        return (yf + _f64(0.5)) / _f64(scale) - _f64(0.5), None
    if ctm == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)  # centres the output on the input
        return _f64(offset) + (yf + _f64(0.5)) / _f64(scale) - _f64(0.5), None
    if ctm == "tf_crop_and_resize":
        r0, r1 = roi
        if width == 1:
            x = _f64((r1 - r0) * (n_in - 1) / 2)
        else:
            x = yf * _f64(r1 - r0) * _f64(n_in - 1) / _f64(width - 1)
        x = x + _f64(r0 * (n_in - 1))
        return x, (x < _f64(0)) | (x > _f64(n_in - 1))
    raise UnsupportedOpError(f"resize: coordinate_transformation_mode {ctm!r} is not supported")


def _symbolic_coord(ctm: str, yf: Expr, scale, n_in, n_out) -> Expr:
    """:func:`_source_coord` on an axis of symbolic size: the same formulas evaluated per run.
    ``scale`` is a number (the model's scale) or the expression ``n_out / n_in`` (its sizes),
    whose output width is then ``n_out`` itself."""
    s, ni, no = _real(scale), _real(n_in), _real(n_out)
    width = no if isinstance(scale, Expr) else s * ni
    single = eq(width, _f64(1))
    if ctm == "align_corners":
        return select(single, _f64(0), yf * (ni - _f64(1)) / (width - _f64(1)))
    if ctm == "asymmetric":
        return yf / s
    if ctm == "pytorch_half_pixel":
        return select(single, _f64(-0.5), (yf + _f64(0.5)) / s - _f64(0.5))
    if ctm == "half_pixel":
        return (yf + _f64(0.5)) / s - _f64(0.5)
    if ctm == "half_pixel_symmetric":
        offset = ni / _f64(2) * (_f64(1) - no / width)
        return offset + (yf + _f64(0.5)) / s - _f64(0.5)
    raise UnsupportedOpError(f"resize: coordinate_transformation_mode {ctm!r} needs static sizes on a "
                             f"resized axis")


def _nearest(x: Expr, mode: str) -> Expr:
    fl = intr.floor(x)
    i0, frac = cast(INDEX, fl), x - fl
    if mode == "floor":
        return i0
    if mode == "ceil":
        return cast(INDEX, intr.ceil(x))
    # a tie (frac == 0.5) goes down for round_prefer_floor, up for round_prefer_ceil
    down = frac <= _f64(0.5) if mode == "round_prefer_floor" else frac < _f64(0.5)
    return select(down, i0, i0 + 1)


def _cubic_weights(r: Expr, a: float) -> list:
    """Keys' cubic convolution weights of the taps at distances ``1 + r, r, 1 - r, 2 - r``."""
    s = _f64(1) - r
    return [(((r + 1.0) * a - 5 * a) * (r + 1.0) + 8 * a) * (r + 1.0) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1.0,
            ((a + 2) * s - (a + 3)) * s * s + 1.0,
            (((s + 1.0) * a - 5 * a) * (s + 1.0) + 8 * a) * (s + 1.0) - 4 * a]


def _taps(attrs, x: Expr, n_in: int) -> list:
    """``[(index, weight)]`` of one axis at coordinate ``x``; weight None for nearest."""
    method = attrs["method"]

    def clamp(i):  # ONNX pads the edge: a tap outside the axis reads its end element
        return min_(max_(i, 0), n_in - 1)

    if method == "nearest":
        return [(clamp(_nearest(x, attrs["nearest_mode"])), None)]
    fl = intr.floor(x)
    i0, r = cast(INDEX, fl), x - fl
    if method == "linear":
        idx, ws = [i0, i0 + 1], [_f64(1) - r, r]
    else:
        idx, ws = [i0 - 1, i0, i0 + 1, i0 + 2], _cubic_weights(r, attrs["cubic_coeff_a"])
    if attrs["exclude_outside"]:  # taps outside the input weigh nothing; the rest renormalize
        ws = [select((i >= 0) & (i < n_in), w, _f64(0)) for i, w in zip(idx, ws)]
        total = ws[0]
        for w in ws[1:]:
            total = total + w
        total = select(eq(total, _f64(0)), _f64(1), total)
        ws = [w / total for w in ws]
    return [(clamp(i), w) for i, w in zip(idx, ws)]


def _resize_plan(attrs, x: te.Tensor, shape: tuple) -> dict:
    """``{axis: (scale, n_in, n_out, roi)}`` for the axes resize changes (the others are
    copied, as ONNX's reference skips an axis of scale 1 and the same size)."""
    nd, scales, ctm = x.ndim, attrs["scales"], attrs["coordinate_transformation_mode"]
    roi = attrs["roi"] if ctm == "tf_crop_and_resize" and attrs["roi"] is not None \
        else (0.0,) * nd + (1.0,) * nd
    plan = {}
    for k in range(nd):
        box = (float(roi[k]), float(roi[k + nd]))
        same = x.shape[k] == shape[k] and math.isclose(box[0], 0.0) and math.isclose(box[1], 1.0) \
            and (scales is None or math.isclose(scales[k], 1.0))
        if same:
            continue
        n_in, n_out = static_size(x.shape[k]), static_size(shape[k])
        if n_in is None or n_out is None:
            # sizes known per run (the graph's shape rule assumed a non-empty input axis): the
            # coordinates are computed from them; a crop box needs static sizes
            if ctm == "tf_crop_and_resize":
                raise UnsupportedOpError(f"resize of axis {k} of {x}: tf_crop_and_resize needs static "
                                         f"sizes on a resized axis")
            n_in = x.shape[k] if n_in is None else n_in
            n_out = shape[k] if n_out is None else n_out
            scale = float(scales[k]) if scales is not None else _real(n_out) / _real(n_in)
            plan[k] = (scale, n_in, n_out, box)
            continue
        if n_in == 0 and n_out > 0:
            raise ShapeError(f"resize cannot fill axis {k} from an empty input axis")
        scale = float(scales[k]) if scales is not None else n_out / n_in
        plan[k] = (scale, n_in, n_out, box)
    return plan


def _accumulator(dtype: str) -> str:
    """The dtype a weighted sum of ``dtype`` elements is computed in."""
    if dt.is_bool(dtype):
        raise DTypeError("resize: linear and cubic interpolation need a numeric tensor, got bool")
    return "float64" if dtype == "float64" or dt.is_int(dtype) else "float32"


def _saturate(v: Expr, dtype: str) -> Expr:
    """The float ``v`` as ``dtype``: integers round half to even and saturate (as ONNX does)."""
    if dt.is_float(dtype):
        return cast(dtype, v)
    info = np.iinfo(dt.numpy_dtype(dtype))
    v = min_(max_(intr.round(v), _f64(info.min)), _f64(info.max))
    return cast(dtype, v)


def _extrapolation(value: float, dtype: str) -> Expr:
    if dt.is_int(dtype):
        info = np.iinfo(dt.numpy_dtype(dtype))
        return const(int(np.clip(np.round(value), info.min, info.max)), dtype)
    return const_of(value, dtype)


def _axis_tables(attrs, k: int, plan_k: tuple, acc, ctm: str) -> Optional[tuple]:
    """The taps of resized axis ``k`` as small stages computed once per call (``table``: the
    group keeps them at its root rather than inlining them): indices and, unless nearest,
    weights in ``acc``, both ``(taps, n_out)``. Each output element then reads them instead
    of recomputing its float64 coordinates, and a vector of outputs along the axis reads them
    contiguously (measured 2x on a 16x bilinear upsample)."""
    scale, n_in, n_out, box = plan_k
    if ctm == "tf_crop_and_resize":
        return None  # its out-of-box test needs the coordinate itself

    def taps(j):
        coord, _ = _source_coord(ctm, j, scale, n_in, n_out, box)
        return _taps(attrs, coord, n_in)
    count = len(taps(as_expr(0, INDEX)))
    name = stage_name("resize")
    # (taps, n_out): a vector of outputs along the axis reads its indices and weights contiguously
    idx = te.compute((count, n_out), lambda t, j: _pick([i for i, _ in taps(j)], t),
                     f"{name}_idx{k}", attrs={"table": True})
    if acc is None:
        return idx, None
    w = te.compute((count, n_out), lambda t, j: cast(acc, _pick([w for _, w in taps(j)], t)),
                   f"{name}_w{k}", attrs={"table": True})
    return idx, w


def _nearest_affine(attrs, plan_k: tuple, ctm: str):
    """``index(j)`` of a nearest resize's axis whose source index is ``j // s`` (an upsample by
    an integer factor: PyTorch's ``Upsample(scale_factor=2)``, ONNX's half-pixel default) or
    ``s j + b`` (a downsample by one), from its taps evaluated here for every ``j``; else None.
    In place of a table the index is then arithmetic the vectorizer sees through: a vector of
    ``j`` reads one contiguous window of the row, shuffled, not a gather (3x on 2x upsamples)."""
    scale, n_in, n_out, box = plan_k
    if attrs["method"] != "nearest" or ctm == "tf_crop_and_resize" or not all(
            isinstance(v, int) for v in (n_in, n_out)) or n_out < 2:
        return None
    def tap(j):
        coord, _ = _source_coord(ctm, as_expr(j, INDEX), scale, n_in, n_out, box)
        v = simplify(_taps(attrs, coord, n_in)[0][0])
        return v.value if isinstance(v, IntImm) else None
    s = n_out // n_in if n_out % n_in == 0 else 0
    start = tap(0)
    step = None if start is None else tap(1)
    if step is None:
        return None
    step -= start
    up, down = s > 0, step > 0  # the forms still possible, each checked at every j
    for j in range(n_out):
        v = tap(j)
        up, down = up and v == j // s, down and v == start + step * j
        if not (up or down):
            return None
    return (lambda j: j // s) if up else (lambda j: j * step + start)


def _pick(values: list, t: Expr) -> Expr:
    """``values[t]`` for a small constant list and an index expression."""
    v = values[-1]
    for i in range(len(values) - 2, -1, -1):
        v = select(eq(t, i), values[i], v)
    return v


def _separable(x: te.Tensor, plan: dict, tables: dict, acc: str, out_type) -> Optional[te.Tensor]:
    """Linear or cubic resize of several axes as one pass per axis, the innermost first: each
    pass a weighted sum of its input's taps along one axis, materialized (``materialize``: a
    stage the group keeps at its root, scheduled like an output), the last the result. The
    taps of every axis at once are a gather per tap combination for each output element (a
    bilinear upsample: four); by passes, the innermost axis's gathers run over the input's rows
    only, and the later passes blend whole rows (DeepLabV3's 8x upsample of 21 classes to
    256x256 ...). None where the passes do not apply (a crop box; one resized axis)."""
    if len(plan) < 2 or any(tables[k] is None for k in plan):
        return None
    order = sorted(plan, reverse=True)
    shape = list(x.shape)
    cur = x
    for n, k in enumerate(order):
        idx, w = tables[k]
        count = static_size(idx.shape[0])
        first, last = n == 0, n == len(order) - 1

        def body(*i, cur=cur, k=k, idx=idx, w=w, count=count, first=first, last=last):
            total = None
            for t in range(count):
                j = list(i)
                j[k] = idx[t, i[k]]
                v = cur[tuple(j)]
                v = (cast(acc, v) if first else v) * w[t, i[k]]
                total = v if total is None else total + v
            return _saturate(total, x.dtype) if last else total
        if last:
            return out_stage("resize", out_type, body)
        shape[k] = plan[k][2]
        cur = te.compute(tuple(shape), body, f"{stage_name('resize')}_axis{k}", attrs={"materialize": True})


def _resize(attrs, inputs, out_type):
    x = inputs[0]
    shape = index_dims(out_type)
    plan = _resize_plan(attrs, x, shape)
    ctm = attrs["coordinate_transformation_mode"]
    nearest = attrs["method"] == "nearest"
    acc = None if nearest else _accumulator(x.dtype)
    direct = {k: _nearest_affine(attrs, plan[k], ctm) for k in plan}
    tables = {k: _axis_tables(attrs, k, plan[k], acc, ctm) for k in plan if direct[k] is None}
    if not nearest:
        by_axis = _separable(x, plan, tables, acc, out_type)
        if by_axis is not None:
            return by_axis

    def body(*i):
        taps, outside = [], []
        for k in range(x.ndim):
            if k not in plan:
                taps.append([(i[k], None)])
                continue
            if direct[k] is not None:
                taps.append([(direct[k](i[k]), None)])
                continue
            if tables[k] is not None:
                idx, w = tables[k]
                count = static_size(idx.shape[0])
                taps.append([(idx[t, i[k]], None if w is None else w[t, i[k]]) for t in range(count)])
                continue
            scale, n_in, n_out, box = plan[k]
            coord, out_of_box = _source_coord(ctm, i[k], scale, n_in, n_out, box)
            taps.append([(ix, None if w is None else cast(acc, w)) for ix, w in _taps(attrs, coord, n_in)])
            if out_of_box is not None:
                outside.append(out_of_box)
        total = None
        for combo in itertools.product(*taps):
            v = x[tuple(idx for idx, _ in combo)]
            ws = [w for _, w in combo if w is not None]
            if ws:
                v = cast(acc, v)
                for w in ws:
                    v = v * w
            total = v if total is None else total + v
        if acc is not None:
            total = _saturate(total, x.dtype)
        if outside:
            hit = outside[0]
            for o in outside[1:]:
                hit = hit | o
            total = select(hit, _extrapolation(attrs["extrapolation_value"], x.dtype), total)
        return total

    return out_stage("resize", out_type, body)


register_compute("resize", _resize)
