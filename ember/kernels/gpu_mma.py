"""A GPU matrix product on tensor cores: C = A @ B over float16 or bfloat16 operands, float32 sums.

A block of 8 warps (4 x 2) computes a 128 x 64 tile of C. For each step of 32 along K, its 256
threads copy the tile's 128 x 32 slice of A and 32 x 64 slice of B into shared memory (each
thread 16 + 8 elements, neighbouring threads neighbouring elements), then each warp, for the two
halves of the step, reads its fragments of A (two 16 x 16) and B (four 16 x 8) from shared
memory in the lane layout of ``mma.sync.m16n8k16`` and issues 8 tensor-core products into its
32 x 32 float32 tile, held in registers. Reads past M, N or K are zeros and writes past them are
skipped, so any static size works. Batched: a batch of A's (and of B's, or one B shared by
all) is the grid's slowest axis.

The program is written in Ember's loop-IR text (as a kernel author would) and checked like
every GPU program: :mod:`ember.loop.passes.verify_threads` on the limits, ptxas in CI, and its
execution on the CPU (:mod:`ember.loop.passes.threads_on_cpu`, which runs each ``mma_sync``
through shared scratch) against numpy.
"""
from __future__ import annotations

from ..loop.parser import parse
from ..loop.stmt import PrimFunc

__all__ = ["mma_matmul", "BM", "BN", "BK"]

BM, BN, BK = 128, 64, 32  # the block's tile of C and its step along K
_WARPS_M, _WARPS_N = 4, 2  # 8 warps, each a 32 x 32 tile: 2 x 4 products of 16 x 8
_THREADS = 32 * _WARPS_M * _WARPS_N

_TEMPLATE = '''
def {name}(A: Buffer(({batch_a}{M}, {K}), "{dt}"), B: Buffer(({batch_b}{b_shape}), "{dt}"), C: Buffer(({batch_a}{M}, {N}), "{out}")):
    for bx in block_x({blocks}):
        with allocate("As", ({BM}, {BK}), "{dt}", scope="shared") as As:
            with allocate("Bs", ({BK}, {BN}), "{dt}", scope="shared") as Bs:
                for warp in thread_y({warps}):
                    for lane in thread_x(32):
                        with allocate("acc", (2, 4, 4), "float32", scope="local") as acc:
                            for ai in unrolled(32):
                                acc[ai // 16, ai // 4 % 4, ai % 4] = 0.0
                            for ko in serial({k_steps}):
                                for i in serial({a_per_thread}):
                                    As[(lane + warp * 32 + i * {threads}) // {BK}, (lane + warp * 32 + i * {threads}) % {BK}] = A.load(({batch_index}bx // {nt} % {mt} * {BM} + (lane + warp * 32 + i * {threads}) // {BK}, ko * {BK} + (lane + warp * 32 + i * {threads}) % {BK}), predicate=bx // {nt} % {mt} * {BM} + (lane + warp * 32 + i * {threads}) // {BK} < {M} and ko * {BK} + (lane + warp * 32 + i * {threads}) % {BK} < {K})
                                for j in serial({b_per_thread}):
                                    {b_copy}
                                barrier()
                                for kk in serial(2):
                                    with allocate("af", (2, 8), "{dt}", scope="local", align=16) as af:
                                        with allocate("bf", (4, 4), "{dt}", scope="local", align=16) as bf:
                                            for fa in unrolled(16):
                                                af[fa // 8, fa % 8] = As[warp // {wn} * 32 + fa // 8 * 16 + lane // 4 + fa % 8 // 2 % 2 * 8, kk * 16 + lane % 4 * 2 + fa % 2 + fa % 8 // 4 * 8]
                                            for fb in unrolled(16):
                                                bf[fb // 4, fb % 4] = Bs[kk * 16 + lane % 4 * 2 + fb % 2 + fb % 4 // 2 * 8, warp % {wn} * 32 + fb // 4 * 8 + lane // 4]
                                            for p in unrolled(8):
                                                mma_sync(acc, p * 4, af, p // 4 * 8, bf, p % 4 * 4, acc, p * 4)
                                barrier()
                            for ci in unrolled(32):
                                if bx // {nt} % {mt} * {BM} + warp // {wn} * 32 + ci // 16 * 16 + lane // 4 + ci % 4 // 2 * 8 < {M} and bx % {nt} * {BN} + warp % {wn} * 32 + ci // 4 % 4 * 8 + lane % 4 * 2 + ci % 2 < {N}:
                                    C[{batch_index}bx // {nt} % {mt} * {BM} + warp // {wn} * 32 + ci // 16 * 16 + lane // 4 + ci % 4 // 2 * 8, bx % {nt} * {BN} + warp % {wn} * 32 + ci // 4 % 4 * 8 + lane % 4 * 2 + ci % 2] = {store}
'''

