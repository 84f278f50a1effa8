"""Models compiled for the cuda kind and run by the GPU runtime's host logic (issue 49, item 4).

Without a GPU the device is :class:`EmulatedDevice`: the same program, addresses, workspace
and launches, each device kernel compiled for the CPU with its grid as loops. With one (the
tests marked ``gpu``) the same models run on it, through the CUDA driver."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.compiler.cuda import compile_cuda
from ember.errors import ArgumentError, DTypeError, LoweringError, ModelError, ShapeError, TargetError
from ember.runtime.cuda_driver import cuda_unavailable
from ember.runtime.gpu_executable import DeviceArray, EmulatedDevice

ort = pytest.importorskip("onnxruntime")
NO_GPU = cuda_unavailable()
gpu = pytest.mark.skipif(NO_GPU is not None, reason=f"no GPU: {NO_GPU}")


def _mixed(batch="n") -> onnx.ModelProto:
    """Conv + residual add, a concat (whose parts the producers write in place), a reshape
    (a view), a MatMul, a softmax (a group of several launches through workspace), a layer norm,
    and two outputs, one of them a view of an intermediate."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3, "w")
    m = numpy_helper.from_array(rng.standard_normal((64, 24)).astype(np.float32) * 0.2, "m")
    scale = numpy_helper.from_array(rng.random(24).astype(np.float32) + 0.5, "scale")
    bias = numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "bias")
    shape = numpy_helper.from_array(np.array([0, 2, 64], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x"], ["r"]),
             helper.make_node("Relu", ["r"], ["a"]),
             helper.make_node("Sigmoid", ["x"], ["s"]),
             helper.make_node("Concat", ["a", "s"], ["cat"], axis=1),
             helper.make_node("Reshape", ["cat", "shape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "m"], ["mm"]),
             helper.make_node("Softmax", ["mm"], ["sm"], axis=-1),
             helper.make_node("LayerNormalization", ["mm", "scale", "bias"], ["ln"], axis=-1)]
    g = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4, 4, 4])],
                          [helper.make_tensor_value_info("sm", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("ln", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("flat", TensorProto.FLOAT, None)], [w, m, scale, bias, shape])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _reference(model, x):
    model = onnx.ModelProto.FromString(model.SerializeToString())
    model.ir_version = min(model.ir_version, 9)  # (an older onnxruntime than onnx reads IR 9)
    return ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})


def _check(exe, model, x):
    ref = _reference(model, x)
    got = exe.run(x)
    assert [g.shape for g in got] == [r.shape for r in ref]
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


def test_a_model_runs_on_the_emulated_device_as_onnxruntime_runs_it():
    model = _mixed()
    exe = compile_cuda(model, device=EmulatedDevice(), input_shapes={"x": (3, 4, 4, 4)})
    assert exe.num_launches > len(exe.groups)  # (softmax's group is several launches)
    assert all(g.workspace for g in exe.groups if "softmax" in g.name)
    x = np.random.default_rng(0).standard_normal((3, 4, 4, 4)).astype(np.float32)
    _check(exe, model, x)
    _check(exe, model, x * 2)  # (a second run reuses the arena and the packed launches)


def test_a_cnn_runs_on_the_emulated_device(conv_net_path):
    exe = compile_cuda(conv_net_path, device=EmulatedDevice())
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    _check(exe, onnx.load(conv_net_path), x)


def test_wrong_inputs_name_the_input_and_what_was_expected():
    exe = compile_cuda(_mixed(2), device=EmulatedDevice())
    with pytest.raises(ShapeError, match="input 'x': expected shape \\(2, 4, 4, 4\\)"):
        exe.run(np.zeros((1, 4, 4, 4), np.float32))
    with pytest.raises(DTypeError, match="input 'x': expected float32"):
        exe.run(np.zeros((2, 4, 4, 4), np.float64))
    with pytest.raises(ArgumentError, match="takes 1 inputs \\(x\\), got 2"):
        exe.run(np.zeros((2, 4, 4, 4), np.float32), np.zeros(1))
    out = exe.run(x=np.ones((2, 4, 4, 4), np.float32))
    assert len(out) == 3


def test_symbolic_shapes_are_refused_with_what_to_do():
    with pytest.raises(LoweringError, match="input_shapes"):
        compile_cuda(_mixed("n"), device=EmulatedDevice())


def test_device_outputs_stay_on_the_device():
    exe = compile_cuda(_mixed(2), device=EmulatedDevice())
    x = np.random.default_rng(2).standard_normal((2, 4, 4, 4)).astype(np.float32)
    host = exe.run(x)
    dev = exe.run(x, device_outputs=True)
    assert all(isinstance(d, DeviceArray) for d in dev)
    assert dev[0].__cuda_array_interface__["shape"] == host[0].shape
    for d, h in zip(dev, host):
        np.testing.assert_array_equal(d.numpy(), h)


