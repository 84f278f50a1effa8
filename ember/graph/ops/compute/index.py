"""Computes of the index family: gather, gather_elements, gather_nd, scatter_elements,
scatter_nd, one_hot, trilu, cumsum/cumprod, topk; and einsum and nn.hardmax, which are built
from the same pieces (a reduction over a label, an argmax).

Gathers are injective: each output element reads the data at an index loaded from the index
tensor. A negative index counts from the end (ONNX); a gather clamps the index into its axis,
so an out-of-range index reads some element of the data rather than outside its buffer.

Scatters are reductions over the updates (O(outputs x updates)): for reduction "none" the last
update aimed at an element wins (a max-reduction of the matching update positions, then a
select between that update and the data); add/mul/max/min reduce the matching updates and
combine the result with the data. An update whose index is out of range matches nothing.

topk ranks every element of a slice (the count of elements that sort before it, ties broken by
the lower index, NaN the largest as in numpy's sort), then finds the element of each rank.
cumsum/cumprod sum (multiply) over the slice with a condition on the position.
"""
from __future__ import annotations

from ....errors import ShapeError
from ....loop import compute as te
from ....loop import dtype as dt
from ....loop import intrinsics as intr
from ....loop.expr import (
    Expr,
    IntImm,
    as_expr,
    cast,
    const,
    eq,
    logical_and,
    max_,
    min_,
    select,
    unflatten,
)
from ...types import TensorType
from ..einsum import einsum_terms
from ..dims import index
from ..registry import get_op, norm_axis
from .common import const_of, register_compute, stage_name, te_shape
from .creation import never_read

_INDEX = dt.INDEX


def _as_index(v: Expr) -> Expr:
    return v if v.dtype == _INDEX else cast(_INDEX, v)


def wrap_index(v: Expr, n) -> Expr:
    """An index tensor's value as a position on an axis of extent ``n``: negative counts back."""
    v = _as_index(v)
    # the select picks a constant, so the index load is not duplicated into guarded select arms
    return v + select(v < 0, as_expr(n, _INDEX), const(0, _INDEX))


def clamp_index(v: Expr, n) -> Expr:
    """``wrap_index`` clamped into ``[0, n)``: a bad index never reads outside the data. An
    int32 index into a static extent that int32 holds is wrapped and clamped in int32 and
    widened last: a vector of them is a gather by 32-bit offsets (``vpgatherdd``), where
    64-bit ones take two gathers of half the lanes."""
    n = n.value if isinstance(n, IntImm) else n
    if v.dtype == "int32" and isinstance(n, int) and n < 2 ** 31:
        w = v + select(v < 0, const(n, "int32"), const(0, "int32"))
        return cast(_INDEX, max_(min_(w, const(n - 1, "int32")), const(0, "int32")))
    return max_(min_(wrap_index(v, n), as_expr(n) - 1), 0)


def _put(idx: tuple, axis: int, v) -> tuple:
    """``idx`` with position ``axis`` replaced by ``v``."""
    return idx[:axis] + (v,) + idx[axis + 1:]


# -- gathers ------------------------------------------------------------------------------------


def _gather(attrs, inputs, out_type):
    x, idx = inputs
    a = norm_axis(attrs["axis"], x.ndim)
    q = idx.ndim

    def body(*i):
        j = clamp_index(idx[i[a:a + q]], x.shape[a])
        return x[i[:a] + (j,) + i[a + q:]]

    return te.compute(te_shape(out_type), body, "gather")


def _gather_elements(attrs, inputs, out_type):
    x, idx = inputs
    a = norm_axis(attrs["axis"], x.ndim)
    return te.compute(te_shape(out_type), lambda *i: x[_put(i, a, clamp_index(idx[i], x.shape[a]))],
                      "gather_elements")


def _gather_nd(attrs, inputs, out_type):
    x, idx = inputs
    b, k = attrs["batch_dims"], idx.shape[-1].value
    lead = idx.ndim - 1  # output dims that index the index tuples (batch dims first)

    def body(*i):
        tup = tuple(clamp_index(idx[i[:lead] + (j,)], x.shape[b + j]) for j in range(k))
        return x[i[:b] + tup + i[lead:]]

    return te.compute(te_shape(out_type), body, "gather_nd")


# -- scatters -----------------------------------------------------------------------------------

_COMBINER = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}


