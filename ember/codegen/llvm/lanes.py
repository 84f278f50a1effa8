"""What each lane of a vector access reads: the analysis behind ``memory``'s choice of a
vector load, a splat, a shuffled window, interleaved runs or a gather.

Pure functions of loop-IR index and predicate expressions (no LLVM): a lane's index as a
scalar base plus a constant per lane (``base_and_lanes``, ``lane_offsets``), the lanes'
constant values and truths, and the runs a load's lanes interleave with the predicate each
run holds (``interleaved``).
"""
from __future__ import annotations

from ...loop import dtype as dt
from ...loop.expr import (EQ, GE, GT, LE, LT, NE, Add, And, Broadcast, Cast, FloorDiv, FloorMod, IntImm, Mul, Or,
                          Ramp, Sub, cast, const)


def const_int(e):
    """The value of an integer expression made only of constants, else None."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Broadcast):
        return const_int(e.value)
    if isinstance(e, Cast) and dt.is_int(e.dtype) and dt.is_int(e.value.dtype):
        return const_int(e.value)  # index-sized values: widening keeps the value
    if isinstance(e, (Add, Sub, Mul)):
        a, b = const_int(e.a), const_int(e.b)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, Add) else a - b if isinstance(e, Sub) else a * b
    return None


def linear(e):
    """``(base, step)`` when vector index ``e`` is ``base + lane * step`` (base scalar, step an int).

    Recognizes what vectorization produces before (or without) simplification: ramps,
    broadcasts, and sums, differences and constant multiples of those.
    """
    if dt.lanes(e.dtype) == 1:
        return e, 0
    if isinstance(e, Ramp):
        step = const_int(e.stride)
        return None if step is None else (e.base, step)
    if isinstance(e, Broadcast):
        return e.value, 0
    if isinstance(e, Cast) and dt.is_int(e.dtype) and dt.is_int(e.value.dtype) \
            and dt.bits(e.dtype) >= dt.bits(e.value.dtype):
        inner = linear(e.value)
        return None if inner is None else (cast(dt.element(e.dtype), inner[0]), inner[1])
    if isinstance(e, (Add, Sub)):
        la, lb = linear(e.a), linear(e.b)
        if la is None or lb is None:
            return None
        base = type(e)(*same_dtype(la[0], lb[0]))
        return base, la[1] + lb[1] if isinstance(e, Add) else la[1] - lb[1]
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            c = const_int(y)
            lx = linear(x) if c is not None else None
            if lx is not None:
                return Mul(*same_dtype(lx[0], const(c, dt.element(y.dtype)))), lx[1] * c
    return None


_LANEWISE = {Add: lambda x, y: x + y, Sub: lambda x, y: x - y, Mul: lambda x, y: x * y,
             FloorDiv: lambda x, y: x // y, FloorMod: lambda x, y: x % y}


def lane_constants(e, lanes: int):
    """Each lane's value of the integer index ``e`` when all are constants, else None."""
    if isinstance(e, Ramp):
        base, step = const_int(e.base), const_int(e.stride)
        return None if base is None or step is None else tuple(base + k * step for k in range(lanes))
    c = const_int(e)
    if c is not None:
        return (c,) * lanes
    if isinstance(e, Cast) and dt.is_int(e.dtype) and dt.is_int(e.value.dtype):
        return lane_constants(e.value, lanes)
    fn = _LANEWISE.get(type(e))
    if fn is None:
        return None
    a, b = lane_constants(e.a, lanes), lane_constants(e.b, lanes)
    if a is None or b is None or (type(e) in (FloorDiv, FloorMod) and 0 in b):
        return None
    return tuple(fn(x, y) for x, y in zip(a, b))


def base_and_lanes(e, lanes: int):
    """``(base, offsets)`` when lane ``k`` of integer index ``e`` is ``base + offsets[k]``,
    ``base`` a scalar expression (None: zero) and the offsets constants; else None. (A nearest
    2x upsample reads ``8 i + [0, 0, 1, 1, ...]``.)"""
    offsets = lane_constants(e, lanes)
    if offsets is not None:
        return None, offsets
    if isinstance(e, Broadcast):
        return e.value, (0,) * lanes
    if isinstance(e, Ramp):
        step = const_int(e.stride)
        return None if step is None else (e.base, tuple(k * step for k in range(lanes)))
    if isinstance(e, Cast) and dt.is_int(e.dtype) and dt.is_int(e.value.dtype) \
            and dt.bits(e.dtype) >= dt.bits(e.value.dtype):
        inner = base_and_lanes(e.value, lanes)
        return None if inner is None or inner[0] is None else (cast(dt.element(e.dtype), inner[0]), inner[1])
    if isinstance(e, (Add, Sub)):
        a, b = base_and_lanes(e.a, lanes), base_and_lanes(e.b, lanes)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, Add) else -1
        if a[0] is None and b[0] is not None and sign < 0:
            return None  # (a base subtracted from constants: not a base plus constants)
        base = a[0] if b[0] is None else b[0] if a[0] is None else type(e)(*same_dtype(a[0], b[0]))
        return base, tuple(x + sign * y for x, y in zip(a[1], b[1]))
    return None


