"""The real models shipped in the onnx package import, type-check, and declare what we infer."""
import os

import pytest
from onnx import TensorProto, numpy_helper

import onnx
from ember.errors import UnsupportedOpError
from ember.frontend.onnx import from_onnx
from ember.graph import Call, assert_structural_equal, post_order, rewrite
from ember.graph.infer import infer_types
from ember.loop import dtype as dt

from .helpers import LIGHT_DIR, LIGHT_MODELS


def _declared_output(path):
    m = onnx.load(path)
    (out,) = m.graph.output
    return tuple(d.dim_value for d in out.type.tensor_type.shape.dim)


def _reference_output(name):
    t = TensorProto()
    with open(os.path.join(LIGHT_DIR, f"light_{name}_output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_imports_and_infers(name):
    path = os.path.join(LIGHT_DIR, f"light_{name}.onnx")
    mod = from_onnx(path)
    main = mod.main
    proto = onnx.load(path)
    inits = {t.name for t in proto.graph.initializer}
    # the data is the only parameter: weights (initializers, also those listed as inputs) are constants
    assert [p.name for p in main.params] == [i.name for i in proto.graph.input if i.name not in inits]
    calls = [n for n in post_order(mod) if isinstance(n, Call)]
    assert calls and all(c.type is not None for c in calls)

    # the pass, run on the graph with every type erased, fills in exactly the importer's types
    erased = rewrite(mod, lambda n: n.replace(type=None) if isinstance(n, Call) else
                     n.replace(ret_type=None) if hasattr(n, "ret_type") else None)
    assert all(c.type is None for c in post_order(erased) if isinstance(c, Call))
    assert_structural_equal(infer_types(erased), mod)
    assert infer_types(mod) is mod

    ref = _reference_output(name)
    assert main.ret_type.shape == _declared_output(path) == ref.shape
    assert main.ret_type.dtype == dt.from_numpy(ref.dtype)


def test_light_model_with_initializers_kept_as_inputs_reports_the_shape_inputs():
    # these models build their weights with ConstantOfShape from shape tensors stored as
    # initializers; kept as inputs, those shapes are unknown at import, and the error says so
    path = os.path.join(LIGHT_DIR, "light_squeezenet.onnx")
    with pytest.raises(UnsupportedOpError, match=r"(?s)decide shapes.*'conv1_w_0__SHAPE' \(input 0 of ConstantOfShape"):
        from_onnx(path, keep_initializers_as_inputs=True)
