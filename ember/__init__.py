"""Ember: a deep-learning compiler in Python that generates native code through LLVM."""
from .errors import (ArgumentError, CompileError, DTypeError, EmberError, LoweringError, ParseError,
                     ScheduleError, ShapeError, UnsupportedOpError)

__version__ = "0.1.0"


def build(*args, **kwargs):
    """Compile kernels (see :func:`ember.driver.build`)."""
    from .driver import build as _build

    return _build(*args, **kwargs)
