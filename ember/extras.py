"""Which optional extra provides a module, so a feature used without it says what to install.

Ember's core needs llvmlite and numpy; the rest comes with extras (``pyproject.toml``). A
command that reaches a missing one gets a line naming the extra, not a ModuleNotFoundError
traceback: ``ember tune`` without SQLAlchemy says ``pip install 'ember[tune]'``.
"""
from __future__ import annotations

from typing import Optional

# top-level module -> the extra that installs it
EXTRA_OF = {
    "sqlalchemy": "tune", "psycopg": "tune", "lightgbm": "tune", "distributed": "tune", "dask": "tune",
    "torch": "torch", "onnx": "onnx", "onnxruntime": "onnx", "matplotlib": "plot",
    "torchvision": "zoo", "transformers": "zoo", "onnxscript": "zoo", "cuda": "cuda",
}


def missing_extra_message(err: ImportError, feature: str) -> Optional[str]:
    """What to install for ``feature`` when ``err`` is a missing module an extra provides, else
    None (a missing module of Ember's own, or one no extra names, is a bug to report)."""
    name = (getattr(err, "name", None) or "").split(".")[0]
    extra = EXTRA_OF.get(name)
    if extra is None:
        return None
    return (f"{feature} needs the Python package {name!r}, which the '{extra}' extra installs: "
            f"pip install 'ember[{extra}]'")


def require(*modules: str) -> None:
    """Import ``modules`` now, so that a command missing one stops before its long work (a
    tune compiles and profiles the model first) with :func:`missing_extra_message`'s line."""
    import importlib

    for m in modules:
        importlib.import_module(m)


__all__ = ["EXTRA_OF", "missing_extra_message", "require"]
