"""PyTorch in, without ONNX.

- :func:`from_torch` — ``torch.export`` a module, lower it to core ATen, import the program
  into Ember's graph IR (one converter per ATen op family: :mod:`.elementwise`, :mod:`.reduce`,
  :mod:`.nn`, :mod:`.layout`, :mod:`.index`, :mod:`.creation`, :mod:`.attention`,
  :mod:`.symbolic`) and compile it; the result is called like the module.
- :func:`import_program` — an ``ExportedProgram`` (core ATen) as a graph Module, for the IR alone.
- ``torch.compile(model, backend="ember")`` — :mod:`.dynamo`; registered when this package is
  imported (``import ember`` does it when torch is already imported).

torch is imported inside these modules only: ``import ember`` works without it.

    >>> import torch, ember                                                     # doctest: +SKIP
    >>> batch = torch.export.Dim("batch", min=1, max=64)
    >>> m = ember.from_torch(model.eval(), (x,), dynamic_shapes={"x": {0: batch}})
    >>> y = m(x)                                   # torch tensors in and out, any batch
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from .errors import TrainingGraphError


def from_torch(model, example_args: Sequence = (), dynamic_shapes: Any = None, *,
               example_kwargs: Optional[Mapping] = None, target=None, opt_level: int = 3,
               name: Optional[str] = None, **compile_options):
    """Compile the PyTorch module ``model`` (or an ``ExportedProgram``) for ``target`` (default:
    the host CPU) and return a :class:`~ember.frontend.torch.model.TorchModel`.

    ``example_args`` / ``example_kwargs``: how the module is called (their shapes, unless
    dynamic, are compiled in). ``dynamic_shapes``: torch.export's spec; an axis given a
    ``torch.export.Dim("batch")`` stays symbolic, named ``batch``, and one executable runs
    every size in the Dim's range. Parameters and buffers are compiled in as constants.

    Inference only: call ``model.eval()`` first. Raises TrainingGraphError (a training graph),
    UnsupportedOpError (every ATen op Ember does not convert, each with its source lines),
    ModelError (torch.export failed), ShapeError/DTypeError (naming the node).
    """
    import time

    from ...compiler.compile import compile_model
    from ...options import CompileOptions
    from ...target import check_buildable
    from ...tune.apply import with_tuning_db
    from .export import export_program
    from .importer import import_program
    from .model import TorchModel

    t0 = time.perf_counter()
    ep, names = export_program(model, example_args, example_kwargs, dynamic_shapes)
    t1 = time.perf_counter()
    label = name or type(model).__name__
    program = import_program(ep, names, source=f"the exported {label}")
    del ep
    t2 = time.perf_counter()
    tuning_db = compile_options.pop("tuning_db", None)
    options = CompileOptions.create(target, opt_level, name=label, **compile_options)
    check_buildable(options.target)  # (before a tuning database is read for it)
    options = with_tuning_db(options, tuning_db)
    exe = compile_model(program.module, options=options)
    exe.compile_times = {"torch.export": t1 - t0, "import": t2 - t1, **exe.compile_times}
    return TorchModel(exe, program, label)


def import_program(ep, dim_names=None, source: str = "the exported program"):
    """See :func:`ember.frontend.torch.importer.import_program`."""
    from .importer import import_program as _import

    return _import(ep, dim_names, source)


def export_program(model, example_args=(), example_kwargs=None, dynamic_shapes=None):
    """See :func:`ember.frontend.torch.export.export_program`."""
    from .export import export_program as _export

    return _export(model, example_args, example_kwargs, dynamic_shapes)


def _register_backend() -> None:
    try:
        from .dynamo import register
    except ImportError:  # (torch without dynamo)
        return
    register()


_register_backend()

__all__ = ["TrainingGraphError", "export_program", "from_torch", "import_program"]
