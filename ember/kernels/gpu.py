"""GPU schedules: the generic one (a stage's output elements spread over a grid of thread
blocks) and the register-tiled one of products and convolutions.

Every root stage of a fused group (its output, and each reduction or materialized value
before it) gets its spatial loops fused into one and split into blocks of
:data:`BLOCK_THREADS` threads, one thread an element; a reduction's loops run in that thread.
Elementwise and injective stages are inlined into their readers first, as on the CPU. It is
the schedule every op family has until a faster one is registered for it
(``set_schedule(op, "cuda", fn)``): correct for any group, and the base the checks (ptxas, and
the CPU execution of :mod:`ember.loop.passes.threads_on_cpu`) cover.
"""
from __future__ import annotations

from ..loop import compute as te
from ..loop.schedule import Schedule
from .common import const_int

BLOCK_THREADS = 256  # a block's threads: 8 warps, within every architecture's limits
GPU_BUSY_THREADS = 1 << 15  # threads that keep a large GPU busy (132 multiprocessors x 256)

__all__ = ["BLOCK_THREADS", "schedule_gpu_product", "schedule_gpu_root"]


def schedule_gpu_root(s: Schedule, t: te.Tensor, threads: int = BLOCK_THREADS) -> None:
    """Bind stage ``t``'s spatial loops to ``block_x`` x ``thread_x`` (see the module doc)."""
    st = s[t]
    spatial = [iv for iv in st.leaf if iv in t.op.axis]
    if not spatial:
        return  # (a 0-d value: one thread of one block computes it)
    fused = st.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    n = const_int(fused.extent)
    if n is not None and n < threads:
        threads = max(1, n)  # (a small value: one block of just its threads)
    blocks, lanes = st.split(fused, factor=threads)
    st.bind(blocks, "block_x")
    st.bind(lanes, "thread_x")


def schedule_gpu_product(s: Schedule, anchor: te.Tensor, out: te.Tensor, row_axis: int,
                         rows: int = 4, cols: int = 4, threads: int = BLOCK_THREADS) -> bool:
    """A product or convolution ``anchor`` (a reduction) and its epilogue ``out``: each thread
    accumulates a register tile of ``rows`` x ``cols`` outputs (``rows`` along ``row_axis``,
    the operand whose values every column shares: a filter, a matrix row; ``cols`` along the
    single axis after it, else one element of the axes after it fused), so that each value it
    loads serves several FMAs; a block is up to ``threads`` threads, its tile's columns across
    ``thread_x`` (neighbouring threads read neighbouring inputs), its rows across ``thread_y``;
    the axes before ``row_axis`` (a batch) and the blocks of rows and columns are the grid. The
    epilogue runs on the tile in registers. False (nothing done) where an extent is not static."""
    so = s[out]
    axes = [iv for iv in so.leaf if iv.kind == "spatial"]
    if len(axes) <= row_axis or any(const_int(iv.extent) is None for iv in axes):
        return False
    if out is anchor:  # (accumulate in registers, write once)
        acc = s[s.cache_write(anchor, "local")]
        so = s[out]
        axes = [iv for iv in so.leaf if iv.kind == "spatial"]
    else:
        acc = s[anchor]
    outer, r, rest = axes[:row_axis], axes[row_axis], axes[row_axis + 1:]
    if not rest:
        return False
    c = so.fuse(*rest) if len(rest) > 1 else rest[0]
    if len(rest) > 1:
        cols = 1  # (a tile across fused axes would not be a box: each thread one column)
    re_, ce = const_int(r.extent), const_int(c.extent)
    rows, cols = max(1, min(rows, re_)), max(1, min(cols, ce))
    total = 1
    for iv in axes:
        total *= const_int(iv.extent)
    # a small product keeps the GPU busy with smaller tiles: halve them (the larger side first)
    # until the threads fill it (~a quarter of what its multiprocessors hold at once)
    while rows * cols > 1 and total // (rows * cols) < GPU_BUSY_THREADS:
        if rows >= cols:
            rows //= 2
        else:
            cols //= 2
    tx = max(1, min(-(-ce // cols), 64 if cols > 1 else 128))
    ty = max(1, min(threads // tx, -(-re_ // rows)))
    rb, rin = so.split(r, factor=ty * rows)
    rt, ri = so.split(rin, factor=rows)
    cb, cin = so.split(c, factor=tx * cols)
    ct, ci = so.split(cin, factor=cols)
    so.reorder(*outer, rb, cb, rt, ct, ri, ci)
    grid = so.fuse(*outer, rb, cb)
    so.bind(grid, "block_x")
    so.bind(rt, "thread_y")
    so.bind(ct, "thread_x")
    so.unroll(ri)
    so.unroll(ci)
    acc.compute_at(so, ct)
    spatial = [iv for iv in acc.leaf if iv.kind == "spatial"]
    reduce = [iv for iv in acc.leaf if iv.kind == "reduce"]
    acc.reorder(*reduce, *spatial)
    for iv in spatial:
        acc.unroll(iv)
    return True
