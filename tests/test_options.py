"""The one options value (``CompileOptions``) and target kinds, at the front door."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ember
from ember.errors import ArgumentError, TargetError
from ember.options import CompileOptions
from ember.target import CudaTarget, Target, as_target


def _relu_model():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu0")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_unknown_keyword_names_the_closest_option():
    with pytest.raises(ArgumentError, match="'input_shape' \\(did you mean 'input_shapes'\\?\\)"):
        ember.compile(_relu_model(), input_shape={"x": (2, 3)})


def test_bad_values_are_argument_errors():
    with pytest.raises(ArgumentError, match="opt_level"):
        CompileOptions.create(opt_level=5)
    with pytest.raises(ArgumentError, match="input_shapes"):
        CompileOptions.create(input_shapes={"x": ("a", 3)})
    with pytest.raises(ArgumentError, match="not both"):
        ember.compile(_relu_model(), "llvm", options=CompileOptions.create())


def test_options_value_compiles_like_the_keywords():
    opts = CompileOptions.create(None, 2, name="tiny", disabled_passes=["cse"], cache=False)
    assert opts.target == Target.host() and opts.disabled_passes == frozenset({"cse"})
    exe = ember.compile(_relu_model(), options=opts)
    x = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    np.testing.assert_array_equal(exe.run(x)[0], np.maximum(x, 0))
    assert opts.replace(opt_level=1).opt_level == 1 and opts.opt_level == 2  # (immutable)


def test_target_kinds_parse():
    t = as_target("cuda -arch=sm_90")
    assert isinstance(t, CudaTarget) and t.kind == "cuda" and t.compute_capability == (9, 0)
    assert t.max_shared_memory_per_block == 227 * 1024 and t.warp_size == 32 and str(t) == "cuda -arch=sm_90"
    assert as_target("cuda").arch == "sm_80"
    assert as_target("llvm").kind == "llvm" and as_target(None) == Target.host()
    with pytest.raises(TargetError, match="unknown CUDA architecture 'sm_12'"):
        as_target("cuda -arch=sm_12")
    with pytest.raises(TargetError, match="-arch=sm_XX"):
        as_target("cuda -mcpu=znver4")
    with pytest.raises(TargetError, match="unknown target kind 'rocm'"):
        as_target("rocm")


def test_a_cuda_target_without_a_gpu_is_a_target_error_naming_what_is_missing():
    from ember.runtime.cuda_driver import cuda_unavailable

    if cuda_unavailable() is None:  # (a GPU host: the same call compiles and runs)
        x = np.array([[-1.0, 2.0, 0.5], [3.0, -4.0, 5.0]], np.float32)
        np.testing.assert_array_equal(ember.compile(_relu_model(), "cuda -arch=sm_90").run(x)[0], np.maximum(x, 0))
        return
    with pytest.raises(TargetError, match="GPU"):
        ember.compile(_relu_model(), "cuda -arch=sm_90")


def test_cpu_only_front_doors_refuse_a_cuda_target_and_say_what_runs_on_the_gpu():
    from ember.target import check_buildable

    with pytest.raises(TargetError, match="CPU only so far.*ember.compile"):
        check_buildable(as_target("cuda"))


def test_schedules_register_per_kind():
    from ember.graph.ops.registry import get_op, set_schedule

    with pytest.raises(ArgumentError, match="no target kind 'gpu'"):
        set_schedule("nn.softmax", "gpu", lambda *a: None)
    assert "llvm" in get_op("nn.softmax").schedule and "cuda" not in get_op("nn.softmax").schedule


def test_cli_target_kind_error(tmp_path, capsys):
    from ember.cli import main

    path = str(tmp_path / "m.onnx")
    onnx.save(_relu_model(), path)
    assert main(["compile", path, "--target", "cuda -arch=sm_90", "-o", str(tmp_path / "m.so")]) != 0
    assert "GPU" in capsys.readouterr().err  # (no GPU here; on a GPU host: its exports are not built yet)


def test_a_gpu_target_reads_no_cpu_tuning_database(monkeypatch, tmp_path):
    from ember.runtime.cuda_driver import cuda_unavailable

    monkeypatch.setenv("EMBER_TUNING_DB", str(tmp_path / "never.db"))
    if cuda_unavailable() is None:
        ember.compile(_relu_model(), "cuda -arch=sm_90")
    else:
        with pytest.raises(TargetError, match="GPU"):
            ember.compile(_relu_model(), "cuda -arch=sm_90")
    assert not (tmp_path / "never.db").exists()
    with pytest.raises(TargetError, match="CPU only so far"):
        ember.build(None, target="cuda")
    with pytest.raises(ArgumentError, match="tuning_records"):
        CompileOptions.create(tuning_db="x.db")


def test_precision_is_checked_against_the_target():
    from ember.errors import TargetError

    with pytest.raises(ArgumentError, match="precision must be one of"):
        CompileOptions.create(None, precision="int3")
    with pytest.raises(TargetError, match="avx512bf16"):
        CompileOptions.create("llvm -mcpu=haswell", precision="bf16")
    assert CompileOptions.create("llvm -mcpu=znver4", precision="bfloat16").precision == "bf16"


def test_bf16_precision_runs_products_in_bfloat16_with_float32_sums():
    from ember.target import Target

    if not Target.host().has_feature("avx512bf16"):
        pytest.skip("the host has no AVX512-BF16")
    import onnx
    from onnx import TensorProto, helper as h, numpy_helper as nh

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"])], "g",
                     [h.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, None)], [nh.from_array(w, "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    x = rng.standard_normal((40, 64)).astype(np.float32)
    exe = ember.compile(m, precision="bf16")
    import ml_dtypes

    rounded = x.astype(ml_dtypes.bfloat16).astype(np.float32) @ w.astype(ml_dtypes.bfloat16).astype(np.float32)
    y = exe.run(x)[0]
    np.testing.assert_allclose(y, rounded, rtol=1e-5, atol=1e-4)  # the products of the rounded operands
    assert np.abs(y - x @ w).max() > 1e-4  # (and not float32's: the option took effect)
    assert any("matmul_packed" in k[2] for k in exe.kernel_sources)
