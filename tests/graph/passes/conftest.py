"""Helpers for pass tests: typed graph building."""
import numpy as np

from ember.graph import Call, Function, Module, TensorType
from ember.graph.infer import infer_types


def T(*shape, dtype="float32"):
    return TensorType(shape, dtype)


def call(op, *args, **attrs):
    return Call(op, list(args), attrs)


def module(params, body) -> Module:
    """A typed module ``main(params) = body``."""
    return infer_types(Module({"main": Function(params, body)}))


def rand(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype("float32")
