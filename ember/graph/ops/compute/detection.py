"""The kernels of the detection ops (:mod:`ember.graph.ops.detection`), loop programs written
directly: ``roi_align`` and ``max_roi_pool`` (below), and ``nms_select``, ONNX's greedy
non-maximum suppression, one task per (batch, class), the tasks in parallel.

Each task keeps a flag per box, set where the box may still be kept (its score above the
threshold, when there is one). Then, up to ``K`` times: the flagged box of the highest score
(the lowest index among equal scores, as ONNX's reference sorts them) is kept and written
out, its flag cleared, and so is every flagged box that overlaps it by more than the IoU
threshold (the reference's test, float32, term for term: an empty intersection, a box of no
area or a union of none suppresses nothing). Keeping the next-best box not suppressed by any
kept one is what the reference's walk down the sorted list does. Once no flag is left, the
rest of the row is -1 and no box is read again: ``2 N`` reads a kept box, not ``K N``.
"""
from __future__ import annotations

from ....loop import dtype as dt
from ....loop.expr import FloorDiv, FloorMod, IntImm, Load, Var, cast, eq, logical_and, max_, min_, ne, select
from ....loop.intrinsics import ceil, floor
from ....loop.intrinsics import round as round_
from ....loop.stmt import Allocate, Buffer, For, IfThenElse, LetStmt, PrimFunc, Store, seq
from ..registry import set_kernel
from .common import const_of
from .dynamic import _buffer, _size_params

INDEX = dt.INDEX
F32 = "float32"
# flags of up to this many boxes live on the task's stack; more on the heap
STACK_FLAGS = 1 << 16


def _corners(load, center: bool) -> tuple:
    """(x_min, x_max, y_min, y_max) of a box from its four numbers ``load(k)``."""
    a, b, c, d = (load(k) for k in range(4))
    if center:  # [x_center, y_center, width, height]
        hw, hh = c / const_of(2, F32), d / const_of(2, F32)
        return a - hw, a + hw, b - hh, b + hh
    # [y1, x1, y2, x2], any diagonal pair of corners
    return min_(b, d), max_(b, d), min_(a, c), max_(a, c)


def _suppresses(kept: tuple, other: tuple, iou):
    """Whether ``kept`` suppresses ``other`` (corners each): ONNX's test, all its cases."""
    kx0, kx1, ky0, ky1 = kept
    ox0, ox1, oy0, oy1 = other
    ix0, ix1, iy0, iy1 = max_(kx0, ox0), min_(kx1, ox1), max_(ky0, oy0), min_(ky1, oy1)
    inter = (ix1 - ix0) * (iy1 - iy0)
    area_k, area_o = (kx1 - kx0) * (ky1 - ky0), (ox1 - ox0) * (oy1 - oy0)
    union = area_k + area_o - inter
    zero = const_of(0, F32)
    return logical_and(ix1 > ix0, iy1 > iy0, inter > zero, area_k > zero, area_o > zero, union > zero,
                       inter / select(union > zero, union, const_of(1, F32)) > iou)


