"""Helpers for op type-inference tests."""
from ember.graph import TensorType
from ember.graph.ops import infer_type


def T(*shape, dtype="float32"):
    """TensorType shorthand: ``T(2, "n", 3)``."""
    return TensorType(shape, dtype)


def infer(op, *types, **attrs):
    return infer_type(op, list(types), attrs)


def build_all(cases, make, name):
    """Every case's kernel in ONE module (one LLVM run): ``make(i, case) -> ((schedule, args,
    kernel name), info)``; returns ``(module, [info per case])``."""
    import ember

    made = [make(i, c) for i, c in enumerate(cases)]
    return ember.build([k for k, _ in made], name=name), [info for _, info in made]
