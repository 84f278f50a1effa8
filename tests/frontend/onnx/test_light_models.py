"""The nine real models shipped with onnx (``backend/test/data/light``) compile and match their
reference outputs, with the input onnx's own backend runner feeds them (arange / n)."""
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import ember
from ember.compiler.fold import evaluate_constants

FOLD = {"evaluate": evaluate_constants}  # (fold_constant computes with the compiler)

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = ["squeezenet", "shufflenet", "inception_v1", "inception_v2", "resnet50", "densenet121",
          "bvlc_alexnet", "zfnet512", "vgg19"]
SLOW = {"resnet50", "densenet121", "inception_v2", "bvlc_alexnet", "zfnet512", "vgg19"}


def runner_input(vi) -> np.ndarray:
    """onnx's backend runner's dummy input for a light model: arange(n) / n in float32."""
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


@pytest.mark.parametrize("name", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m for m in MODELS])
def test_light_model_matches_reference(name):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    inputs = [runner_input(i) for i in model.graph.input if i.name not in inits]
    ref = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    exe = ember.compile(model)
    (out,) = exe.run(*inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-5)
    # and on the model's own kernels: a build whose kernels were missing from the cache ran
    # the first time on interim (tier-0) ones
    if hasattr(exe, "wait"):
        assert exe.wait(timeout=600) and exe.tier_info.error is None
        (out,) = exe.run(*inputs)
        np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-5)


def test_resnet50_fuses_to_one_kernel_per_conv():
    """After fusion resnet50 is one kernel per conv (BN folded into its weights, bias, ReLU and
    the residual add in its epilogue) plus max pool, average pool, dense and softmax. Its convs
    and pools run in the blocked channel layout, which changes back once, before the dense."""
    from collections import Counter

    from ember.frontend.onnx import from_onnx
    from ember.graph import topo_calls
    from ember.graph.infer import infer_types
    from ember.graph.passes import PassContext, VerifyAfterPass, default_pipeline
    from ember.compiler.program import is_relabel

    mod = infer_types(from_onnx(os.path.join(LIGHT, "light_resnet50.onnx")))
    convs = sum(c.op == "nn.conv2d" for c in topo_calls(mod))
    fused = PassContext(opt_level=3, instruments=[VerifyAfterPass()], config=FOLD).run(mod, default_pipeline())
    kernels = [c for c in topo_calls(fused.main) if not is_relabel(fused[c.op])]
    anchors, layout = Counter(), []
    for k in kernels:
        ops = [c.op for c in topo_calls(fused[k.op])]
        assert "nn.batch_norm" not in ops
        if ops[0] == "unblock_channels":
            layout.append(ops)
            continue
        assert sum(op in ("nn.conv2d_nchwc", "nn.max_pool2d", "nn.avg_pool2d", "nn.dense", "nn.softmax")
                   for op in ops) == 1, ops
        anchors[ops[0]] += 1
    assert convs == 53 and anchors == Counter({"nn.conv2d_nchwc": 53, "nn.max_pool2d": 1, "nn.avg_pool2d": 1,
                                               "nn.dense": 1, "nn.softmax": 1})
    assert layout == [["unblock_channels", "reshape"]] and len(kernels) == 58
    assert sum([c.op for c in topo_calls(fused[k.op])] == ["nn.conv2d_nchwc", "add", "add", "nn.relu"]
               for k in kernels) == 16
