"""Matrix multiplication: packed operands and a register-blocked micro-kernel.

The structure is the classic packed GEMM (Goto; BLIS):

- ``B`` is packed into panels of ``NR`` columns, ``Bp[jo, k, ji]`` (zero-padded), so the
  micro-kernel reads it linearly; for constant weights the graph compiler folds this stage.
- ``A`` is packed into panels of ``MR`` rows, ``Ap[io, k, ii]``, one panel per row block,
  computed at that block so it stays in L1 while every B panel streams past it.
- the micro-kernel keeps an ``MR x NR`` block of ``C`` in vector registers (a local buffer
  whose loops are unrolled and vectorized) and, for each ``k``, broadcasts ``MR`` values of A
  against ``NR / lanes`` vectors of B: ``MR * NR / lanes`` independent FMAs;
- row blocks run in parallel on all cores, one contiguous chunk per core.
"""
from __future__ import annotations

from ..loop import compute as te
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


def pack_b(B: te.Tensor, nr: int, name: str = "Bp", trans: bool = False) -> te.Tensor:
    """Pack B (K, N) -- or (N, K) with ``trans`` -- into zero-padded column panels [N/nr, K, nr]."""
    K, N = (B.shape[1], B.shape[0]) if trans else B.shape
    n = N.value
    panels = -(-n // nr)

    def f(jo, k, ji):
        j = jo * nr + ji
        v = B[j, k] if trans else B[k, j]
        return v if n % nr == 0 else select(j < n, v, 0.0 if "float" in B.dtype else 0)
    return te.compute((panels, K, nr), f, name)


def matmul_compute(A: te.Tensor, B: te.Tensor, target=None, name: str = "C",
                   trans_b: bool = False) -> tuple[te.Tensor, dict]:
    """C = A @ B (or A @ B.T) through packed panels; returns C and the stages to schedule."""
    target = host(target)
    mr, nr = micro_tile(target, A.dtype)
    M, K = A.shape
    m = M.value
    Bp = pack_b(B, nr, "Bp", trans_b)
    zero = 0.0 if "float" in A.dtype else 0
    Ap = te.compute((-(-m // mr), K, mr),
                    lambda io, k, ii: A[io * mr + ii, k] if m % mr == 0
                    else select(io * mr + ii < m, A[io * mr + ii, k], zero), "Ap")
    N = B.shape[0] if trans_b else B.shape[1]
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(Ap[i // mr, k, i % mr] * Bp[j // nr, k, j % nr], axis=k), name)
    return C, {"Ap": Ap, "Bp": Bp, "mr": mr, "nr": nr}


def schedule_matmul(s: Schedule, C: te.Tensor, parts: dict, target=None):
    """The default packed-GEMM schedule (see the module docstring)."""
    target = host(target)
    lanes = vector_lanes(target, C.dtype)
    mr, nr = parts["mr"], parts["nr"]
    Ap, Bp = parts["Ap"], parts["Bp"]
    CL = s.cache_write(C, "local")
    i, j = s[C].leaf
    io, jo, ii, ji = s[C].tile(i, j, mr, nr)
    s[C].parallel(io)
    s[C].unroll(ii)
    jv_o, jv_i = s[C].split(ji, factor=lanes)
    s[C].unroll(jv_o)
    s[C].vectorize(jv_i)
    # micro-kernel: k outermost, the MR x NR block unrolled into registers
    st = s[CL]
    st.compute_at(s[C], jo)
    ci, cj, ck = st.leaf
    st.reorder(ck, ci, cj)
    st.unroll(ci)
    cjo, cji = st.split(cj, factor=lanes)
    st.unroll(cjo)
    st.vectorize(cji)
    # A panel: packed once per row block, inside the parallel loop
    sa = s[Ap]
    sa.compute_at(s[C], io)
    # B panels: packed once for the whole call, in parallel
    sb = s[Bp]
    sb.parallel(sb.leaf[0])
    sb.vectorize(sb.leaf[2])
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
    """A (b, M, K) @ B (b, K, N) -> C (b, M, N): a register-blocked kernel per batch, batches
    and row blocks in parallel."""
    target = host(target)
    mr, nr = micro_tile(target, dtype)
    lanes = vector_lanes(target, dtype)
    A = te.placeholder((batch, M, K), dtype, "A")
    B = te.placeholder((batch, K, N), dtype, "B")
    n_pan = -(-N // nr)
    zero = 0.0 if "float" in dtype else 0
    Bp = te.compute((batch, n_pan, K, nr),
                    lambda b, jo, k, ji: B[b, k, jo * nr + ji] if N % nr == 0
                    else select(jo * nr + ji < N, B[b, k, jo * nr + ji], zero), "Bp")
    k = te.reduce_axis(K, "k")
    C = te.compute((batch, M, N), lambda b, i, j: te.sum(A[b, i, k] * Bp[b, j // nr, k, j % nr], axis=k), "C")
    s = Schedule(C)
    CL = s.cache_write(C, "local")
    b, i, j = s[C].leaf
    io, jo, ii, ji = s[C].tile(i, j, mr, nr)
    s[C].parallel(s[C].fuse(b, io))
    s[C].unroll(ii)
    jv_o, jv_i = s[C].split(ji, factor=lanes)
    s[C].vectorize(jv_i)
    st = s[CL]
    st.compute_at(s[C], jo)
    cb, ci, cj, ck = st.leaf
    st.reorder(ck, cb, ci, cj)
    st.unroll(ci)
    cjo, cji = st.split(cj, factor=lanes)
    st.unroll(cjo)
    st.vectorize(cji)
    sb = s[Bp]
    sb.parallel(sb.fuse(sb.leaf[0], sb.leaf[1]))
    sb.vectorize(sb.leaf[-1])
    return s, [A, B, C]