def _nms_select(attrs, param_types, out_type, name: str) -> PrimFunc:
    box_t, score_t, th_t, lim_t = param_types
    BOX, SC, TH, LIM = _buffer("p0", box_t), _buffer("p1", score_t), _buffer("p2", th_t), _buffer("p3", lim_t)
    OUT = _buffer("nms", out_type)
    C, N, K = SC.shape[1], SC.shape[2], OUT.shape[2]
    zero, one = IntImm(0, INDEX), IntImm(1, INDEX)
    bc, j, k = Var("bc"), Var("j"), Var("k")
    b, c = FloorDiv(bc, C), FloorMod(bc, C)
    n_static = N.value if isinstance(N, IntImm) else None
    flags = Buffer("alive", (N,), "int32",
                   scope="local" if n_static is None or n_static <= STACK_FLAGS else "global")
    best = Buffer("best", (one,), INDEX, scope="local")  # the box found so far, -1 for none
    best_score = Buffer("best_score", (one,), F32, scope="local")
    done = Buffer("done", (one,), "int32", scope="local")
    kept = Buffer("kept", (IntImm(4, INDEX),), F32, scope="local")  # the kept box's corners
    i32 = lambda v: IntImm(v, "int32")  # noqa: E731

    def score(i):
        return cast(F32, Load(SC, (b, c, i)))

    def corners(i):
        return _corners(lambda q: cast(F32, Load(BOX, (b, i, IntImm(q, INDEX)))), bool(attrs["center_point_box"]))

    alive = Load(flags, (j,))
    start = score(j) > Load(TH, (one,)) if attrs["score_threshold"] else None
    init = Store(flags, i32(1) if start is None else cast("int32", start), (j,))
    here = Load(best, (zero,))
    # the flagged box of the highest score; '>' keeps the first of equal scores
    better = logical_and(ne(alive, i32(0)), (here < zero) | (score(j) > Load(best_score, (zero,))))
    find = seq(Store(best, IntImm(-1, INDEX), (zero,)), Store(best_score, const_of(0, F32), (zero,)),
               For(j, zero, N, "serial", IfThenElse(better, seq(Store(best, cast(INDEX, j), (zero,)),
                                                                 Store(best_score, score(j), (zero,))))))
    held = tuple(Load(kept, (IntImm(q, INDEX),)) for q in range(4))
    suppress = For(j, zero, N, "serial", IfThenElse(
        logical_and(ne(alive, i32(0)), _suppresses(held, corners(j), Load(TH, (zero,)))),
        Store(flags, i32(0), (j,))))
    keep = seq(Store(OUT, here, (b, c, k)), Store(flags, i32(0), (here,)),
               *[Store(kept, v, (IntImm(q, INDEX),)) for q, v in enumerate(corners(here))], suppress)
    is_done = ne(Load(done, (zero,)), i32(0))
    step = IfThenElse(logical_and(eq(Load(done, (zero,)), i32(0)), k < Load(LIM, (zero,))),
                      seq(find, IfThenElse(here >= zero, keep, Store(done, i32(1), (zero,)))))
    step = seq(step, IfThenElse(is_done | (k >= Load(LIM, (zero,))), Store(OUT, IntImm(-1, INDEX), (b, c, k))))
    task = seq(For(j, zero, N, "serial", init), Store(done, i32(0), (zero,)), For(k, zero, K, "serial", step))
    for buf in (kept, done, best_score, best, flags):
        task = Allocate(buf, task)
    body = For(bc, zero, SC.shape[0] * C, "parallel", task)
    bufs = (BOX, SC, TH, LIM, OUT)
    return PrimFunc(name, bufs + _size_params(bufs), body)


set_kernel("nms_select", _nms_select)


def _f(v):
    return const_of(v, F32)


def _task_values(name: str, values, dtype: str) -> tuple:
    """(buffer, its stores, its loads): values a task computes once and reads in its loops."""
    buf = Buffer(name, (IntImm(len(values), INDEX),), dtype, scope="local")
    stores = seq(*[Store(buf, v, (IntImm(q, INDEX),)) for q, v in enumerate(values)])
    return buf, stores, tuple(Load(buf, (IntImm(q, INDEX),)) for q in range(len(values)))


def _per_roi_bins(name: str, bufs: tuple, loops: tuple, sizes: tuple, setup, cell, scratch) -> PrimFunc:
    """The RoI kernels' nest: RoIs in parallel, each its ``setup`` then, per channel and bin,
    ``cell``; ``loops`` the (roi, channel, bin row, bin column) variables, ``sizes`` their
    extents, ``scratch`` the task's local buffers."""
    zero = IntImm(0, INDEX)
    r, c, ph, pw = loops
    rois, channels, rows, cols = sizes
    body = For(c, zero, channels, "serial", For(ph, zero, IntImm(rows, INDEX), "serial",
                                                For(pw, zero, IntImm(cols, INDEX), "serial", cell)))
    task = seq(setup, body)
    for buf in scratch:
        task = Allocate(buf, task)
    return PrimFunc(name, bufs + _size_params(bufs), For(r, zero, rois, "parallel", task))


