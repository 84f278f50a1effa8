"""The likely values of a model's symbolic sizes: what its kernels' schedules are made for.

A model exported with dynamic axes compiles to kernels over symbolic sizes that run at every
size. Their default schedules still choose by size: how many rows a task takes, how wide a
block of columns is, whether a plane is small enough to be one task, whether folding a
per-channel scale into a conv pays. A size known only when running was taken as large, so an
EfficientNet-B0 exported with dynamic height and width ran its 7x7 layers' depthwise convs
with the choices of a huge plane, 2-3x slower than from its static export.

So each symbol gets a likely value, which those heuristics use (the code computes with the
size itself): the shape a user passes as ``shape_hints`` (TensorRT's "optimization profile"
asks the same), else a batch -- an input's first axis -- of 1, an image's height and width
(a 4-d float input's last two axes, both symbolic) of 224, a token sequence (an integer input's
second axis) of 128, and a KV cache's past length (a 4-d input's third axis named ``past...``,
optimum's ``past_sequence_length``) of 0, the prompt's step: a KV cache of 64-wide heads was
taken for an image 224 high, and its attention kernels' twins served a past length no run had.
A symbol none of these covers keeps the old assumption, large.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from ..errors import ShapeError
from ..loop import dtype as dt
from ..loop.expr import Var as LoopVar

LIKELY_BATCH = 1
LIKELY_IMAGE = 224
LIKELY_SEQUENCE = 128
LIKELY_PAST = 0  # a KV cache's past length: a decoder's prompt step (the steps after it each differ)


def likely_sizes_of(main, hints: Optional[Mapping[str, Sequence[int]]] = None) -> dict:
    """Symbol name -> likely value, for the symbols that are whole input dims of ``main`` (a
    graph Function): from ``hints`` (input name -> shape) where given, else the defaults."""
    out: dict = {}
    hints = dict(hints or {})
    names = [p.name for p in main.params]
    unknown = sorted(set(hints) - set(names))
    if unknown:
        raise ShapeError(f"shape_hints names {', '.join(unknown)}, which are not inputs (inputs: {', '.join(names)})")
    for p in main.params:
        shape, dtype = getattr(p.type, "shape", None), getattr(p.type, "dtype", None)
        if not shape:
            continue
        given = hints.get(p.name)
        if given is not None and len(given) != len(shape):
            raise ShapeError(f"input {p.name!r} has rank {len(shape)} ({p.type}); shape_hints gives {tuple(given)}")
        for axis, d in enumerate(shape):
            if isinstance(d, int) or not isinstance(d.expr, LoopVar):
                continue
            if given is not None:
                v = int(given[axis])
            elif axis == 0:
                v = LIKELY_BATCH
            elif len(shape) == 4 and axis == 2 and "past" in d.expr.name.lower():
                v = LIKELY_PAST
            elif (len(shape) == 4 and axis >= 2 and dtype is not None and dt.is_float(dtype)
                  and not any(isinstance(x, int) for x in shape[2:])):
                v = LIKELY_IMAGE
            elif axis == 1 and dtype is not None and dt.is_int(dtype):
                v = LIKELY_SEQUENCE
            else:
                continue
            out.setdefault(d.expr.name, v)
    return out


def likely_shapes(main, hints: Optional[Mapping[str, Sequence[int]]] = None) -> dict:
    """Input name -> its shape at the likely sizes (:func:`likely_sizes_of`), for the inputs of
    ``main`` with symbolic dims that all have a likely value: the shape a tuner measures at
    when none is given, whose records the compile's static twins then use."""
    from .twin import bound_dim

    sizes = likely_sizes_of(main, hints)
    out = {}
    for p in main.params:
        shape = getattr(p.type, "shape", None)
        if not shape or all(isinstance(d, int) for d in shape):
            continue
        got = tuple(bound_dim(d, sizes) for d in shape)
        if None not in got:
            out[p.name] = got
    return out


__all__ = ["LIKELY_BATCH", "LIKELY_IMAGE", "LIKELY_PAST", "LIKELY_SEQUENCE", "likely_shapes", "likely_sizes_of"]