def test_an_export_carries_ptx_cubins_and_weights_and_names_what_a_host_lacks(tmp_path):
    import zipfile

    from ember.codegen.nvptx import ptxas_path

    exe = compile_cuda(_mixed(2), device=EmulatedDevice())
    path = exe.export(str(tmp_path / "m.ember-gpu"))
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        assert {"manifest.json", "kernels.ptx", "constants/0.npy"} <= names
        assert ".entry" in z.read("kernels.ptx").decode()
        assert ("kernels.sm_80.cubin" in names) == (ptxas_path() is not None)
    if NO_GPU is not None:
        with pytest.raises(TargetError, match="compiled for cuda -arch=sm_80, and this host cannot run it"):
            ember.load(path)
    else:  # (a GPU host: it runs as the compiled model does)
        x = np.random.default_rng(4).standard_normal((2, 4, 4, 4)).astype(np.float32)
        _check(ember.load(path), _mixed(2), x)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF  # (damage inside a member: its CRC no longer matches)
    bad = tmp_path / "bad.ember-gpu"
    bad.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="damaged or incomplete GPU export"):
        ember.load(str(bad))


def test_a_gpu_export_refuses_an_older_gpu(tmp_path):
    from ember.runtime.gpu_export import load_gpu

    class OldGpu(EmulatedDevice):
        name, arch = "an old GPU", "sm_75"

    path = compile_cuda(_mixed(2), device=EmulatedDevice(), target="cuda -arch=sm_90").export(
        str(tmp_path / "m.ember-gpu"), cubins=())
    with pytest.raises(TargetError, match="compiled for sm_90; this GPU \\(an old GPU\\) is sm_75"):
        load_gpu(path, device=OldGpu())


def test_gpu_options_the_cuda_kind_does_not_honour_are_refused():
    with pytest.raises(ArgumentError, match="offload=\\['reference'\\] is a CPU option"):
        compile_cuda(_mixed(2), device=EmulatedDevice(), offload=["reference"])


@gpu
def test_a_model_runs_on_the_gpu_as_onnxruntime_runs_it():
    model = _mixed()
    exe = ember.compile(model, target="cuda", input_shapes={"x": (3, 4, 4, 4)})
    x = np.random.default_rng(0).standard_normal((3, 4, 4, 4)).astype(np.float32)
    _check(exe, model, x)
    _check(exe, model, -x)
    assert len(exe.time(x, number=3)) == 3


@gpu
def test_torch_cuda_tensors_go_in_and_come_out_without_the_host():
    torch = pytest.importorskip("torch")
    model = _mixed(2)
    exe = ember.compile(model, target="cuda")
    x = torch.randn(2, 4, 4, 4, device="cuda")
    out = exe.run(x, device_outputs=True)
    ref = _reference(model, x.cpu().numpy())
    for o, r in zip(out, ref):
        np.testing.assert_allclose(torch.as_tensor(o, device="cuda").cpu().numpy(), r, rtol=1e-4, atol=1e-5)


class _PtxDevice(EmulatedDevice):
    """A device that takes PTX as a GPU does and runs nothing (launches recorded): the GPU path's
    plumbing checked on a CPU."""

    def __init__(self):
        super().__init__()
        self.launched = []

    def load_ptx(self, ptx, names):
        assert ".entry" in ptx
        return {n: n for n in names}

    def launch(self, fn, grid, block, params, stream=0):
        self.launched.append((fn, grid, block, len(params.values)))


def test_a_plan_made_in_another_process_loads_on_a_device_that_takes_ptx():
    import pickle

    from ember.compiler.cuda import plan_cuda

    plan = plan_cuda(_mixed(2))
    sent = pickle.loads(pickle.dumps(plan.portable()))
    assert sent.groups is None and sent.ptx == plan.ptx and set(sent.launches) == set(plan.launches)
    dev = _PtxDevice()
    exe = sent.load(dev)
    outs = exe.run(np.zeros((2, 4, 4, 4), np.float32))
    assert [o.shape for o in outs] == [(2, 2, 24), (2, 2, 24), (2, 2, 64)]
    assert len(dev.launched) == exe.num_launches and all(g[0] >= 1 and b[0] >= 1 for _, g, b, _ in dev.launched)
    with pytest.raises(LoweringError, match="make the plan in this process"):
        sent.load(EmulatedDevice())
