"""Frontends: models from other frameworks into Ember's graph IR.

- :mod:`ember.frontend.onnx` — ``from_onnx(model)`` for ONNX models (opsets 7 to 28), and an
  ``onnx.backend.base.Backend`` so onnx's own backend test runner can drive Ember.
"""
from .errors import ModelError

__all__ = ["ModelError"]
