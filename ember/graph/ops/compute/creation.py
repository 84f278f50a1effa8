"""Computes of the creation family: constant_of_shape, eye, range, shape_of, size.

constant_of_shape, eye and range have no inputs: each is one stage over no tensors. shape_of
and size read only their input's (static or symbolic) shape, never its elements; the kernel
still takes the input as an argument, so the stage names it in a read that can never happen
(:func:`never_read`), which lowering folds away.
"""
from __future__ import annotations

from ....loop import compute as te
from ....loop import dtype as dt
from ....loop.expr import Expr, as_expr, cast, const, eq, select
from .common import const_of, register_compute, te_shape


def never_read(x: te.Tensor, value: Expr) -> Expr:
    """``value``, written as a select whose other arm reads ``x``: it makes ``x`` a stage of the
    schedule (a kernel argument must be part of it) without reading it, since the condition
    is constant false and lowering folds the select away (``x`` may even be empty)."""
    first = x[tuple(const(0, dt.INDEX) for _ in range(x.ndim))]
    return select(const(False), cast(value.dtype, first), value)


def _constant_of_shape(attrs, inputs, out_type):
    v = const_of(attrs["value"], out_type.dtype)
    return te.compute(te_shape(out_type), lambda *i: v, "constant_of_shape")


def _eye(attrs, inputs, out_type):
    d, k = out_type.dtype, attrs["k"]
    return te.compute(te_shape(out_type), lambda i, j: select(eq(j - i, k), const_of(1, d), const_of(0, d)), "eye")


def _range(attrs, inputs, out_type):
    d = out_type.dtype
    start, step = attrs["start"], attrs["step"]
    if inputs:  # start and step read while running (the count only orders it after its bind)
        s, st, count = inputs
        wide = "float64" if dt.is_float(d) else d

        def body(i):
            v = cast(wide, s[()]) + cast(wide, i) * cast(wide, st[()])
            return never_read(count, cast(d, v))
        return te.compute(te_shape(out_type), body, "range")
    if dt.is_float(d):
        # start + i * step in float64 (no error accumulates along the range), then rounded once
        def body(i):
            return cast(d, const(float(start), "float64") + cast("float64", i) * const(float(step), "float64"))
    else:
        first = cast(d, as_expr(start)) if not isinstance(start, (int, float)) else const(int(start), d)

        def body(i):
            return first + cast(d, i) * const(int(step), d)
    return te.compute(te_shape(out_type), body, "range")


def _shape_of(attrs, inputs, out_type):
    x, d = inputs[0], out_type.dtype

    def body(i):
        # the dims are static ints or the kernel's size parameters: pick dim i by a select chain
        v = const(0, d)
        for k in reversed(range(x.ndim)):
            v = select(eq(i, k), cast(d, as_expr(x.shape[k])), v)
        return never_read(x, v)

    return te.compute(te_shape(out_type), body, "shape_of")


def _size(attrs, inputs, out_type):
    x, d = inputs[0], out_type.dtype
    n = const(1, d)
    for s in x.shape:
        n = n * cast(d, as_expr(s))
    return te.compute((), lambda: never_read(x, n), "size")


register_compute("constant_of_shape", _constant_of_shape)
register_compute("eye", _eye)
register_compute("range", _range)
register_compute("shape_of", _shape_of)
register_compute("size", _size)
