"""Packed dot products (bf16 pairs, uint8 x int8 quads) in the packed GEMM, against numpy:
with the CPU's instruction where the host has it, and the portable sequence on a CPU without."""
import ml_dtypes
import numpy as np
import pytest

import ember
from ember.codegen.llvm import emit_llvm
from ember.driver import lower_kernel
from ember.errors import DTypeError
from ember.kernels.matmul import matmul_compute, micro_tile, schedule_gemm
from ember.loop import compute as te
from ember.loop import intrinsics, parse
from ember.loop.schedule import Schedule
from ember.target import Target

RNG = np.random.default_rng(3)
HOST = Target.host()
PORTABLE = Target.from_string("llvm -mcpu=haswell")  # AVX2: no BF16 or VNNI instructions


def _operands(name, M, N, K):
    if name == "dot_bf16x2":
        a = RNG.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
        b = RNG.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
        return a, b, a.astype(np.float32) @ b.astype(np.float32)
    a = RNG.integers(0, 256, (M, K)).astype(np.uint8 if name != "dot_i16x2" else np.int16)
    top = 64 if name == "dot_u8i7x4" else 128  # (its contract: pairs that fit int16)
    b = RNG.integers(-top, top, (K, N)).astype(np.int8 if name != "dot_i16x2" else np.int16)
    return a, b, a.astype(np.int32) @ b.astype(np.int32)


def _packed_words(b, nr, g):
    """B (K, N) in panels (N/nr, K/g, nr) of int32 words, g values of one column each."""
    K, N = b.shape
    nb = -(-N // nr)
    p = np.zeros((nb * nr, K), b.dtype)
    p[:N] = b.T
    p = np.ascontiguousarray(p.reshape(nb, nr, K // g, g).transpose(0, 2, 1, 3))
    return p.view(np.int32).reshape(nb, K // g, nr)


def _product(name, M, N, K, target):
    g = intrinsics.PACKED_DOTS[name][2]
    _, nr = micro_tile(target, "int32")
    nb = -(-N // nr)
    A = te.placeholder((M, K // g), "int32", "A")
    B = te.placeholder((nb, K // g, nr), "int32", "B")
    C, _ = matmul_compute(A, B, target, units=N, dot=name)
    s = Schedule(C)
    schedule_gemm(s, C, target=target)
    return s, [A, B, C], nr, g


@pytest.mark.parametrize("name", list(intrinsics.PACKED_DOTS))
@pytest.mark.parametrize("target", [HOST, PORTABLE], ids=["host", "avx2"])
@pytest.mark.parametrize("M,N,K", [(37, 70, 64), (1, 32, 16), (130, 48, 36)])
def test_packed_dot_product_matches_numpy(name, target, M, N, K):
    if target is PORTABLE and not {"avx2", "fma"} <= HOST.feature_set:
        pytest.skip("the host cannot run AVX2 code")
    s, args, nr, g = _product(name, M, N, K, target)
    a, b, ref = _operands(name, M, N, K)
    mod = ember.build(s, args, "k", target=target)
    out = np.zeros((M, N), ref.dtype)
    mod["k"](np.ascontiguousarray(a).view(np.int32), _packed_words(b, nr, g), out)
    if ref.dtype == np.int32:
        np.testing.assert_array_equal(out, ref)  # integer products are exact
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    text = lower_kernel(*_product(name, M, N, K, target)[:2], "k").script()
    assert parse(text).script() == text  # the text form prints and parses the dots


@pytest.mark.parametrize("name,feature,insn", [("dot_bf16x2", "avx512bf16", "dpbf16ps"),
                                               ("dot_u8i8x4", "avx512vnni", "vpdpbusd")])
def test_the_instruction_is_named_only_where_the_cpu_has_it(name, feature, insn):
    with_it = Target.from_string("llvm -mcpu=znver4 -mattr=+avx512vnni,+avx512bf16")
    for target, expect in ((with_it, True), (PORTABLE, False)):
        s, args, _, _ = _product(name, 32, 32, 32, target)
        ir = str(emit_llvm([lower_kernel(s, args, "k")], target))
        assert (insn in ir) is expect, (target, feature)


def test_the_seven_bit_dot_is_vnni_where_it_exists_and_pmaddubsw_on_avx2():
    vnni = Target.from_string("llvm -mcpu=znver4 -mattr=+avx512vnni")
    s, args, _, _ = _product("dot_u8i7x4", 32, 32, 32, vnni)
    assert "vpdpbusd" in str(emit_llvm([lower_kernel(s, args, "k")], vnni))
    s, args, _, _ = _product("dot_u8i7x4", 32, 32, 32, PORTABLE)
    ir = str(emit_llvm([lower_kernel(s, args, "k")], PORTABLE))
    assert "pmadd.ub.sw" in ir and "vpdpbusd" not in ir


def test_packed_dot_takes_int32_words():
    with pytest.raises(DTypeError, match="int32 words"):
        intrinsics.call("dot_u8i8x4", te.placeholder((4,), "float32", "x")[0], 1)


def test_the_int16_pair_dot_is_pmaddwd_on_avx2():
    s, args, _, _ = _product("dot_i16x2", 32, 32, 32, PORTABLE)
    ir = str(emit_llvm([lower_kernel(s, args, "k")], PORTABLE))
    assert "pmadd.wd" in ir and "pmadd.ub.sw" not in ir
