"""Elementwise ops with numpy broadcasting, and the default schedule of any injective stage."""
from __future__ import annotations

import math
from typing import Callable, Sequence

from ..errors import ShapeError
from ..loop import compute as te
from ..loop.expr import IntImm
from ..loop.schedule import Schedule
from ..loop.knobs import knob
from .common import const_int, host, parallel_outer, vectorize_inner, vector_lanes


def broadcast_shape(a: Sequence, b: Sequence) -> tuple:
    """numpy's broadcast of two static shapes."""
    out = []
    for x, y in zip(reversed([*([1] * (len(b) - len(a))), *a]), reversed([*([1] * (len(a) - len(b))), *b])):
        if x != y and 1 not in (x, y):
            raise ShapeError(f"shapes {tuple(a)} and {tuple(b)} do not broadcast (dims {x} vs {y})")
        out.append(max(x, y))
    return tuple(reversed(out))


def broadcast_index(t: te.Tensor, idx) -> tuple:
    """Index ``t`` (right-aligned, size-1 dims fixed at 0) with the output index ``idx``."""
    off = len(idx) - t.ndim
    return tuple(IntImm(0) if isinstance(s, IntImm) and s.value == 1 else idx[off + k]
                 for k, s in enumerate(t.shape))


def broadcast_compute(fn: Callable, a: te.Tensor, b: te.Tensor, name: str = "out") -> te.Tensor:
    shape = broadcast_shape([s.value for s in a.shape], [s.value for s in b.shape])
    return te.compute(shape, lambda *i: fn(a[broadcast_index(a, i)], b[broadcast_index(b, i)]), name)


def schedule_elementwise(s: Schedule, out: te.Tensor, target=None):
    """Flatten-free default: vectorize the innermost axis, run the outer axes in parallel."""
    st = s[out]
    axes = list(st.leaf)
    lanes = vector_lanes(target, out.dtype)
    if not axes:
        return
    # (tuner's decisions: vectors per inner step; parallel, or serial where a kernel is too
    # small to pay for waking the other cores)
    vectors = knob("ew.vectors", (1, 2, 4), 4 if len(axes) == 1 else 1)
    # an innermost axis of a few elements (an image's channels in a block of four: one word of
    # bytes, two of bfloat16s) would be a vector of that few: the next axis joins it
    # (MobileNetV2's quantized input blocked so: 77 -> 59 us; ResNet-50's bf16 stem input
    # 103 -> 25 us)
    last, nxt = const_int(axes[-1].extent), const_int(axes[-2].extent) if len(axes) > 1 else None
    if last is not None and nxt is not None and last * 4 <= lanes and last * nxt >= lanes:
        axes = axes[:-2] + [st.fuse(axes[-2], axes[-1])]
    outer, inner = vectorize_inner(st, axes[-1], lanes * vectors)
    par = axes[:-1] + ([outer] if outer is not None and len(axes) == 1 else [])
    if par and knob("ew.parallel", (True, False), True):
        parallel_outer(st, par)


def broadcast_binary(fn: Callable, shape_a: Sequence[int], shape_b: Sequence[int],
                     dtype: str = "float32", target=None):
    """``fn(A, B)`` with numpy broadcasting, e.g. ``broadcast_binary(operator.add, (64, 1), (64,))``."""
    target = host(target)
    A = te.placeholder(tuple(shape_a), dtype, "A")
    B = te.placeholder(tuple(shape_b), dtype, "B")
    C = broadcast_compute(fn, A, B, "C")
    s = Schedule(C)
    schedule_elementwise(s, C, target)
    return s, [A, B, C]


def schedule_root(s: Schedule, t: te.Tensor) -> None:
    """Generic schedule of a stage at the root: vectorized and parallel when elementwise; a
    reduction runs its spatial loops, fused into one, in parallel (its leading axes are often
    of extent 1: a batch of one, a kept reduced axis)."""
    st = s[t]
    if not t.op.reduce_axis:
        schedule_elementwise(s, t)
        return
    spatial = [iv for iv in st.leaf if iv in t.op.axis]
    extents = [const_int(iv.extent) for iv in spatial]
    if spatial and (None in extents or math.prod(extents) > 1):
        parallel_outer(st, spatial)
