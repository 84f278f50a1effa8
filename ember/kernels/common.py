"""Helpers the default schedules share: target facts and common loop patterns."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Optional

from ..loop import dtype as dt
from ..loop.expr import IntImm

# the likely values of symbolic sizes (name -> int) while a schedule is made: what its
# heuristics assume of a size known only when running, never what the code computes
_LIKELY: contextvars.ContextVar = contextvars.ContextVar("ember_likely_sizes", default=None)


@contextlib.contextmanager
def likely_sizes(sizes: Optional[dict]):
    """Within the block, :func:`likely_int` takes symbolic sizes at these values (by name)."""
    token = _LIKELY.set(dict(sizes) if sizes else None)
    try:
        yield
    finally:
        _LIKELY.reset(token)


def likely_int(e) -> Optional[int]:
    """A size's value: its constant, or for a symbolic size (an image of any height) its value
    at the likely sizes of :func:`likely_sizes` -- for a schedule's heuristics to choose as for
    that size, the code staying correct at every size. None where a symbol has no likely value."""
    from ..loop.expr import as_expr

    e = as_expr(e)
    if isinstance(e, IntImm):
        return e.value
    hints = _LIKELY.get()
    return int_at(e, hints) if hints else None


def int_at(e, values: dict) -> Optional[int]:
    """The value of size expression ``e`` with its symbols at ``values`` (name -> int); None
    where one has no value or the result is not a constant."""
    from ..loop.arith import simplify
    from ..loop.expr import Var, as_expr
    from ..loop.visit import substitute, walk

    e = as_expr(e)
    vs = {v for v in walk(e) if isinstance(v, Var)}
    if any(v.name not in values for v in vs):
        return None
    v = simplify(substitute(e, {x: IntImm(int(values[x.name]), x.dtype) for x in vs}))
    return v.value if isinstance(v, IntImm) else None


MAX_LANES = 64  # the loop IR's widest vector


def vector_lanes(target, dtype: str = "float32") -> int:
    """How many ``dtype`` elements one vector register of ``target`` holds."""
    return max(1, host(target).vector_bits // max(8, dt.bits(dtype)))


def vector_registers(lanes: int) -> int:
    """Vector registers of a target whose vectors hold ``lanes`` float32s: AVX-512 has 32,
    AVX2 16 (what register blocks of accumulators are sized against)."""
    return 32 if lanes * 32 >= 512 else 16


def const_int(e):
    """The value of a constant extent, else None."""
    return e.value if isinstance(e, IntImm) else None


def fold_size(e):
    """A size as a Python int when it is constant, else a simplified expression (of symbolic
    sizes: a batch, a sequence, an image of any size)."""
    from ..loop.arith import simplify
    from ..loop.expr import Expr

    if not isinstance(e, Expr):
        return e
    e = simplify(e)
    v = const_int(e)
    return e if v is None else v


_PLAIN = contextvars.ContextVar("ember_plain_computes", default=False)


@contextlib.contextmanager
def plain_computes():
    """Inside, products and convolutions are computed plainly (a reduction over the operands as
    they are: no packed panels, register blocks or de-interleaved windows, which are a CPU's):
    what a GPU schedule tiles."""
    token = _PLAIN.set(True)
    try:
        yield
    finally:
        _PLAIN.reset(token)


def plain() -> bool:
    """Whether :func:`plain_computes` is in force."""
    return _PLAIN.get()


def host(target=None):
    """``target`` as a Target: None means the host CPU, a string is parsed (``"llvm -mcpu=..."``)."""
    from ..target import as_target, check_buildable

    t = as_target(target)
    check_buildable(t)  # (the CPU's kernels: a GPU target is a TargetError, not a missing attribute)
    return t


def largest_divisor(n: int, at_most: int) -> int:
    """The largest divisor of ``n`` not above ``at_most`` (at least 1): a tile of whole
    iterations, so no ragged last tile puts a guard inside the loop it tiles."""
    return max(d for d in range(1, max(1, min(at_most, n)) + 1) if n % d == 0)


def vectorize_inner(stage, axis, lanes: int):
    """Split ``axis`` by ``lanes`` and vectorize the inner part (tails become masked). At most
    64 lanes (a wider vector of bytes is several registers anyway)."""
    lanes = min(lanes, MAX_LANES)
    ext = const_int(axis.extent)
    if ext is not None and ext <= lanes:
        if ext > 1:
            stage.vectorize(axis)
        return None, axis
    outer, inner = stage.split(axis, factor=lanes)
    stage.vectorize(inner)
    return outer, inner


def parallel_outer(stage, axes):
    """Fuse the given outer loops and run them in parallel (one loop, one thread pool region)."""
    axes = list(axes)
    if len(axes) > 1:
        fused = stage.fuse(*axes)
    elif axes:
        fused = axes[0]
    else:
        return None
    stage.parallel(fused)
    return fused
