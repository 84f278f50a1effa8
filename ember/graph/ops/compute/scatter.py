"""Scatters as loop programs: a copy of the data, then each update written where its index
says, in order.

The tensor computations of ``index.py`` express a scatter as a gather -- each output element
searches every update for the last one aimed at it -- which costs ``|data| x |updates|``.
That is fine for a few updates into a large tensor, and quadratic when the indices cover the
tensor: HuggingFace's causal masks export as a ScatterND whose indices name every element
(a T5 decoder's mask of 16 x 16 took 0.8 ms of a 1 ms run; at 128 x 352 it would be two
billion comparisons). Here the copy is one pass and the updates another, ``|data| +
|updates|``, run in the updates' order so that the last of several aimed at one element wins
(as ONNX's reference); an index outside the data writes nothing.
"""
from __future__ import annotations

from ....loop import dtype as dt
from ....loop.expr import IntImm, Load, Var, logical_and, max_, min_, select
from ....loop.stmt import For, IfThenElse, PrimFunc, Store, seq
from ..registry import norm_axis, set_kernel
from .dynamic import _buffer, _size_params

INDEX = dt.INDEX


def _combine(red: str, old, new):
    return {"none": lambda: new, "add": lambda: old + new, "mul": lambda: old * new,
            "max": lambda: max_(old, new), "min": lambda: min_(old, new)}[red]()


def _loops(dims, body_of, kinds=None, prefix: str = "i"):
    """Nested loops over ``dims``; ``body_of(vars)`` makes the innermost body. (Variables are
    values: nested loops need their own ``prefix``.)"""
    vs = [Var(f"{prefix}{k}", INDEX) for k in range(len(dims))]
    body = body_of(vs)
    for k in reversed(range(len(dims))):
        body = For(vs[k], IntImm(0, INDEX), dims[k], (kinds or {}).get(k, "serial"), body)
    return body


def _copy(X, Y):
    """Y = X, the outermost loop in parallel."""
    return _loops(X.shape, lambda v: Store(Y, Load(X, tuple(v)), tuple(v)), {0: "parallel"})


def _wrapped(i, size):
    """A negative index counts from the end; with whether it then lies inside ``[0, size)``."""
    i = i if i.dtype == INDEX else i.astype(INDEX)
    j = i + select(i < 0, size, IntImm(0, INDEX))
    return j, logical_and(j >= 0, j < size)


def _scatter_nd(attrs, param_types, out_type, name: str) -> PrimFunc:
    x_t, i_t, u_t = param_types
    X, I, U, Y = _buffer("p0", x_t), _buffer("p1", i_t), _buffer("p2", u_t), _buffer("scatter_nd", out_type)
    k = int(I.shape[-1].value)
    lead = I.shape[:-1]
    red = attrs["reduction"]

    def update(q):
        targets = [_wrapped(Load(I, tuple(q) + (IntImm(j, INDEX),)), X.shape[j]) for j in range(k)]
        inside = logical_and(*(ok for _, ok in targets))
        pos = tuple(t for t, _ in targets)

        def write(r):
            at = pos + tuple(r)
            return Store(Y, _combine(red, Load(Y, at), Load(U, tuple(q) + tuple(r))), at)
        inner = _loops(X.shape[k:], write, prefix="r")
        return IfThenElse(inside, inner) if k else inner
    body = seq(_copy(X, Y), _loops(lead, update, prefix="u"))
    bufs = (X, I, U, Y)
    return PrimFunc(name, bufs + _size_params(bufs), body)


def _scatter_elements(attrs, param_types, out_type, name: str) -> PrimFunc:
    x_t, i_t, u_t = param_types
    X, I, U, Y = (_buffer("p0", x_t), _buffer("p1", i_t), _buffer("p2", u_t),
                  _buffer("scatter_elements", out_type))
    a = norm_axis(attrs["axis"], len(X.shape))
    red = attrs["reduction"]

    def update(q):
        t, ok = _wrapped(Load(I, tuple(q)), X.shape[a])
        at = tuple(q[:a]) + (t,) + tuple(q[a + 1:])
        return IfThenElse(ok, Store(Y, _combine(red, Load(Y, at), Load(U, tuple(q))), at))
    body = seq(_copy(X, Y), _loops(I.shape, update, prefix="u"))
    bufs = (X, I, U, Y)
    return PrimFunc(name, bufs + _size_params(bufs), body)


set_kernel("scatter_nd", _scatter_nd)
set_kernel("scatter_elements", _scatter_elements)
