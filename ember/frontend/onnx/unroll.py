"""A ``Loop`` that carries a sequence (or an optional), or whose body needs its iteration
number at import, unrolled at import.

Sequences are import-time tuples of tensors (:mod:`.sequence`), so a loop whose iterations
append to one -- ONNX's own body of ``SequenceMap``, a model collecting a list -- cannot be a
runtime loop: each iteration's sequence has another length. When its trip count and its
condition are known at import (constants, shape computations, or model inputs the model is
compiled per value of: :mod:`ember.compiler.specialize`), the body is converted once per
iteration in the enclosing graph, its iteration number and carried values bound. A body that
slices by its iteration number (a value its runtime loop would not know at import) unrolls the
same way.
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedOpError
from ...graph import Constant
from . import fold
from .optional import OptionalValue
from .sequence import SequenceValue

MAX_ITERATIONS = 1024  # a longer loop over sequences would make a graph too large to compile


def carries_structure(values: list) -> bool:
    """Whether a Loop's carried values include a sequence or an optional (so it is unrolled)."""
    return any(isinstance(v, (SequenceValue, OptionalValue)) for v in values)


def needs_values(err: Exception) -> bool:
    """Whether converting a loop's body failed for want of a value known at import, which
    unrolling it (its iteration number a constant in each copy) may give."""
    from .context import StructureValueError

    return isinstance(err, StructureValueError) or "must be known when the model is imported" in str(err)


def _known_bool(node, value, what: str) -> bool:
    if value is None or getattr(value, "dtype", None) == object or np.asarray(value).size != 1:
        raise UnsupportedOpError(f"{node.label}: the {what} of a loop over sequences must be known when the "
                                 "model is imported (a sequence's length cannot depend on the data)")
    return bool(np.asarray(value).reshape(-1)[0])


def _as_known(expr, value):
    """The carried value for the next iteration: a Constant where its value is known, so shape
    computations on it fold there too."""
    if value is not None and not isinstance(expr, Constant) and not fold.is_symbolic(value) \
            and isinstance(value, np.ndarray):
        return Constant(value)
    return expr


def unrolled_loop(node) -> list:
    """The outputs of Loop ``node`` (final carried values, then scan outputs stacked on a new
    first axis), its body converted once per iteration."""
    imp = node.importer
    body = node.attr("body")
    trip = node.int_scalar(0, "trip count") if node.has(0) else None
    cond = _known_bool(node, node.value(1), "condition") if node.has(1) else True
    carried = [node.input(i) for i in range(2, len(node.inputs))]
    n = len(carried)
    names = [vi.name for vi in body.input]
    scans: list = []
    i = 0
    while cond and (trip is None or i < trip):
        if i >= MAX_ITERATIONS:
            raise UnsupportedOpError(f"{node.label}: a loop over sequences runs at most {MAX_ITERATIONS} "
                                     "iterations when unrolled")
        bound = {names[0]: Constant(np.array(i, np.int64)), names[1]: Constant(np.array(cond))}
        bound.update(zip(names[2:], carried))
        outs = imp.inline(body, f"{node.label} (iteration {i})", bound)
        if len(outs) < 1 + n:
            raise UnsupportedOpError(f"the loop body returns {len(outs)} value(s); it must return the condition "
                                     f"and {n} carried value(s)")
        cond = _known_bool(node, outs[0][1], "condition")
        carried = [_as_known(e, v) for e, v in outs[1:1 + n]]
        scans.append([e for e, _ in outs[1 + n:]])
        i += 1
    n_scan = len(body.output) - 1 - n
    if n_scan and not scans:
        raise UnsupportedOpError(f"{node.label}: a loop over sequences that runs no iteration has no shape for "
                                 "its scan outputs")
    stacked = []
    for k in range(n_scan):
        parts = [node.call("unsqueeze", it[k], axes=(0,)) for it in scans]
        stacked.append(parts[0] if len(parts) == 1 else node.call("concat", *parts, axis=0))
    return carried + stacked


__all__ = ["MAX_ITERATIONS", "carries_structure", "needs_values", "unrolled_loop"]
