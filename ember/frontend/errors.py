"""Errors of the frontends.

``ModelError`` lives here rather than in :mod:`ember.errors` only because this step may not
edit that module; it is an :class:`~ember.errors.EmberError` like every other, and belongs
there once the error hierarchy is next revised.
"""
from ..errors import EmberError


class ModelError(EmberError):
    """A model file or proto that cannot be read or is malformed (names the file and the problem)."""
