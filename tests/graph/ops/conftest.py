"""Helpers for op type-inference tests."""
from ember.graph import TensorType
from ember.graph.ops import infer_type


def T(*shape, dtype="float32"):
    """TensorType shorthand: ``T(2, "n", 3)``."""
    return TensorType(shape, dtype)


def infer(op, *types, **attrs):
    return infer_type(op, list(types), attrs)
