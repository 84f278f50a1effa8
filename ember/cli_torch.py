"""``ember compile --torch MODULE:FACTORY``: compile a PyTorch model through ``from_torch`` to
one shared library, as ``ember compile`` does an ONNX file.

``FACTORY`` is a function of ``MODULE`` (imported from the working directory or the path)
that takes no arguments and returns ``(model, example_args)``, ``(model, example_args,
dynamic_shapes)``, or a dict with keys ``model``, ``args``, ``kwargs``, ``dynamic_shapes``::

    # nets.py
    def resnet():
        m = torchvision.models.resnet18().eval()
        return m, (torch.randn(2, 3, 224, 224),), {"x": {0: torch.export.Dim("batch")}}

    $ ember compile --torch nets:resnet -o resnet.so
"""
from __future__ import annotations

import importlib
import os
import sys
import time

from .errors import ArgumentError


def load_factory(spec: str):
    """``(model, args, kwargs, dynamic_shapes, name)`` from ``MODULE:FACTORY``."""
    module, sep, fn = spec.partition(":")
    if not sep or not module or not fn:
        raise ArgumentError(f"--torch takes MODULE:FACTORY (a function returning the model and example "
                            f"inputs), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module), fn)
    except (ImportError, AttributeError) as e:
        raise ArgumentError(f"--torch {spec}: {type(e).__name__}: {e}") from None
    got = factory()
    if isinstance(got, dict):
        return (got["model"], got.get("args", ()), got.get("kwargs"), got.get("dynamic_shapes"), fn)
    if not isinstance(got, tuple) or len(got) not in (2, 3):
        raise ArgumentError(f"--torch {spec}: the factory must return (model, example_args[, dynamic_shapes]) "
                            f"or a dict, got {type(got).__name__}")
    model, args = got[0], got[1]
    args = args if isinstance(args, tuple) else (args,)
    return model, args, None, got[2] if len(got) == 3 else None, fn


def compile_torch(args) -> int:
    """The ``--torch`` branch of ``ember compile`` (its parsed arguments)."""
    from .frontend.torch import from_torch

    if args.model or args.light or args.input_shape:
        raise ArgumentError("--torch takes the model from its factory: give no model file, --light or --input-shape")
    model, example, kwargs, dynamic, name = load_factory(args.torch)
    out = args.output or f"{name}.so"
    t0 = time.perf_counter()
    compiled = from_torch(model, example, dynamic, example_kwargs=kwargs, target=args.target,
                          opt_level=args.opt_level, name=name, disabled_passes=args.disable_pass,
                          memory_limit=args.memory_limit, tuning_db=args.tuning_db)
    exe = compiled.exe
    exe.export(out)
    if args.profile_compile:
        print(exe.compile_profile.table(budget=args.compile_budget))
    from .cli_model import print_compiled

    print_compiled(exe, f"compiled {args.torch} ({type(model).__name__}) through torch.export in "
                        f"{time.perf_counter() - t0:.2f} s", out)
    return 0


__all__ = ["compile_torch", "load_factory"]
