"""Ember: a deep-learning compiler in Python that generates native code through LLVM."""
from .errors import (ArgumentError, CompileError, DTypeError, EmberError, LoweringError, ModelError,
                     ParseError, ProfileError, ResourceError, ScheduleError, ShapeError, TuneError,
                     UnsupportedOpError)

__version__ = "0.1.0"


def build(*args, **kwargs):
    """Compile kernels (see :func:`ember.driver.build`)."""
    from .driver import build as _build

    return _build(*args, **kwargs)


def compile(model, target=None, opt_level: int = 3, **kwargs):
    """Compile a model (ONNX path, bytes or ModelProto, or a graph Module) to an Executable:
    ``exe = ember.compile("model.onnx"); y, = exe.run(x)``. See
    :func:`ember.compiler.compile.compile_model` for the options."""
    from .compiler.compile import compile_model

    return compile_model(model, target, opt_level, **kwargs)


def load(path):
    """Load a model exported with ``exe.export(path)`` (needs only ctypes and numpy)."""
    from .runtime.load import load as _load

    return _load(path)


def c_include_dir() -> str:
    """The folder holding ``ember.h``, the header for running an export from C
    (``cc -I$(python -c 'import ember; print(ember.c_include_dir())') ...``; see examples/c)."""
    import os

    return os.path.join(os.path.dirname(__file__), "runtime", "c")