def _scatter(name: str, x: te.Tensor, upd: te.Tensor, red: str, n_upd, match, upd_index) -> te.Tensor:
    """The scatter of ``upd`` into ``x``, reducing over ``n_upd`` update positions ``u``:
    ``match(p, u)`` says whether update ``u`` goes to output element ``p``; ``upd_index(p, u)``
    is where that update lies in ``upd``."""
    u = te.reduce_axis(n_upd, f"{name}_u")
    if red == "none":
        # the last update aimed at p wins; -1 when none is
        last = te.compute(x.shape, lambda *p: te.max(u.var, axis=u, where=match(p, u.var), init=-1),
                          f"{name}_last")

        def out(*p):
            k = last[p]
            return select(k >= 0, upd[upd_index(p, k)], x[p])

        return te.compute(x.shape, out, name)
    combiner = _COMBINER[red]
    acc = te.compute(x.shape, lambda *p: getattr(te, combiner)(upd[upd_index(p, u.var)], axis=u,
                                                               where=match(p, u.var)), f"{name}_acc")
    # the reduction starts at the combiner's identity, so combining with the data is exact
    return te.compute(x.shape, lambda *p: te.combine(combiner, x[p], acc[p]), name)


def _scatter_elements(attrs, inputs, out_type):
    x, idx, upd = inputs
    if x.ndim == 0:
        raise ShapeError("scatter_elements: the data must have rank >= 1")
    a = norm_axis(attrs["axis"], x.ndim)
    # dims where the indices are smaller than the data: the elements beyond them get no update
    ragged = [d for d in range(x.ndim) if d != a and idx.shape[d] != x.shape[d]]

    def where(p, u):
        hit = eq(wrap_index(idx[_put(p, a, u)], x.shape[a]), p[a])
        if not ragged:
            return hit
        inside = logical_and(*(p[d] < idx.shape[d] for d in ragged))
        return select(inside, hit, const(False))  # under the select, idx is read only inside

    return _scatter("scatter_elements", x, upd, attrs["reduction"], idx.shape[a], where,
                    lambda p, u: _put(p, a, u))


def _scatter_nd(attrs, inputs, out_type):
    x, idx, upd = inputs
    k = idx.shape[-1].value
    lead = idx.shape[:-1]  # the update tuples, flattened into one reduction
    n = const(1, _INDEX)
    for s in lead:
        n = n * s

    def where(p, u):
        q = unflatten(u, lead)
        hits = [eq(wrap_index(idx[q + (const(j, _INDEX),)], x.shape[j]), p[j]) for j in range(k)]
        return logical_and(*hits) if hits else const(True)

    return _scatter("scatter_nd", x, upd, attrs["reduction"], n, where,
                    lambda p, u: unflatten(u, lead) + p[k:])


# -- one_hot, trilu -----------------------------------------------------------------------------


def _one_hot(attrs, inputs, out_type):
    idx = inputs[0]
    a = norm_axis(attrs["axis"], idx.ndim + 1)
    d = out_type.dtype
    on, off = const_of(attrs["on_value"], d), const_of(attrs["off_value"], d)
    if len(inputs) > 1:
        off, on = inputs[1][(0,)], inputs[1][(1,)]
    depth = attrs["depth"] if isinstance(attrs["depth"], int) else index(attrs["depth"])

    def body(*i):
        # float indices truncate; one outside [-depth, depth) hits no position
        v = wrap_index(idx[i[:a] + i[a + 1:]], depth)
        return select(eq(v, i[a]), on, off)

    return te.compute(te_shape(out_type), body, "one_hot")


def _trilu(attrs, inputs, out_type):
    x, k = inputs[0], attrs["k"]
    if len(inputs) > 1:  # k from a tensor: read by every element (a scalar load, hoisted by LLVM)
        k = inputs[1][(0,)]
    zero = const_of(0, x.dtype)

    def body(*i):
        off = i[-1] - i[-2]  # column - row: how far above the main diagonal
        keep = off >= k if attrs["upper"] else off <= k
        return select(keep, x[i], zero)

    return te.compute(te_shape(out_type), body, "trilu")


# -- cumsum, cumprod ----------------------------------------------------------------------------


def _cumulative(op: str, combiner: str):
    def compute_fn(attrs, inputs, out_type):
        x = inputs[0]
        excl, rev = attrs["exclusive"], attrs["reverse"]
        if x.ndim == 0:  # a scalar is its own one-element slice
            ident = const_of(0 if combiner == "sum" else 1, x.dtype)
            return te.compute((), lambda: never_read(x, ident) if excl else x[()], op)
        a = norm_axis(attrs["axis"], x.ndim)
        j = te.reduce_axis(x.shape[a], f"{op}_j")

        def body(*i):
            # the positions folded into element i: up to it (from it, reversed), itself unless exclusive
            if rev:
                take = j.var > i[a] if excl else j.var >= i[a]
            else:
                take = j.var < i[a] if excl else j.var <= i[a]
            return getattr(te, combiner)(x[_put(i, a, j.var)], axis=j, where=take)

        return te.compute(te_shape(out_type), body, op)

    register_compute(op, compute_fn)


# -- topk ---------------------------------------------------------------------------------------


def _sorts_before(v: Expr, w: Expr, largest: bool) -> Expr:
    """``v`` strictly before ``w`` in the sort order (NaN counts as the largest value)."""
    if not dt.is_float(v.dtype):
        return v > w if largest else v < w
    nv, nw = intr.isnan(v), intr.isnan(w)
    if largest:
        return (v > w) | (nv & ~nw)
    return (v < w) | (nw & ~nv)


