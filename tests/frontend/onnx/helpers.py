"""Small ONNX models built with onnx.helper, and where the onnx package keeps its real models."""
import os

import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT_MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "squeezenet", "shufflenet", "vgg19",
                "bvlc_alexnet", "zfnet512"]


def vi(name, shape, elem=F):
    """A tensor value info; shape entries may be ints, strings (dim_param) or None (unknown)."""
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(array, name)


def model(nodes, inputs, outputs, initializers=(), opset=17, **kwargs):
    """A model of one graph in the default domain at ``opset``."""
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **kwargs)


def node(op, inputs, outputs, name=None, **attrs):
    return helper.make_node(op, inputs, outputs, name=name or f"{op.lower()}_{outputs[0]}", **attrs)
