"""Weights quantized in blocks, decoded inside the packed GEMM (``ember.kernels.weight_only``):
against numpy, at static and symbolic row counts (one row: a decoding step), for 2, 4 and 8
bits, with K not a multiple of the block and N not a multiple of the panel."""
import numpy as np
import pytest

import ember
from ember.kernels import weight_only
from ember.kernels.matmul import matmul_compute, micro_tile, schedule_gemm
from ember.loop import compute as te
from ember.loop.schedule import Schedule
from ember.target import Target

RNG = np.random.default_rng(5)


def _panels(v, nr):
    """(N, X) -> (N/nr, X, nr), zero past N (what nn.pack_matmul_weight makes)."""
    N, X = v.shape
    nb = -(-N // nr)
    p = np.zeros((nb * nr, X), v.dtype)
    p[:N] = v
    return np.ascontiguousarray(p.reshape(nb, nr, X).transpose(0, 2, 1))


@pytest.mark.parametrize("bits,block,K,N,M", [(4, 32, 100, 40, 1), (4, 16, 64, 33, "m"), (2, 16, 48, 32, 7),
                                               (8, 32, 64, 20, "m")])
def test_packed_weights_decode_in_the_micro_kernel(bits, block, K, N, M):
    target = Target.host()
    nr = micro_tile(target)[1]
    per, blocks = 8 // bits, -(-K // block)
    codes = RNG.integers(0, 1 << bits, (N, blocks * block)).astype(np.uint8)
    codes[:, K:] = 0
    scale = (RNG.random((N, blocks)) * 0.1).astype(np.float32)
    zero = RNG.integers(0, 1 << bits, (N, blocks)).astype(np.float32)
    packed = np.zeros((N, blocks * block // per), np.uint8)
    for j in range(per):
        packed |= (codes[:, j::per] << (j * bits)).astype(np.uint8)
    rows = M  # (a string: a symbolic size)
    A = te.placeholder((rows, K), "float32", "A")
    Cq = te.placeholder((-(-N // nr), blocks * block // per, nr), "uint8", "codes")
    S = te.placeholder((-(-N // nr), blocks, nr), "float32", "scales")
    O = te.placeholder((-(-N // nr), blocks, nr), "float32", "offsets")
    W = weight_only.packed_weight(Cq, S, O, bits, block, K)
    C, _ = matmul_compute(A, W, target, units=N, inline=(W,))
    s = Schedule(C)
    schedule_gemm(s, C, C, target)
    f = ember.build(s, [A, Cq, S, O, C], "nbits")
    w = ((codes[:, :K].astype(np.float32) - np.repeat(zero, block, axis=1)[:, :K])
         * np.repeat(scale, block, axis=1)[:, :K]).T
    for m in ((M,) if M != "m" else (1, 3, 29)):
        a = RNG.standard_normal((m, K)).astype(np.float32)
        c = np.zeros((m, N), np.float32)
        f["nbits"](a, _panels(packed, nr), _panels(scale, nr), _panels(-zero * scale, nr), c)
        np.testing.assert_allclose(c, a @ w, rtol=1e-4, atol=1e-4)
