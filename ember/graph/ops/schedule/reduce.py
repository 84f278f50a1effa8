"""Schedule of the reductions (sum, mean, max, min, ...) that keep their input's last axis.

Such a reduction -- a global mean over the plane of a blocked ``N C/b H W b`` tensor
(squeeze-excitation), a sum over the rows of a matrix -- reads contiguous vectors along the
kept axis: the outer kept axes run in parallel, the reduced axes loop outside one vector of
the last axis, and the partial results stay in registers. Reductions of the last axis keep
the generic schedule (:func:`ember.kernels.elementwise.schedule_root`).
"""
from __future__ import annotations

from ....kernels.common import const_int, parallel_outer, vector_lanes
from ....kernels.elementwise import schedule_root
from ....loop import compute as te
from ....loop.schedule import Schedule
from ....loop.knobs import knob
from ..reduce import _REDUCTIONS
from ..registry import set_schedule


def _generic(s: Schedule, acc: te.Tensor, anchor: te.Tensor, out: te.Tensor) -> None:
    if anchor is not acc and anchor is not out:
        s[anchor].compute_inline()
    schedule_root(s, acc)
    if out is not acc:
        schedule_root(s, out)


def _lanes(s: Schedule, acc: te.Tensor, anchor: te.Tensor, out: te.Tensor) -> None:
    """A reduction through per-lane partials (``compute.reduce._lane_stage``): the partials of a
    row accumulate in registers, a few vectors wide, at the row's loop (the rows in parallel);
    a whole-tensor reduction keeps them in registers through a local copy."""
    if anchor is not acc and anchor is not out:
        s[anchor].compute_inline()
    P = acc.op.attrs["part"]
    sa = s[acc]
    rows = [iv for iv in sa.leaf if iv.kind == "spatial"]
    if rows:
        sp = s[P]
        if len(rows) > 1 or (const_int(rows[0].extent) or 2) > 1:
            parallel_outer(sa, rows)
        sp.compute_at(sa, sa.leaf[max(i for i, iv in enumerate(sa.leaf) if iv.kind == "spatial")])
    else:
        local = s.cache_write(P, "local")
        sp = s[P]
        *_, one, l = sp.leaf
        sp.vectorize(l)
        s[local].compute_at(sp, one)
        sp = s[local]
    *_, l, k = sp.leaf
    sp.reorder(k, l)
    sp.vectorize(l)
    if out is not acc:
        schedule_root(s, out)


def schedule_reduction(s: Schedule, anchor: te.Tensor, out: te.Tensor, target=None) -> None:
    """``anchor``: a reduction stage, or an elementwise stage over one (mean's division, whose
    ``attrs["acc"]`` is the sums); ``out``: ``anchor`` or an epilogue of its shape."""
    acc = anchor.op.attrs.get("acc", anchor)
    if acc.op.attrs.get("kind") == "reduce_lanes":
        _lanes(s, acc, anchor, out)
        return
    axes, ndim = acc.op.attrs.get("axes"), acc.op.attrs.get("ndim")
    last = const_int(acc.shape[-1]) if acc.ndim else None
    if axes is None or not acc.ndim or ndim - 1 in axes or last is None:
        _generic(s, acc, anchor, out)
        return
    if anchor is not acc and anchor is not out:
        s[anchor].compute_inline()
    lanes = vector_lanes(target, acc.dtype)
    local = s.cache_write(acc, "local") if out is acc else acc  # (out then copies it back)
    so = s[out]
    *outer, x = so.leaf
    parallel = knob("reduce.parallel", (True, False), True)  # (a tuner's decision: small ones serial)
    task = (parallel_outer(so, outer) if parallel else so.fuse(*outer) if len(outer) > 1 else outer[0]) \
        if outer else None
    if last > lanes:
        x, _ = so.split(x, factor=lanes)
        so.vectorize(so.leaf[-1])
    elif last > 1:
        so.vectorize(x)
    st = s[local]
    if last > lanes:
        st.compute_at(so, x)
    elif task is not None:
        st.compute_at(so, task)
    n = acc.ndim
    spatial, red = st.leaf[:n], st.leaf[n:]
    st.reorder(*spatial[:-1], *red, spatial[-1])
    if (const_int(spatial[-1].extent) or 0) > 1:
        st.vectorize(spatial[-1])


for _op in _REDUCTIONS:
    set_schedule(_op, "llvm", schedule_reduction)