def shuffled_window(buf, indices, lanes: int):
    """``(row indices, start, mask, width)`` when lane ``k`` reads ``buf[row..., start +
    mask[k]]``: the outer indices the same for every lane and the innermost a base plus a
    constant per lane, all within one vector of the row -- else None. With a constant start
    the window is a whole vector inside the row; with a base known only at run time it is
    the ``width`` elements the lanes read, from their least offset (no read past them)."""
    *outer, last = indices
    if any(dt.lanes(i.dtype) > 1 and not isinstance(i, Broadcast) for i in outer):
        return None
    split = base_and_lanes(last, lanes)
    extent = const_int(buf.shape[-1]) if buf.shape else None
    if split is None or buf.strides is not None:
        return None
    base, offsets = split
    rows = [i.value if isinstance(i, Broadcast) else i for i in outer]
    if base is not None:
        low, width = min(offsets), max(offsets) - min(offsets) + 1
        if width > lanes or dt.is_bool(buf.dtype):
            return None
        return rows, base + low if low else base, [o - low for o in offsets], width
    if extent is None or extent < lanes:
        return None
    start = min(min(offsets), extent - lanes)
    if min(offsets) < 0 or max(offsets) >= start + lanes:
        return None
    return rows, IntImm(start), [o - start for o in offsets], lanes


def same_dtype(a, b):
    """Bring two scalar index expressions to one dtype (int64 when they differ)."""
    if a.dtype == b.dtype:
        return a, b
    return cast(dt.INDEX, a), cast(dt.INDEX, b)


def lane_layout(buffer, indices):
    """``(base_indices, step)``: lane ``k`` reads ``buffer[base_indices]`` plus ``k * step`` elements
    (flattened), or None when the lanes follow no constant step (a general gather)."""
    bases, step = [], 0
    for idx, stride in zip(indices, buffer.row_strides()):
        lin = linear(idx)
        if lin is None:
            return lane_layout_across(buffer, indices)
        bases.append(lin[0])
        if lin[1]:
            st = const_int(stride)
            if st is None:
                return None
            step += lin[1] * st
    return bases, step


def lane_layout_across(buffer, indices):
    """:func:`lane_layout` for lanes that step through several dimensions at once: a loop
    fused over ``w`` and a channel block ``c`` and vectorized reads ``[.., r // 16, r % 16]``
    for ``r = ramp(0, 1, 64)`` -- no index is linear in the lanes, but the flattened offset is
    (4 pixels of 16 channels: one 64-byte vector, where a gather took 64 loads; a quantized
    MobileNetV2's residual adds 4x faster). Each index a scalar base plus a constant per lane,
    the constant strides summing them to ``first + k * step``; ``first`` joins the innermost
    index (stride 1), so the flattened base is the same."""
    split = lane_offsets(buffer, indices)
    if split is None:
        return None
    bases, total = split
    step = total[1] - total[0] if len(total) > 1 else 0
    if any(t != total[0] + k * step for k, t in enumerate(total)):
        return None
    if total[0]:
        last = bases[-1]
        bases[-1] = last + const(total[0], dt.element(last.dtype))
    return bases, step


def lane_offsets(buffer, indices):
    """``(bases, offsets)``: lane ``k`` reads the element at flattened ``bases`` plus
    ``offsets[k]``, each index a scalar base plus a constant per lane (None otherwise)."""
    if buffer.strides is not None or not indices:
        return None
    lanes = max(dt.lanes(i.dtype) for i in indices)
    bases, total = [], [0] * lanes
    for idx, stride in zip(indices, buffer.row_strides()):
        if dt.lanes(idx.dtype) == 1:
            bases.append(idx)
            continue
        split = base_and_lanes(idx, lanes)
        st = const_int(stride)
        if split is None or st is None:
            return None
        base, offsets = split
        bases.append(base if base is not None else IntImm(0, dt.element(idx.dtype)))
        total = [t + o * st for t, o in zip(total, offsets)]
    return bases, total


