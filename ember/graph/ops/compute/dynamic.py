"""Kernels of the ops whose output sizes a kernel computes (:mod:`ember.graph.ops.dynamic`).

``nonzero`` is a compaction: where an index goes depends on how many nonzeros came before
it, which no tensor computation (``out[i] = f(...)``) expresses. Its kernel is a loop program
written directly: one pass over ``x`` in row-major order with a running count, each nonzero
element's coordinates written at the count, never past the bound size.
"""
from __future__ import annotations

from ....loop import dtype as dt
from ....loop.expr import IntImm, Load, Var, as_expr, cast, eq, logical_and, ne, select
from ....loop.stmt import Allocate, Buffer, For, IfThenElse, PrimFunc, Store, seq
from ....loop.visit import walk
from ..registry import set_kernel
from .common import const_of, te_shape

INDEX = dt.INDEX


def _buffer(name: str, t) -> Buffer:
    # a kernel's parameter promises only natural alignment (as the lowering's do): a model's
    # input is the caller's numpy array, 16-byte aligned at best
    return Buffer(name, tuple(as_expr(d, INDEX) for d in te_shape(t)), t.dtype, align=dt.nbytes(t.dtype))


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


def _unique_classes(attrs, param_types, out_type, name: str) -> PrimFunc:
    """Two passes over the rows, each in parallel: every row's first equal row (the least index,
    comparing all columns), then its class's place: the number of distinct rows before it --
    first occurrences ordered before it (lexicographically when sorted, else by index). Quadratic
    in the rows: Unique's inputs are small (token ids, labels), its outputs few."""
    (x_t,) = param_types
    X, Y = _buffer("p0", x_t), _buffer("unique_classes", out_type)
    A, L = X.shape
    zero, one = IntImm(0, INDEX), IntImm(1, INDEX)
    i, j, l = Var("i"), Var("j"), Var("l")
    first = Buffer("first", (one,), INDEX, scope="local")
    state = Buffer("state", (one,), "int32", scope="local")  # equal so far / the first difference's sign

    def compare(a, b, body_on_equal=None):
        """state = 0 if rows a and b are equal, else -1 (a < b) or 1 (a > b) at their first difference."""
        va, vb = Load(X, (a, l)), Load(X, (b, l))
        here = Load(state, (zero,))
        step = IfThenElse(eq(here, IntImm(0, "int32")),
                          IfThenElse(ne(va, vb), Store(state, select(va < vb, IntImm(-1, "int32"), IntImm(1, "int32")),
                                                       (zero,))))
        return seq(Store(state, IntImm(0, "int32"), (zero,)), For(l, zero, L, "serial", step))

    found = eq(Load(state, (zero,)), IntImm(0, "int32"))
    # pass 1: the first row equal to row i (scanning down from i - 1 keeps the least)
    jj = i - one - j
    scan = For(j, zero, i, "serial", seq(compare(jj, i), IfThenElse(found, Store(first, jj, (zero,)))))
    pass1 = For(i, zero, A, "parallel", Allocate(first, Allocate(state, seq(
        Store(first, i, (zero,)), scan, Store(Y, Load(first, (zero,)), (zero, i))))))
    # pass 2: the place of row i's class among the distinct rows
    f = Load(Y, (zero, i))
    rank = Buffer("rank", (one,), INDEX, scope="local")
    is_first = eq(Load(Y, (zero, j)), j)
    if attrs["sorted"]:
        count = seq(compare(j, f), IfThenElse(logical_and(is_first, eq(Load(state, (zero,)), IntImm(-1, "int32"))),
                                              Store(rank, Load(rank, (zero,)) + one, (zero,))))
        places = For(j, zero, A, "serial", count)
    else:
        places = For(j, zero, f, "serial", IfThenElse(is_first, Store(rank, Load(rank, (zero,)) + one, (zero,))))
    pass2 = For(i, zero, A, "parallel", Allocate(rank, Allocate(state, seq(
        Store(rank, zero, (zero,)), places, Store(Y, Load(rank, (zero,)), (one, i))))))
    bufs = (X, Y)
    return PrimFunc(name, bufs + _size_params(bufs), seq(pass1, pass2))


def _unique_tally(attrs, param_types, out_type, name: str) -> PrimFunc:
    """Per class: the row of its first occurrence and its row count (one serial pass)."""
    c_t, n_t = param_types
    CL, N, Y = _buffer("p0", c_t), _buffer("p1", n_t), _buffer("unique_tally", out_type)
    A, U = CL.shape[1], Y.shape[1]
    zero, one = IntImm(0, INDEX), IntImm(1, INDEX)
    i, u = Var("i"), Var("u")
    cls = Load(CL, (one, i))
    inside = logical_and(cls >= zero, cls < U)  # (never past the bound size)
    tally = IfThenElse(inside, seq(
        IfThenElse(eq(Load(CL, (zero, i)), i), Store(Y, i, (zero, cls))),
        Store(Y, Load(Y, (one, cls)) + one, (one, cls))))
    init = For(u, zero, U, "serial", seq(Store(Y, zero, (zero, u)), Store(Y, zero, (one, u))))
    bufs = (CL, N, Y)
    return PrimFunc(name, bufs + _size_params(bufs), seq(init, For(i, zero, A, "serial", tally)))


set_kernel("unique_classes", _unique_classes)
set_kernel("unique_tally", _unique_tally)
