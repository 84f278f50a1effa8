"""The nine real models shipped with onnx (``backend/test/data/light``) compile and match their
reference outputs, with the input onnx's own backend runner feeds them (arange / n)."""
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import ember

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
