"""Kernels of the ops whose output sizes a kernel computes (:mod:`ember.graph.ops.dynamic`).

``nonzero`` is a compaction: where an index goes depends on how many nonzeros came before
it, which no tensor computation (``out[i] = f(...)``) expresses. Its kernel is a loop program
written directly: one pass over ``x`` in row-major order with a running count, each nonzero
element's coordinates written at the count, never past the bound size.
"""
from __future__ import annotations

from ....loop import dtype as dt
from ....loop.expr import IntImm, Load, Var, as_expr, cast, logical_and, ne
from ....loop.stmt import Allocate, Buffer, For, IfThenElse, PrimFunc, Store, seq
from ....loop.visit import walk
from ..registry import set_kernel
from .common import const_of, te_shape

INDEX = dt.INDEX


def _buffer(name: str, t) -> Buffer:
    return Buffer(name, tuple(as_expr(d, INDEX) for d in te_shape(t)), t.dtype)


def _size_params(buffers) -> tuple:
    out = []
    for b in buffers:
        for e in b.shape:
            for v in walk(e):
                if isinstance(v, Var) and v not in out:
                    out.append(v)
    return tuple(out)


def _nonzero(attrs, param_types, out_type, name: str) -> PrimFunc:
    x_t, c_t = param_types
    X, C, Y = _buffer("p0", x_t), _buffer("p1", c_t), _buffer("nonzero", out_type)
    cnt = Buffer("count", (IntImm(1, INDEX),), INDEX, scope="local")
    zero = IntImm(0, INDEX)
    bound = Load(C, ())  # the count the program bound the output's size to
    idx = [Var(f"i{k}") for k in range(x_t.ndim)]
    here = Load(cnt, (zero,))
    found = ne(Load(X, tuple(idx)), const_of(0, x_t.dtype))
    write = seq(*[Store(Y, cast(INDEX, i), (IntImm(k, INDEX), here)) for k, i in enumerate(idx)],
                Store(cnt, here + 1, (zero,)))
    body = IfThenElse(logical_and(found, here < bound), write)
    for k in reversed(range(x_t.ndim)):
        body = For(idx[k], zero, X.shape[k], "serial", body)
    body = Allocate(cnt, seq(Store(cnt, zero, (zero,)), body))
    bufs = (X, C, Y)
    return PrimFunc(name, bufs + _size_params(bufs), body)


set_kernel("nonzero", _nonzero)
