"""Ember: a deep-learning compiler in Python that generates native code through LLVM."""
import os

from .errors import (ArgumentError, CompileError, DTypeError, EmberError, LoweringError, ModelError,
                     ParseError, ProfileError, ResourceError, ScheduleError, ShapeError, TuneError,
                     TargetError, UnsupportedOpError)
from .options import CompileOptions  # noqa: F401
from .version import __version__  # noqa: F401


def build(*args, **kwargs):
    """Compile kernels (see :func:`ember.driver.build`)."""
    from .driver import build as _build

    return _build(*args, **kwargs)


def compile(model, target=None, opt_level: int = 3, *, options=None, tuning_db=None, **kwargs):
    """Compile a model (ONNX path, bytes or ModelProto, or a graph Module) to an Executable:
    ``exe = ember.compile("model.onnx"); y, = exe.run(x)``.

    The keywords make a :class:`~ember.options.CompileOptions` (or pass ``options=``); see
    :func:`ember.compiler.compile.compile_model` for what each does. ``tuning_db``: a tuning
    database (an SQLite path, a ``postgresql://`` URL, an open ``Database``, or a dict of
    records) whose best record per fused group schedules that group; default
    ``$EMBER_TUNING_DB`` when set."""
    from .compiler.compile import compile_model

    if options is None:
        options = CompileOptions.create(target, opt_level, **kwargs)
    elif target is not None or opt_level != 3 or kwargs:
        raise ArgumentError("ember.compile takes options= or the keywords that make them, not both")
    from .target import BUILDABLE, check_buildable

    check_buildable(options.target, BUILDABLE)  # (before a tuning database is read for it)
    if options.target.kind == "llvm" and (tuning_db is not None or os.environ.get("EMBER_TUNING_DB")):
        from .tune.apply import with_tuning_db

        options = with_tuning_db(options, tuning_db)
    return compile_model(model, options=options)


def from_torch(model, example_args=(), dynamic_shapes=None, **kwargs):
    """Compile a PyTorch module through ``torch.export`` (no ONNX) and return a model called
    like the module: ``m = ember.from_torch(model.eval(), (x,)); y = m(x)``. See
    :func:`ember.frontend.torch.from_torch` for the options (torch is imported only here)."""
    from .frontend.torch import from_torch as _from_torch

    return _from_torch(model, example_args, dynamic_shapes, **kwargs)


def quantize(model, calibration, output=None, **kwargs):
    """Quantize a float32 ONNX model to QDQ int8 from calibration batches and write it to
    ``output``; returns a report with the error against fp32. See
    :func:`ember.quantizer.quantize` for the options (method, per_channel, ...)."""
    from .quantizer import quantize as _quantize

    return _quantize(model, calibration, output, **kwargs)


def load(path):
    """Load a model exported with ``exe.export(path)`` (a CPU export needs only ctypes and
    numpy; one compiled for a GPU needs cuda-bindings and a GPU of its architecture or newer)."""
    from .compiler.executable import Executable
    from .runtime.load import load as _load

    return _load(path, Executable)


def c_include_dir() -> str:
    """The folder holding ``ember.h``, the header for running an export from C
    (``cc -I$(python -c 'import ember; print(ember.c_include_dir())') ...``; see examples/c)."""
    import os

    return os.path.join(os.path.dirname(__file__), "runtime", "c")


def _register_torch_backend() -> None:
    """``torch.compile(m, backend="ember")``: torch finds the backend through the
    ``torch_dynamo_backends`` entry point; where Dynamo is already loaded (or the package was
    installed without its entry points) it is registered now, which costs nothing more."""
    import sys

    if "torch._dynamo" in sys.modules:
        try:
            from .frontend.torch.dynamo import register
        except ImportError:  # (a torch without Dynamo)
            return
        register()


_register_torch_backend()
