"""Matrix multiplication: packed operands and a register-blocked micro-kernel.

The structure is the classic packed GEMM (Goto; BLIS):

- ``B`` is packed into panels of ``NR`` columns, ``Bp[jo, k, ji]`` (zero-padded), so the
  micro-kernel reads it linearly; for constant weights the graph compiler folds this stage.
- ``A`` is packed into panels of ``MR`` rows, ``Ap[io, k, ii]``;
- the column panels are taken in groups that fit in L2; for each group every row block runs
  (a (group, row block) pair is the unit of parallel work), so B comes from L2, not L3;
- the micro-kernel keeps an ``MR x NR`` block of ``C`` in vector registers (a local buffer
  whose loops are unrolled and vectorized) and, for each ``k``, broadcasts ``MR`` values of A
  against ``NR / lanes`` vectors of B: ``MR * NR / lanes`` independent FMAs;
- row blocks run in parallel on all cores, one contiguous chunk per core.
"""
from __future__ import annotations

import math

from ..loop import compute as te
from ..loop import dtype as dt
from ..loop import intrinsics
from ..loop.expr import min_, select
from ..loop.schedule import Schedule
from ..loop.knobs import knob
from .common import const_int, host, likely_int, vector_lanes, vector_registers


def micro_tile(target, dtype: str = "float32") -> tuple[int, int]:
    """(MR, NR) for the target: NR = 2 vectors, MR fills the register file with accumulators."""
    lanes = vector_lanes(target, dtype)
    regs = vector_registers(lanes)
    nr_vecs = 2
    mr = (regs - nr_vecs - 2) // nr_vecs  # accumulators + B vectors + a broadcast
    return min(mr, 14), nr_vecs * lanes


def _zero(dtype: str):
    return 0.0 if "float" in dtype else 0


