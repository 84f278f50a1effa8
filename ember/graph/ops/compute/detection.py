"""The kernel of ``nms_select`` (:mod:`ember.graph.ops.detection`): ONNX's greedy
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
from ....loop.stmt import Allocate, Buffer, For, IfThenElse, PrimFunc, Store, seq
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