def _roi_align(attrs, param_types, out_type, name: str) -> PrimFunc:
    """ONNX's RoiAlign, as its reference computes it: per RoI (in parallel) its start, bin
    sizes and samples a side (``sampling_ratio``, or per RoI ceil(bin size)); per channel and
    bin the samples' bilinear values (a sample past the features' border by more than one
    contributes 0; one within is clamped to the edge) averaged, or their largest weighted
    corner (``max``)."""
    x_t, r_t, i_t = param_types
    X, R, BI = _buffer("p0", x_t), _buffer("p1", r_t), _buffer("p2", i_t)
    OUT = _buffer("roi_align", out_type)
    C, H, W = X.shape[1], X.shape[2], X.shape[3]
    PH, PW = int(attrs["output_height"]), int(attrs["output_width"])
    zero, one, f = IntImm(0, INDEX), IntImm(1, INDEX), _f
    r, c, ph, pw, iy, ix = (Var(n) for n in ("r", "c", "ph", "pw", "iy", "ix"))
    acc = Buffer("acc", (one,), F32, scope="local")
    off = f(0.5 if attrs["half_pixel"] else 0.0)
    scale = f(attrs["spatial_scale"])
    corner = [cast(F32, Load(R, (r, IntImm(q, INDEX)))) * scale - off for q in range(4)]
    roi_w, roi_h = corner[2] - corner[0], corner[3] - corner[1]
    if not attrs["half_pixel"]:  # malformed RoIs count as 1x1
        roi_w, roi_h = max_(roi_w, f(1)), max_(roi_h, f(1))
    bin_w, bin_h = roi_w / f(PW), roi_h / f(PH)
    ratio = int(attrs["sampling_ratio"])

    def grid(size):
        return f(ratio) if ratio > 0 else cast(F32, cast(INDEX, ceil(size)))
    box, setup, (sw, sh, bw, bh, gw, gh) = _task_values(
        "box", (corner[0], corner[1], bin_w, bin_h, grid(bin_w), grid(bin_h)), F32)
    b = Load(BI, (r,))
    y = sh + cast(F32, ph) * bh + (cast(F32, iy) + f(0.5)) * bh / gh
    x = sw + cast(F32, pw) * bw + (cast(F32, ix) + f(0.5)) * bw / gw
    yv, xv = Var("y", F32), Var("x", F32)
    outside = (yv < f(-1)) | (yv > cast(F32, H)) | (xv < f(-1)) | (xv > cast(F32, W))
    yc, xc = max_(yv, f(0)), max_(xv, f(0))
    ylo0, xlo0 = cast(INDEX, yc), cast(INDEX, xc)  # (truncation: they are not negative)
    y_edge, x_edge = ylo0 >= H - 1, xlo0 >= W - 1
    ylo, xlo = select(y_edge, H - 1, ylo0), select(x_edge, W - 1, xlo0)
    yhi, xhi = select(y_edge, H - 1, ylo0 + 1), select(x_edge, W - 1, xlo0 + 1)
    ly = select(y_edge, f(0), yc - cast(F32, ylo0))
    lx = select(x_edge, f(0), xc - cast(F32, xlo0))
    hy, hx = f(1) - ly, f(1) - lx

    def at(yy, xx):
        return cast(F32, Load(X, (b, c, yy, xx)))
    terms = [hy * hx * at(ylo, xlo), hy * lx * at(ylo, xhi), ly * hx * at(yhi, xlo), ly * lx * at(yhi, xhi)]
    here = Load(acc, (zero,))
    if attrs["mode"] == "max":
        v = max_(max_(terms[0], terms[1]), max_(terms[2], terms[3]))
        v = select(outside, f(0), v)
        first = logical_and(eq(iy, zero), eq(ix, zero))
        update = Store(acc, select(first, v, max_(here, v)), (zero,))
        finish = here
    else:
        update = Store(acc, here + select(outside, f(0), terms[0] + terms[1] + terms[2] + terms[3]), (zero,))
        finish = here / max_(gh * gw, f(1))
    sample = LetStmt(yv, y, LetStmt(xv, x, update))
    samples = For(iy, zero, cast(INDEX, gh), "serial", For(ix, zero, cast(INDEX, gw), "serial", sample))
    cell = seq(Store(acc, f(0), (zero,)), samples, Store(OUT, cast(out_type.dtype, finish), (r, c, ph, pw)))
    return _per_roi_bins(name, (X, R, BI, OUT), (r, c, ph, pw), (R.shape[0], C, PH, PW), setup, cell, (acc, box))