def _same(v: Expr, w: Expr) -> Expr:
    s = eq(v, w)
    return s | (intr.isnan(v) & intr.isnan(w)) if dt.is_float(v.dtype) else s


def _topk(attrs, inputs, out_type):
    x = inputs[0]
    a = norm_axis(attrs["axis"], x.ndim)
    n, largest = x.shape[a], attrs["largest"]
    vtype, itype = out_type.fields  # sorted=False allows any order: the sorted one will do

    j = te.reduce_axis(n, "topk_j")

    def rank(*i):
        # how many elements of i's slice sort before it: ties go to the lower index (ONNX)
        v, w = x[_put(i, a, j.var)], x[i]
        before = _sorts_before(v, w, largest) | (_same(v, w) & (j.var < i[a]))
        return te.sum(const(1, _INDEX), axis=j, where=before)

    ranks = te.compute(x.shape, rank, "topk_rank")
    m = te.reduce_axis(n, "topk_m")
    # the ranks of a slice are a permutation of 0..n-1: exactly one element has rank r
    indices = te.compute(te_shape(itype), lambda *i: te.min(cast("int64", m.var), axis=m,
                                                            where=eq(ranks[_put(i, a, m.var)], i[a])),
                         "topk_indices")
    values = te.compute(te_shape(vtype), lambda *i: x[_put(i, a, clamp_index(indices[i], n))], "topk_values")
    return values, indices


# -- einsum -------------------------------------------------------------------------------------


def _einsum(attrs, inputs, out_type):
    eqn = attrs["equation"]
    terms, rhs = einsum_terms(eqn, [t.ndim for t in inputs])
    ell_rank = max((nell for *_, nell in terms), default=0)
    ell = tuple(f"...{e}" for e in range(ell_rank))  # the broadcast dims, as labels of their own
    # each operand's labels, one per dim; its ellipsis dims are the last of the broadcast ones
    labels = [tuple(pre) + ell[ell_rank - nell:] + tuple(post) for pre, _, post, nell in terms]
    o_pre, o_ell, o_post = rhs.partition("...")
    out_labels = tuple(o_pre) + (ell if o_ell else ()) + tuple(o_post)
    if len(set(out_labels)) != len(out_labels):
        raise ShapeError(f"einsum: output labels of {eqn!r} repeat")

    extent = {}
    for t, ls in zip(inputs, labels):
        for lab, s in zip(ls, t.shape):
            # a broadcast dim of size 1 yields to another operand's size
            if lab not in extent or (extent[lab] == const(1, _INDEX) and lab.startswith("...")):
                extent[lab] = s
    contracted = [lab for lab in dict.fromkeys(sum(labels, ())) if lab not in out_labels]
    raxes = {lab: te.reduce_axis(extent[lab], f"einsum_{k}") for k, lab in enumerate(contracted)}
    is_bool = dt.is_bool(out_type.dtype)

    def body(*i):
        pos = dict(zip(out_labels, i))
        pos.update({lab: r.var for lab, r in raxes.items()})
        term = None
        for t, ls in zip(inputs, labels):
            # a size-1 broadcast dim is read at 0 whatever the output position
            at = tuple(const(0, _INDEX) if lab.startswith("...") and s == const(1, _INDEX) else pos[lab]
                       for lab, s in zip(ls, t.shape))
            v = t[at]
            term = v if term is None else (term & v if is_bool else term * v)
        if not raxes:
            return term
        # bool: "sum" of products is any-of (te.sum on bool would add modulo 2)
        return (te.max if is_bool else te.sum)(term, axis=tuple(raxes.values()))

    return te.compute(te_shape(out_type), body, "einsum")


# -- hardmax ------------------------------------------------------------------------------------


def _hardmax(attrs, inputs, out_type):
    x = inputs[0]
    a = norm_axis(attrs["axis"], x.ndim)
    keep = TensorType(_put(tuple(out_type.shape), a, 1), "int64")
    first = get_op("argmax").compute({"axis": a, "keepdims": True}, [x], keep)
    one, zero = const_of(1, x.dtype), const_of(0, x.dtype)
    return te.compute(te_shape(out_type),
                      lambda *i: select(eq(first[_put(i, a, const(0, _INDEX))], cast("int64", i[a])), one, zero),
                      stage_name("nn.hardmax"))


register_compute("gather", _gather)
register_compute("gather_elements", _gather_elements)
register_compute("gather_nd", _gather_nd)
register_compute("scatter_elements", _scatter_elements)
register_compute("scatter_nd", _scatter_nd)
register_compute("one_hot", _one_hot)
register_compute("trilu", _trilu)
_cumulative("cumsum", "sum")
_cumulative("cumprod", "prod")
register_compute("topk", _topk)
register_compute("einsum", _einsum)
register_compute("nn.hardmax", _hardmax)