# B (K, N): a thread's elements along N, neighbours neighbouring; B^T (N, K): along K
_B_COPY = ("Bs[(lane + warp * 32 + j * {threads}) // {BN}, (lane + warp * 32 + j * {threads}) % {BN}] = "
           "B.load(({batch_b_index}ko * {BK} + (lane + warp * 32 + j * {threads}) // {BN}, bx % {nt} * {BN} + "
           "(lane + warp * 32 + j * {threads}) % {BN}), predicate=ko * {BK} + (lane + warp * 32 + j * {threads}) // {BN} "
           "< {K} and bx % {nt} * {BN} + (lane + warp * 32 + j * {threads}) % {BN} < {N})")
_BT_COPY = ("Bs[(lane + warp * 32 + j * {threads}) % {BK}, (lane + warp * 32 + j * {threads}) // {BK}] = "
            "B.load(({batch_b_index}bx % {nt} * {BN} + (lane + warp * 32 + j * {threads}) // {BK}, ko * {BK} + "
            "(lane + warp * 32 + j * {threads}) % {BK}), predicate=bx % {nt} * {BN} + (lane + warp * 32 + j * {threads}) "
            "// {BK} < {N} and ko * {BK} + (lane + warp * 32 + j * {threads}) % {BK} < {K})")


def mma_matmul(name: str, batch: int, M: int, N: int, K: int, dtype: str, out_dtype: str = "float32",
               trans_b: bool = False, batched_b: bool = False) -> PrimFunc:
    """The kernel ``name(A, B, C)``: ``C[b] = A[b] @ B[b]`` (``B`` shared when not
    ``batched_b``; ``B`` stored (N, K) when ``trans_b``) for ``batch`` x M x K ``A`` of
    ``dtype`` (``float16``/``bfloat16``), C of ``out_dtype`` (float32 or ``dtype``)."""
    mt, nt = -(-M // BM), -(-N // BN)
    b_shape = f"{N}, {K}" if trans_b else f"{K}, {N}"
    fields = dict(name=name, M=M, N=N, K=K, dt=dtype, out=out_dtype, BM=BM, BN=BN, BK=BK, mt=mt, nt=nt,
                  blocks=batch * mt * nt, warps=_WARPS_M * _WARPS_N, wn=_WARPS_N, threads=_THREADS,
                  k_steps=-(-K // BK), a_per_thread=BM * BK // _THREADS, b_per_thread=BK * BN // _THREADS,
                  batch_a=f"{batch}, " if batch > 1 else "", batch_b=f"{batch}, " if batch > 1 and batched_b else "",
                  b_shape=b_shape, batch_index=f"bx // {mt * nt}, " if batch > 1 else "",
                  batch_b_index=f"bx // {mt * nt}, " if batch > 1 and batched_b else "")
    fields["b_copy"] = (_BT_COPY if trans_b else _B_COPY).format(**fields)
    acc = "acc[ci // 16, ci // 4 % 4, ci % 4]"
    fields["store"] = acc if out_dtype == "float32" else f"cast('{out_dtype}', {acc})"
    return parse(_TEMPLATE.format(**fields))