def _max_roi_pool(attrs, param_types, out_type, name: str) -> PrimFunc:
    """ONNX's MaxRoiPool (Caffe's RoI pooling): per RoI (in parallel) its corners scaled and
    rounded, its bins of ``size / pooled`` pixels, each bin's pixels (floor of its start to ceil
    of its end, clipped to the features) maxed; an empty bin is 0."""
    x_t, r_t = param_types
    X, R = _buffer("p0", x_t), _buffer("p1", r_t)
    OUT = _buffer("max_roi_pool", out_type)
    C, H, W = X.shape[1], X.shape[2], X.shape[3]
    PH, PW = int(attrs["pooled_height"]), int(attrs["pooled_width"])
    zero, one, f = IntImm(0, INDEX), IntImm(1, INDEX), _f
    r, c, ph, pw, h, w = (Var(n) for n in ("r", "c", "ph", "pw", "h", "w"))
    scale = f(attrs["spatial_scale"])
    roi = [cast(F32, Load(R, (r, IntImm(q, INDEX)))) for q in range(5)]
    b = cast(INDEX, roi[0])
    x1, y1, x2, y2 = (cast(INDEX, round_(v * scale)) for v in roi[1:])
    box, setup, (sw, sh, rw, rh) = _task_values("box", (x1, y1, max_(x2 - x1 + 1, one), max_(y2 - y1 + 1, one)),
                                                INDEX)
    bh, bw = cast(F32, rh) / f(PH), cast(F32, rw) / f(PW)

    def span(p, bin_size, start, limit):
        lo = cast(INDEX, floor(cast(F32, p) * bin_size)) + start
        hi = cast(INDEX, ceil(cast(F32, p + 1) * bin_size)) + start
        return min_(max_(lo, zero), limit), min_(max_(hi, zero), limit)
    hs, he = span(ph, bh, sh, H)
    ws, we = span(pw, bw, sw, W)
    acc = Buffer("acc", (one,), F32, scope="local")
    seen = Buffer("seen", (one,), "int32", scope="local")
    v = cast(F32, Load(X, (b, c, h + hs, w + ws)))
    here = Load(acc, (zero,))
    first = eq(Load(seen, (zero,)), IntImm(0, "int32"))
    update = seq(Store(acc, select(first, v, max_(here, v)), (zero,)), Store(seen, IntImm(1, "int32"), (zero,)))
    pixels = For(h, zero, max_(he - hs, zero), "serial", For(w, zero, max_(we - ws, zero), "serial", update))
    cell = seq(Store(acc, f(0), (zero,)), Store(seen, IntImm(0, "int32"), (zero,)), pixels,
               Store(OUT, cast(out_type.dtype, here), (r, c, ph, pw)))
    return _per_roi_bins(name, (X, R, OUT), (r, c, ph, pw), (R.shape[0], C, PH, PW), setup, cell, (seen, acc, box))


set_kernel("roi_align", _roi_align)
set_kernel("max_roi_pool", _max_roi_pool)
