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

from ..loop import compute as te
from ..loop import dtype as dt
from ..loop.expr import IntImm, select
from ..loop.schedule import Schedule
from .common import host, vector_lanes


def micro_tile(target, dtype: str = "float32") -> tuple[int, int]:
    """(MR, NR) for the target: NR = 2 vectors, MR fills the register file with accumulators."""
    lanes = vector_lanes(target, dtype)
    regs = 32 if lanes * 32 >= 512 else 16  # AVX-512 has 32 vector registers, AVX2 16
    nr_vecs = 2
    mr = (regs - nr_vecs - 2) // nr_vecs  # accumulators + B vectors + a broadcast
    return min(mr, 14), nr_vecs * lanes


def _zero(dtype: str):
    return 0.0 if "float" in dtype else 0


def pack_b(B: te.Tensor, nr: int, name: str = "Bp", trans: bool = False) -> te.Tensor:
    """Pack B (..., K, N) -- or (..., N, K) with ``trans`` -- into zero-padded column panels
    (..., N/nr, K, nr)."""
    *batch, d0, d1 = B.shape
    K, N = (d1, d0) if trans else (d0, d1)
    n = N.value
    panels = -(-n // nr)

    def f(*idx):
        *b, jo, k, ji = idx
        j = jo * nr + ji
        v = B[(*b, j, k)] if trans else B[(*b, k, j)]
        return v if n % nr == 0 else select(j < n, v, _zero(B.dtype))
    return te.compute((*batch, panels, K, nr), f, name)


def pack_a(A: te.Tensor, mr: int, name: str = "Ap") -> te.Tensor:
    """Pack A (..., M, K) into zero-padded row panels (..., M/mr, K, mr)."""
    *batch, M, K = A.shape
    m = M.value

    def f(*idx):
        *b, io, k, ii = idx
        i = io * mr + ii
        v = A[(*b, i, k)]
        return v if m % mr == 0 else select(i < m, v, _zero(A.dtype))
    return te.compute((*batch, -(-m // mr), K, mr), f, name)


def matmul_compute(A: te.Tensor, B: te.Tensor, target=None, name: str = "C",
                   trans_b: bool = False) -> tuple[te.Tensor, dict]:
    """C = A @ B (or A @ B^T) through packed panels; A may have leading batch dims, which B
    has too or not at all. Returns C and the stages the schedule needs."""
    target = host(target)
    mr, nr = micro_tile(target, A.dtype)
    *batch, M, K = A.shape
    nb = len(B.shape) - 2
    Bp = pack_b(B, nr, "Bp", trans_b)
    Ap = pack_a(A, mr, "Ap")
    N = B.shape[-2] if trans_b else B.shape[-1]
    k = te.reduce_axis(K, "k")

    def c(*idx):
        *b, i, j = idx
        bb = tuple(b[len(b) - nb:]) if nb else ()
        return te.sum(Ap[(*b, i // mr, k, i % mr)] * Bp[(*bb, j // nr, k, j % nr)], axis=k)
    C = te.compute((*batch, M, N), c, name)
    return C, {"Ap": Ap, "Bp": Bp, "mr": mr, "nr": nr}


def schedule_matmul(s: Schedule, C: te.Tensor, parts: dict, target=None):
    """The default packed-GEMM schedule (see the module docstring)."""
    target = host(target)
    lanes = vector_lanes(target, C.dtype)
    mr, nr = parts["mr"], parts["nr"]
    Ap, Bp = parts["Ap"], parts["Bp"]
    CL = s.cache_write(C, "local")
    *batch, i, j = s[C].leaf
    io, jo, ii, ji = s[C].tile(i, j, mr, nr)
    # a group of B panels that fits in L2 is reused by every row block before the next group:
    # each core streams its A panels past L2-resident B instead of all of B past each A panel
    panel_bytes = nr * Bp.shape[-2].value * dt.nbytes(C.dtype)
    jc, jo = s[C].split(jo, factor=max(1, (target.l2_bytes // 2) // panel_bytes))
    s[C].reorder(*batch, jc, io, jo, ii, ji)
    rows = s[C].fuse(*batch, jc, io)
    s[C].parallel(rows)
    s[C].unroll(ii)
    jv_o, jv_i = s[C].split(ji, factor=lanes)
    s[C].unroll(jv_o)
    s[C].vectorize(jv_i)
    # micro-kernel: k outermost, the MR x NR block unrolled into registers
    st = s[CL]
    st.compute_at(s[C], jo)
    *cb, ci, cj, ck = st.leaf
    st.reorder(ck, *cb, ci, cj)
    st.unroll(ci)
    cjo, cji = st.split(cj, factor=lanes)
    st.unroll(cjo)
    st.vectorize(cji)
    # A panels: packed once for the whole call, in parallel
    sa = s[Ap]
    *outer, pk, pi = sa.leaf
    sa.parallel(sa.fuse(*outer) if len(outer) > 1 else outer[0])
    # B panels: packed once for the whole call, in parallel
    sb = s[Bp]
    *outer, pk, pj = sb.leaf
    sb.parallel(sb.fuse(*outer) if len(outer) > 1 else outer[0])
    sb.vectorize(pj)
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
