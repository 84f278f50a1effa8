"""Ember: a deep-learning compiler in Python that generates native code through LLVM."""
from .errors import (ArgumentError, CompileError, DTypeError, EmberError, LoweringError, ParseError,
                     ScheduleError, ShapeError, UnsupportedOpError)

__version__ = "0.1.0"