_COMPARE = {LT: lambda x, y: x < y, LE: lambda x, y: x <= y, GT: lambda x, y: x > y, GE: lambda x, y: x >= y,
            EQ: lambda x, y: x == y, NE: lambda x, y: x != y}


def lane_truths(p, lanes: int):
    """Each lane's value of predicate ``p`` (None: all true) when all are constants, else None."""
    if p is None:
        return (True,) * lanes
    if isinstance(p, Broadcast):
        c = const_int(p.value)
        return None if c is None else (bool(c),) * lanes
    if type(p) in _COMPARE:
        a, b = lane_constants(p.a, lanes), lane_constants(p.b, lanes)
        return None if a is None or b is None else tuple(_COMPARE[type(p)](x, y) for x, y in zip(a, b))
    if isinstance(p, (And, Or)):
        a, b = lane_truths(p.a, lanes), lane_truths(p.b, lanes)
        if a is None or b is None:
            return None
        return tuple((x and y) if isinstance(p, And) else (x or y) for x, y in zip(a, b))
    return None


def run_predicates(p, lanes: int, groups: int):
    """Per run ``g`` of ``groups`` interleaved runs (lane ``k`` in run ``k % groups``), the
    scalar predicate that holds for each of the run's lanes, when ``p`` is the same within
    every run (True/False where constant; a scalar Expr otherwise) -- else None. (A packing's
    ``2 ko + t < K``: the last pair of an odd contraction, ``t`` a run.)"""
    truths = lane_truths(p, lanes)
    if truths is not None:
        if any(truths[k] != truths[k % groups] for k in range(lanes)):
            return None
        return [truths[g] for g in range(groups)]
    if isinstance(p, Broadcast):
        return [p.value] * groups
    if isinstance(p, (And, Or)):
        a, b = run_predicates(p.a, lanes, groups), run_predicates(p.b, lanes, groups)
        if a is None or b is None:
            return None
        both = []
        for x, y in zip(a, b):
            if isinstance(x, bool) or isinstance(y, bool):  # (a constant decides or drops out)
                c, other = (x, y) if isinstance(x, bool) else (y, x)
                both.append(other if c == isinstance(p, And) else c)
            else:
                both.append(type(p)(x, y))
        return both
    if type(p) not in _COMPARE:
        return None
    a, b = base_and_lanes(p.a, lanes), base_and_lanes(p.b, lanes)
    if a is None or b is None:
        return None
    (ba, oa), (bb, ob) = a, b
    gap = [y - x for x, y in zip(oa, ob)]  # (lane k holds when ba - bb op gap[k])
    if any(gap[k] != gap[k % groups] for k in range(lanes)):
        return None
    def at(base, off, dtype):  # (a side's scalar value in run g)
        return IntImm(off, dt.element(dtype)) if base is None else base + off
    return [type(p)(*same_dtype(at(ba, oa[g], p.a.dtype), at(bb, ob[g], p.b.dtype))) for g in range(groups)]


def interleaved(buf, indices, predicate, lanes: int):
    """``(bases, starts, predicates)`` when the lanes interleave ``G = len(starts)`` runs of
    consecutive elements: lane ``k`` reads flattened ``bases`` plus ``starts[k % G] + k // G``
    (a pixel's 4 bytes from 3 channel planes: a quantized stem's input packed into words; a
    packed dot's pairs from two rows), its predicate the same within a run (``predicates[g]``:
    True, or a scalar condition; starts None for a run the predicate turns off in every lane)
    -- else None. Then each run is one vector load (masked by its condition) and a shuffle
    interleaves them, where a gather took a load a lane."""
    split = lane_offsets(buf, indices)
    if split is None or dt.is_bool(buf.dtype):
        return None
    bases, total = split
    groups = 2
    while 2 * groups <= lanes and lanes % groups == 0:  # (runs of two lanes or more)
        if all(total[k] == total[k % groups] + k // groups for k in range(lanes)):
            preds = run_predicates(predicate, lanes, groups)
            if preds is None:
                return None
            starts = [None if c is False else total[g] for g, c in enumerate(preds)]
            return (bases, starts, preds) if any(x is not None for x in starts) else None
        groups *= 2
    return None
