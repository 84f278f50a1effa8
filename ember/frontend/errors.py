"""Errors of the frontends: :class:`~ember.errors.ModelError`, re-exported here for the
importers that named it from this module first."""
from ..errors import ModelError

__all__ = ["ModelError"]
