"""Ember's error hierarchy.

Every error a user can trigger is an :class:`EmberError` subclass whose message names the thing
at fault (the node, op, loop, buffer or shape) and, where there is one, what to do about it.
"""
from __future__ import annotations


class EmberError(Exception):
    """Base class of every error Ember raises on purpose."""


class ScheduleError(EmberError):
    """A schedule primitive whose precondition does not hold (names the loop and the reason)."""


class CompileError(EmberError):
    """Code generation or linking failed."""


class ShapeError(EmberError):
    """A tensor has the wrong shape (names the tensor, the expected and the actual shape)."""


class DTypeError(EmberError):
    """A tensor or expression has the wrong or an unsupported dtype."""


class ArgumentError(EmberError):
    """A kernel or executable was called with the wrong arguments."""


class UnsupportedOpError(EmberError):
    """An operator (or attribute) the compiler does not support."""


class ParseError(EmberError):
    """The text form of a loop program could not be parsed."""


class LoweringError(EmberError):
    """A tensor computation could not be lowered to a loop program."""


class ProfileError(EmberError):
    """A profiling request that cannot be honoured (bad options, a model that cannot be
    re-instrumented)."""


class ModelError(EmberError):
    """A model file, proto or exported library that cannot be read, is malformed, or fails its
    integrity checks (names the file and the problem)."""


class ResourceError(EmberError):
    """A model whose memory (constants, intermediates) would exceed the allowed limit; names
    what needs the memory, the bytes needed and the limit."""


class TargetError(EmberError):
    """Code built for a machine this host is not: a CPU feature it lacks (AVX-512, say), another
    architecture, a missing runtime library. Names what is required and what the host has."""


class TuneError(EmberError):
    """Tuning that cannot proceed: a tuning database that cannot be opened or read (names the
    URL, password masked, and what to do), a malformed record (names the line)."""


class DeviceError(EmberError):
    """A call into a GPU's driver failed at run time (names the call, the device and the
    driver's error)."""