def _ceil_div(n, d: int):
    """``ceil(n / d)`` for a size: an int when ``n`` is constant (so shapes stay constants)."""
    v = const_int(n)
    return -(-v // d) if v is not None else (n + (d - 1)) // d


def pack_b(B: te.Tensor, nr: int, name: str = "Bp", trans: bool = False, group: int = 1) -> te.Tensor:
    """Pack B (..., K, N) -- or (..., N, K) with ``trans`` -- into zero-padded column panels
    (..., N/nr, K, nr). With ``group`` g > 1, g consecutive values along K sit together for a
    packed dot (their bytes one int32 word): (..., N/nr, K/g, nr, g), zero past K."""
    *batch, d0, d1 = B.shape
    K, N = (d1, d0) if trans else (d0, d1)
    n, kk = const_int(N), const_int(K)

    def f(*idx):
        if group > 1:
            *b, jo, ko, ji, t = idx
            k = ko * group + t
        else:
            *b, jo, k, ji = idx
        j = jo * nr + ji
        v = B[(*b, j, k)] if trans else B[(*b, k, j)]
        inside = [] if n is not None and n % nr == 0 else [j < N]
        if group > 1 and not (kk is not None and kk % group == 0):
            inside.append(k < K)
        for c in inside:
            v = select(c, v, _zero(B.dtype))
        return v
    if group > 1:
        return te.compute((*batch, _ceil_div(N, nr), _ceil_div(K, group), nr, group), f, name)
    return te.compute((*batch, _ceil_div(N, nr), K, nr), f, name)


def pack_a(A: te.Tensor, mr: int, name: str = "Ap") -> te.Tensor:
    """Pack A (..., M, K) into zero-padded row panels (..., M/mr, K, mr)."""
    *batch, M, K = A.shape
    m = const_int(M)

    def f(*idx):
        *b, io, k, ii = idx
        i = io * mr + ii
        v = A[(*b, i, k)]
        return v if m is not None and m % mr == 0 else select(i < M, v, _zero(A.dtype))
    return te.compute((*batch, _ceil_div(M, mr), K, mr), f, name)


def _batch_index(t_batch: tuple, out_batch: tuple) -> tuple:
    """Index batch dims ``t_batch`` of an operand with the output's batch index (numpy
    broadcasting: right-aligned, size-1 dims fixed at 0)."""
    off = len(out_batch) - len(t_batch)
    return tuple(0 if const_int(d) == 1 else out_batch[off + k] for k, d in enumerate(t_batch))


def matmul_compute(A: te.Tensor, B: te.Tensor, target=None, name: str = "C",
                   trans_b: bool = False, batch: tuple = None, pack: bool = True,
                   units=None, dot: str = None, inline: tuple = ()) -> tuple[te.Tensor, dict]:
    """C = A @ B (or A @ B^T) through packed panels. A and B may have leading batch dims that
    broadcast (numpy rules) to ``batch`` (default: A's). With ``pack=False`` (for a few rows:
    A of at most MR rows, B not transposed) the micro-kernel reads A and B where they are and
    its row block is exactly A's rows. With ``units`` (N), ``B`` is already packed by
    :func:`pack_b` (``(..., N/NR, K, NR)``: at compile time for constant weights, at run
    time for an activation) and read as it is. With ``dot`` (a packed dot of ``ember.loop.intrinsics.PACKED_DOTS``: ``"dot_bf16x2"``,
    ``"dot_u8i8x4"``), A and the packed B hold int32 *words* of ``g`` narrow values along K
    (A ``(..., M, K/g)``, B ``(N/NR, K/g, NR)``: :func:`pack_b` with ``group=g``, then read as
    words), and C (float32 or int32) sums their dot products: one ``vdpbf16ps``/``vpdpbusd``
    per ``g`` FMAs. ``inline`` names stages that compute B where it is read (a decoding of
    quantized weights: ``ember.kernels.weight_only``), inlined by the schedule. Returns C and
    the stages the schedule needs, which C's ``attrs`` also hold."""
    target = host(target)
    if dot is not None and (units is None or trans_b):
        raise ValueError("a packed dot reads a weight packed in words (units given, not transposed)")
    mr, nr = micro_tile(target, A.dtype)
    lanes = vector_lanes(target, A.dtype)
    regs = vector_registers(lanes)
    if units is None and pack:  # (pre-packed weights fixed NR when the graph packed them)
        nr = lanes * knob("gemm.column_vectors", [v for v in (1, 2, 3, 4) if 2 * v + 2 <= regs], nr // lanes)
    elif not pack:
        # a few rows read B in place: wider column blocks, more accumulators in flight (one row
        # of two vectors is two FMA chains, latency-bound), up to the register file
        rows = const_int(A.shape[-2]) or mr
        fit = [v for v in range(1, 9) if rows * v + v + 1 <= regs]
        cols = const_int(B.shape[-2] if trans_b else B.shape[-1])
        wide = max(v for v in fit if cols is None or v * lanes <= max(cols, lanes))
        nr = lanes * knob("gemm.column_vectors", fit, wide)
    nvec = max(1, (const_int(B.shape[-1]) if units is not None else nr) // lanes)
    *ba, M, K = A.shape
    batch = tuple(ba) if batch is None else tuple(batch)
    # the tuner's row block: accumulators (rows x column vectors), the B vectors and a broadcast
    most = min(mr, (regs - nvec - 1) // nvec)
    if pack:
        cols = units if units is not None else (B.shape[-2] if trans_b else B.shape[-1])
        # (symbolic sizes at their likely values, ember.compiler.likely; a batch with none
        # counts as many units: the blocks' split then hardly matters)
        others = math.prod(likely_int(d) or 64 for d in batch) * _column_groups(cols, K, nvec * lanes, A.dtype, target)
        rows = likely_int(M)
        if const_int(M) is None and (rows or 0) < most:
            rows = None  # (a symbolic row count likely small still gets a full block: the few-rows
            # variant takes the calls with few rows, and others may have many)
        most = block_rows(rows, most, others, target.cores)
    mr = knob("gemm.rows", [r for r in range(1, 17) if r * nvec + nvec + 1 <= regs], most)
    if not pack:
        mr = min(mr, const_int(M) or mr)
    if units is not None:
        Bp, N, nr, bb = B, units, const_int(B.shape[-1]), tuple(B.shape[:-3])
    else:
        Bp = pack_b(B, nr, f"{name}_Bp", trans_b) if pack else None
        N, bb = (B.shape[-2] if trans_b else B.shape[-1]), tuple(B.shape[:-2])
    # A is read where it is unless it is read many times from far away: MR rows at their
    # stride are MR streams the prefetchers follow, and packing costs a pass over A per call
    # (ConvNeXt's 3136x384 activations: a third of the product's time). Each group of column
    # panels reads all of A: with several groups and an A past half the L2, packed panels
    # (contiguous) pay (1024^3: 210 against 168 GFLOP/s read in place). A of unknown size (a
    # dynamic batch or sequence) counts as large. Its last block's rows are clamped,
    # min(i, M - 1), as with M known: the lowering proves those reads in bounds (the FMAs
    # unguarded) and the fused loop's index folds back (ember.loop.passes.index_prefix), where
    # packing A was a scalar pass of masked loads per call: BERT's attention products with a
    # dynamic sequence ran 2.5-3.5x their static time packed, 1.1x in place.
    direct_a = pack and (
        _column_groups(N, K, nr, A.dtype, target) == 1
        or (_nbytes(A.shape[-2:], A.dtype) or math.inf) <= target.l2_bytes // 2)
    if pack:
        direct_a = not knob("gemm.pack_a", (False, True), not direct_a)
    Ap = pack_a(A, mr, f"{name}_Ap") if pack and not direct_a else None
    k = te.reduce_axis(K, "k")
    m = const_int(M)
    # the last block's rows past M read the last row (never stored): no guard on the FMAs
    row = (lambda i: i) if mr == 1 or (m is not None and m % mr == 0) else (lambda i: min_(i, M - 1))

    def c(*idx):
        *b, i, j = idx
        ia, ib = _batch_index(tuple(ba), tuple(b)), _batch_index(bb, tuple(b))
        if not pack:
            return te.sum(A[(*ia, i, k)] * (B[(*ib, j, k)] if trans_b else B[(*ib, k, j)]), axis=k)
        a = A[(*ia, row(i), k)] if direct_a else Ap[(*ia, i // mr, k, i % mr)]
        b_ = Bp[(*ib, j // nr, k, j % nr)]
        return te.sum(a * b_ if dot is None else intrinsics.call(dot, a, b_), axis=k)
    parts = {"kind": "gemm", "Ap": Ap, "Bp": Bp if units is None else None, "mr": mr, "nr": nr,
             "inline": tuple(inline)}
    C = te.compute((*batch, M, N), c, name, attrs=parts)
    return C, parts


def block_rows(rows, most: int, others: int, threads: int) -> int:
    """The row block (MR) of a product with ``rows`` rows (None: symbolic): at most ``most`` and
    at least 3/4 of it (fewer accumulators, more loads per FMA), or ``rows`` itself when fewer.
    Each block's FMAs run over all its rows, padding included, and the parallel units (blocks
    times ``others``: batch and column groups) split over ``threads``: the block whose thread
    share, ``ceil(units / threads) * (MR + 1)`` (the one: a block's fixed cost, B's loads and
    the write-back), is least, the taller on ties. A sequence of 197 (ViT-B/16) took 15 blocks
    of 14 rows, 13 of them padding, 8 and 7 per core; 18 of 11 ran its products 1.09x faster,
    BERT's 128 rows in blocks of 13 (not 14) 1.08x."""
    if rows is None:
        return most
    choices = [r for r in range(max(1, -(-3 * most // 4)), most + 1)] + ([rows] if rows < most else [])

    def cost(r):
        return -(-(-(-rows // r) * others) // threads) * (r + 1), -r
    return min(choices, key=cost)


# vector accumulators a one-row block keeps in flight (the FMA's latency times its throughput,
# with room to spare: 4 x 2 on Zen and Intel cores)
ROW_ACCUMULATORS = 8

# rows below which a product over a symbolic row count runs one row at a time: each row then
# reads B's panels from L2 again, so past a few rows the MR-row block wins despite its padding
# (768x3072: one row 3.1x faster, four 1.4x, eight 0.8x; a 256-wide model's products still win
# at eight)
FEW_ROWS = 6


def few_rows_variant(C: te.Tensor) -> tuple | None:
    """``(condition, decisions)`` of a second kernel for a product whose row count is symbolic,
    for the calls with only a few rows: a decoding step (one token) runs products of one row,
    and the generic kernel's ``MR``-row block would do ``MR`` times their FMAs on padding. One
    row at a time, reading A in place, does only the rows' work. None when the rows are static
    or the block is one row already (or ``C`` is no packed product)."""
    parts = getattr(C.op, "attrs", None) or {}
    if parts.get("kind") != "gemm" or const_int(C.shape[-2]) is not None or parts["mr"] == 1:
        return None
    M = C.shape[-2]
    return M < min(FEW_ROWS, parts["mr"]), {"gemm.rows": 1, "gemm.pack_a": False}


def _nbytes(shape, dtype: str):
    """Bytes of a tensor of ``shape``, or None when a size is symbolic."""
    dims = [const_int(d) for d in shape]
    return None if None in dims else math.prod(dims) * dt.nbytes(dtype)


def _panels_per_group(nr: int, K, dtype: str, target) -> int:
    """Column panels (``nr`` x ``K``) that fit in half the L2 together, at least 1."""
    return max(1, (target.l2_bytes // 2) // (nr * (const_int(K) or 1) * dt.nbytes(dtype)))


def _column_groups(N, K, nr: int, dtype: str, target) -> int:
    """How many groups of column panels the GEMM schedule makes (1 when symbolic)."""
    n = const_int(N)
    if n is None:
        return 1
    panels = -(-n // nr)
    return panels // _group(panels, _panels_per_group(nr, K, dtype, target))


def _group(panels, most: int):
    """How many column panels to take per group: at most ``most``, dividing ``panels`` when
    it is known (a partial last group would guard every tile with a bounds check); None (one
    group of all) when the panel count is symbolic, for the same reason."""
    if panels is None:
        return None
    return max((g for g in range(1, min(most, panels) + 1) if panels % g == 0), default=1)


def schedule_gemm(s: Schedule, C: te.Tensor, out: te.Tensor = None, target=None) -> Schedule:
    """The packed-GEMM schedule (see the module docstring) of a :func:`matmul_compute` stage
    ``C`` written back through ``out`` (``C``, or an inlined elementwise epilogue of its shape
    applied to the register block as it is stored)."""
    target = host(target)
    out = C if out is None else out
    parts = C.op.attrs
    lanes = vector_lanes(target, C.dtype)
    mr, nr = parts["mr"], parts["nr"]
    Ap, Bp = parts["Ap"], parts["Bp"]
    for T in parts.get("inline", ()):
        s[T].compute_inline()
    CL = s.cache_write(C, "local") if out is C else C
    so = s[out]
    *batch, i, j = so.leaf
    # one row (a decoding step's products): the block spans several column panels, each k's
    # broadcast serving all of them, so that enough FMA chains are in flight (one panel of two
    # vectors is two chains, bound by the FMA's latency); a count of panels dividing theirs, so
    # that no block reads past the packed weights
    width = nr
    if mr == 1:
        cols = const_int(C.shape[-1])
        nvec = max(1, nr // lanes)
        if cols is not None:
            panels = -(-cols // nr)
            fits = [p for p in range(1, panels + 1) if panels % p == 0 and p * nvec <= ROW_ACCUMULATORS]
            width = nr * knob("gemm.row_panels", fits, max(fits))
    io, jo, ii, ji = so.tile(i, j, mr, width)
    # a group of B panels that fits in L2 is reused by every row block before the next group:
    # each core streams its A panels past L2-resident B instead of all of B past each A panel
    group = _group(const_int(jo.extent), _panels_per_group(width, C.op.reduce_axis[0].extent, C.dtype, target))
    if group is not None:
        panels = const_int(jo.extent)
        group = knob("gemm.panel_group", [g for g in range(1, min(panels, 64) + 1) if panels % g == 0], group)
    if mr == 1:
        # rows one at a time (a decoding step's one row, or a few): every (row, column block)
        # is a unit of parallel work, so that one row still runs on all cores whether its
        # count is known or not
        so.reorder(*batch, io, jo, ii, ji)
        rows = jo = so.fuse(*batch, io, jo)
    elif group is not None:
        jc, jo = so.split(jo, factor=group)
        so.reorder(*batch, jc, io, jo, ii, ji)
        rows = so.fuse(*batch, jc, io)
    else:
        so.reorder(*batch, io, jo, ii, ji)
        rows = so.fuse(*batch, io) if batch else io  # (a symbolic count of column panels)
    so.parallel(rows)
    # the write-back (with its epilogue) runs a loop over the block's rows, not MR copies of
    # it: the accumulators still stay in registers through the k loop (LLVM promotes them
    # there), and a GELU epilogue unrolled 14 times was a third of a product's LLVM time
    jv_o, jv_i = so.split(ji, factor=lanes)
    so.unroll(jv_o)
    so.vectorize(jv_i)
    # micro-kernel: k outermost, the MR x NR block unrolled into registers
    st = s[CL]
    st.compute_at(so, jo)
    *cb, ci, cj, ck = st.leaf
    _, ci = st.split(ci, factor=mr)  # one block in the tile: a constant extent to unroll
    _, cj = st.split(cj, factor=width)  # (also when the bounds of a symbolic size are not known)
    st.reorder(ck, *cb, ci, cj)
    st.unroll(ci)
    cjo, cji = st.split(cj, factor=lanes)
    st.unroll(cjo)
    st.vectorize(cji)
    # A and B panels: packed once for the whole call, in parallel
    for P in (Ap, Bp):
        if P is None:
            continue
        sp = s[P]
        *outer, pk, pi = sp.leaf
        sp.parallel(sp.fuse(*outer) if len(outer) > 1 else outer[0])
        if P is Bp:
            sp.vectorize(pi)
    return s


def schedule_matmul(s: Schedule, C: te.Tensor, parts: dict = None, target=None) -> Schedule:
    """The default packed-GEMM schedule of ``C`` (its parts are in ``C.op.attrs``)."""
    return schedule_gemm(s, C, C, target)


def dot_compute(A: te.Tensor, B: te.Tensor, target=None, name: str = "C",
                batch: tuple = None) -> te.Tensor:
    """C = A @ B^T for A (..., M, K) with few rows and B (..., N, K): every output is a dot
    product of two contiguous rows, kept as one partial sum per vector lane
    (``C_part[..., m, n, l]``) and then combined. No packing: for a handful of rows the
    packed panels would cost as much as the product."""
    lanes = vector_lanes(host(target), A.dtype)
    *ba, M, K = A.shape
    bb = tuple(B.shape[:-2])
    batch = tuple(ba) if batch is None else tuple(batch)
    N = B.shape[-2]
    width = const_int(K)
    k = te.reduce_axis(_ceil_div(K, lanes), "k")

    def part(*idx):
        *b, m, n, lane = idx
        ia, ib = _batch_index(tuple(ba), tuple(b)), _batch_index(bb, tuple(b))
        kk = k.var * lanes + lane
        v = A[(*ia, m, kk)] * B[(*ib, n, kk)]
        return te.sum(v if width is not None and width % lanes == 0 else select(kk < K, v, _zero(A.dtype)),
                      axis=k)
    P = te.compute((*batch, M, N, lanes), part, f"{name}_part")
    ln = te.reduce_axis(lanes, "l")
    return te.compute((*batch, M, N), lambda *i: te.sum(P[(*i, ln.var)], axis=ln), name,
                      attrs={"kind": "dot", "part": P})


def schedule_dot(s: Schedule, C: te.Tensor, out: te.Tensor = None, target=None) -> Schedule:
    """Schedule a :func:`dot_compute` stage: blocks of columns in parallel; for each, all
    rows x ``nb`` columns of lane partials in registers, so one vector of A serves ``nb``
    columns and one of B serves all rows."""
    target = host(target)
    out = C if out is None else out
    P = C.op.attrs["part"]
    M = const_int(C.shape[-2]) or 1
    nb = max(1, min(12 // M, 4))
    CL = s.cache_write(C, "local") if out is C else C
    so = s[out]
    *batch, m, n = so.leaf
    no, ni = so.split(n, factor=nb)
    so.reorder(*batch, no, m, ni)
    block = so.fuse(*batch, no) if batch else no
    so.parallel(block)
    # readers first: the lane partials are read by the combined sums
    s[CL].compute_at(so, block)
    sp = s[P]
    sp.compute_at(so, block)
    *pb, pm, pn, pl, pk = sp.leaf
    sp.reorder(pk, *pb, pm, pn, pl)
    if M <= 8:
        sp.unroll(pm)
    sp.unroll(pn)
    sp.vectorize(pl)
    return s


def matmul(M: int, N: int, K: int, dtype: str = "float32", target=None, trans_b: bool = False):
    """A (M, K) @ B (K, N) -> C (M, N) with the default schedule; returns (schedule, [A, B, C])."""
    target = host(target)
    A = te.placeholder((M, K), dtype, "A")
    B = te.placeholder((N, K) if trans_b else (K, N), dtype, "B")
    C, parts = matmul_compute(A, B, target, "C", trans_b)
    s = Schedule(C)
    schedule_matmul(s, C, parts, target)
    return s, [A, B, C]


def batch_matmul(batch: int, M: int, N: int, K: int, dtype: str = "float32", target=None):
    """A (b, M, K) @ B (b, K, N) -> C (b, M, N): the same packed kernel per batch, batches and
    row blocks in parallel."""
    target = host(target)
    A = te.placeholder((batch, M, K), dtype, "A")
    B = te.placeholder((batch, K, N), dtype, "B")
    C, parts = matmul_compute(A, B, target, "C")
    s = Schedule(C)
    schedule_matmul(s, C, parts, target)
    return s, [A, B, C]
