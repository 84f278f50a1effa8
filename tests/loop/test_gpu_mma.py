"""Tensor cores in the loop IR (issue 49): a warp's ``mma_sync``, its text form and checks, the
tensor-core product of ``kernels/gpu_mma.py`` run on the CPU (fragments exchanged through shared
scratch) against numpy and assembled by ptxas, and the pass that puts a model's half-precision
products on it."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ember
import ember.runtime as rt
from ember.codegen.nvptx import assemble, ptx, ptxas_path
from ember.errors import LoweringError
from ember.kernels.gpu_mma import mma_matmul
from ember.loop import parse
from ember.loop.passes import default_pipeline
from ember.loop.passes.threads_on_cpu import threads_on_cpu
from ember.loop.passes.verify_threads import verify_threads
from ember.target import as_target

HALF = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}

# one warp: D = A B + C for a 16x16 A and a 16x8 B, each lane loading its fragments by the layout
ONE_WARP = '''
def one(A: Buffer((16, 16), "float16"), B: Buffer((16, 8), "float16"), C: Buffer((16, 8), "float32")):
    for bx in block_x(1):
        for lane in thread_x(32):
            with allocate("a", (8,), "float16", scope="local") as a:
                with allocate("b", (4,), "float16", scope="local") as b:
                    with allocate("c", (4,), "float32", scope="local") as c:
                        for e in unrolled(8):
                            a[e] = A[lane // 4 + e // 2 % 2 * 8, lane % 4 * 2 + e % 2 + e // 4 * 8]
                        for e in unrolled(4):
                            b[e] = B[lane % 4 * 2 + e % 2 + e // 2 * 8, lane // 4]
                        for e in unrolled(4):
                            c[e] = 1.0
                        mma_sync(c, 0, a, 0, b, 0, c, 0)
                        for e in unrolled(4):
                            C[lane // 4 + e // 2 * 8, lane % 4 * 2 + e % 2] = c[e]
'''


def _run(func, *arrays):
    args = [rt.array(a) for a in arrays]
    ember.build(threads_on_cpu(default_pipeline(func)))[func.name](*args)
    return args[-1].numpy()


def test_one_warp_follows_the_ptx_lane_layout():
    f = parse(ONE_WARP)
    assert "mma_sync(c, 0, a, 0, b, 0, c, 0)" in f.script() and parse(f.script()) == f
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    got = _run(f, a, b, np.zeros((16, 8), np.float32))
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32) + 1, rtol=1e-5, atol=1e-5)


def test_mma_sync_must_be_reached_by_whole_warps_on_registers():
    with pytest.raises(LoweringError, match="whole warps"):
        verify_threads(parse(ONE_WARP.replace("thread_x(32)", "thread_x(16)")))
    with pytest.raises(LoweringError, match="depends on a thread index"):
        verify_threads(parse(ONE_WARP.replace("                        mma_sync(c, 0, a, 0, b, 0, c, 0)",
                                              "                        if lane < 8:\n"
                                              "                            mma_sync(c, 0, a, 0, b, 0, c, 0)")))
    with pytest.raises(LoweringError, match="must be a local buffer"):
        verify_threads(parse(ONE_WARP.replace("mma_sync(c, 0, a, 0, b, 0, c, 0)", "mma_sync(C, 0, a, 0, b, 0, c, 0)")))


@pytest.mark.parametrize("batch,M,N,K,dtype,out,trans_b,batched_b", [
    (1, 128, 64, 32, "float16", "float32", False, False),   # one block, one step
    (1, 200, 72, 40, "bfloat16", "bfloat16", False, False),  # tails in M, N and K
    (3, 130, 70, 48, "float16", "float32", True, False),    # a batch sharing B^T
    (2, 64, 96, 64, "bfloat16", "float32", False, True),    # a batch of B's
])
def test_the_tensor_core_product_matches_numpy(batch, M, N, K, dtype, out, trans_b, batched_b):
    f = mma_matmul("mm", batch, M, N, K, dtype, out, trans_b=trans_b, batched_b=batched_b)
    verify_threads(f, 1024, 48 * 1024)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((batch, M, K) if batch > 1 else (M, K)).astype(HALF[dtype])
    b = rng.standard_normal(((batch,) if batched_b else ()) + ((N, K) if trans_b else (K, N))).astype(HALF[dtype])
    ref = np.matmul(a.astype(np.float32), np.swapaxes(b, -1, -2).astype(np.float32) if trans_b else b.astype(np.float32))
    got = _run(f, a, b, np.zeros(ref.shape, np.float32 if out == "float32" else HALF[dtype])).astype(np.float32)
    tol = 1e-4 if out == "float32" else 1e-2  # (a half result is rounded once)
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.skipif(ptxas_path() is None, reason="no ptxas: pip install nvidia-cuda-nvcc-cu12 (the test extra)")
def test_the_tensor_core_product_assembles_for_sm_80_and_sm_90():
    f = default_pipeline(mma_matmul("mm", 2, 256, 128, 64, "bfloat16", "bfloat16", trans_b=True))
    for arch in ("sm_80", "sm_90"):
        text = ptx([f], as_target(f"cuda -arch={arch}"))
        assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in text
        assert len(assemble(text, arch)) > 0


def test_a_models_half_products_run_on_tensor_cores():
    from ember.compiler.cuda import compile_cuda
    from ember.runtime.gpu_executable import EmulatedDevice

    T = TensorProto.FLOAT16
    wv = np.random.default_rng(2).standard_normal((64, 48)).astype(np.float16)
    w = numpy_helper.from_array(wv, "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "g",
                          [helper.make_tensor_value_info("x", T, [2, 40, 64])],
                          [helper.make_tensor_value_info("z", T, [2, 40, 48])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    exe = compile_cuda(model, device=EmulatedDevice())
    assert any("matmul_mma" in grp.name for grp in exe.groups)
    x = np.random.default_rng(3).standard_normal((2, 40, 64)).astype(np.float16)
    ref = np.maximum(x.astype(np.float32) @ wv.astype(np.float32), 0)
    np.testing.assert_allclose(exe.run(x)[0].astype(np.float32), ref, rtol=1e-2, atol=1e-2 * np.abs(ref).max())
    # the CPU keeps its own products: the pass is the GPU's alone
    assert ember.compile(model).run(x)[0].shape == (2, 40, 48)


@pytest.mark.parametrize("precision,half", [("bf16", ml_dtypes.bfloat16), ("fp16", np.float16)])
def test_a_float32_models_products_run_on_tensor_cores_in_a_half_precision(precision, half):
    from ember.compiler.cuda import compile_cuda
    from ember.errors import ArgumentError
    from ember.runtime.gpu_executable import EmulatedDevice

    rng = np.random.default_rng(5)
    wv = rng.standard_normal((32, 48)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1), helper.make_node("Relu", ["y"], ["z"])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [20, 48])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [20, 32])],
                          [numpy_helper.from_array(wv, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    exe = compile_cuda(model, device=EmulatedDevice(), precision=precision)
    assert any("matmul_mma" in grp.name for grp in exe.groups)
    x = rng.standard_normal((20, 48)).astype(np.float32)
    want = np.maximum(x.astype(half).astype(np.float32) @ wv.astype(half).astype(np.float32).T, 0)
    np.testing.assert_allclose(exe.run(x)[0], want, rtol=1e-5, atol=1e-4)  # (sums of the rounded values, in float32)
    assert not any("matmul_mma" in grp.name for grp in compile_cuda(model, device=EmulatedDevice()).groups)
    if precision == "fp16":
        with pytest.raises(ArgumentError, match="GPU's products"):
            ember.compile(model, precision="fp16")
