"""gpu_weights: on a GPU target a dense product by a constant weight reads it transposed (as a
matmul by (K, N), neighbouring threads neighbouring columns); the CPU keeps the dense."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ember.compiler.cuda import compile_cuda, gpu_groups
from ember.runtime.gpu_executable import EmulatedDevice


def _gemm_model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((24, 40)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "b")
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 40])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 24])], [w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), rng


def test_a_dense_by_constant_weights_becomes_a_matmul_on_a_gpu_and_keeps_its_result():
    model, rng = _gemm_model()
    groups = [n for n, _ in gpu_groups(model, "cuda")]
    assert any("matmul" in n for n in groups) and not any("dense" in n for n in groups)
    x = rng.standard_normal((6, 40)).astype(np.float32)
    w = numpy_helper.to_array(model.graph.initializer[0])
    b = numpy_helper.to_array(model.graph.initializer[1])
    got = compile_cuda(model, device=EmulatedDevice()).run(x)[0]
    np.testing.assert_allclose(got, x @ w.T + b, rtol=1e-5, atol=1e-5)


def test_the_cpu_keeps_the_dense():
    from ember.compiler.compile import _optimize
    from ember.frontend.onnx.importer import from_onnx
    from ember.graph.ir import Module
    from ember.graph.passes import PassContext

    model, _ = _gemm_model()
    ctx = PassContext(opt_level=3, config={"target": None}, disabled={"pack_matmul_weights"})
    mod, _ = _optimize(Module({"main": from_onnx(model).main}), ctx)
    assert any("dense" in n for n, _ in mod.functions if n != "main")
