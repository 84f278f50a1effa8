"""Loaded shared libraries of kernels.

A library built by Ember carries a JSON description of its kernels in the symbol
``__ember_metadata``, so :func:`load_module` needs only ctypes and numpy: no llvmlite, no loop
IR. This module must not import either.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
from typing import Iterator, Optional, Union

from ..errors import ArgumentError, EmberError, ModelError
from .kernel import Kernel
from .verify import verify_metadata

METADATA_SYMBOL = "__ember_metadata"


def read_metadata(lib: ctypes.CDLL, path: str) -> str:
    try:
        sym = ctypes.c_char.in_dll(lib, METADATA_SYMBOL)
    except ValueError:
        raise EmberError(f"{path} is not an Ember kernel library (no {METADATA_SYMBOL} symbol)") from None
    try:
        return ctypes.string_at(ctypes.addressof(sym)).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: its kernel metadata is not UTF-8 ({exc})") from None


class Module:
    """A loaded kernel library: ``module["name"]`` or ``module.name`` is a :class:`Kernel`."""

    def __init__(self, path: Union[str, os.PathLike], metadata: Optional[str] = None):
        # absolute: dlopen reads a bare "m.so" as a name to look up on the library path, not
        # as the file in the working directory
        self.path = os.path.abspath(os.fspath(path))
        try:
            self._lib = ctypes.CDLL(self.path)
        except OSError as exc:
            raise EmberError(f"cannot load kernel library {self.path}: {exc}") from exc
        text = metadata if metadata is not None else read_metadata(self._lib, self.path)
        try:
            self.metadata = json.loads(text)
        except ValueError as exc:
            raise ModelError(f"{self.path}: its kernel metadata is not JSON ({exc})") from None
        verify_metadata(self.metadata, self.path)
        self._kernels = {}
        for k in self.metadata["kernels"]:
            try:
                fn = getattr(self._lib, k["name"])
            except AttributeError:
                raise ModelError(f"{self.path}: kernel {k['name']!r} is in the metadata but not in "
                                 f"the library") from None
            self._kernels[k["name"]] = Kernel(self, fn, k)

    @property
    def kernel_names(self) -> list:
        return list(self._kernels)

    def __getitem__(self, name: str) -> Kernel:
        try:
            return self._kernels[name]
        except KeyError:
            raise ArgumentError(f"no kernel {name!r} in {self.path}; it has: "
                                f"{', '.join(self._kernels) or '(none)'}") from None

    def __getattr__(self, name: str) -> Kernel:
        if name.startswith("_"):
            raise AttributeError(name)
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"Module has no kernel or attribute {name!r}; kernels: "
                             f"{', '.join(kernels) or '(none)'}")

    def __contains__(self, name: str) -> bool:
        return name in self._kernels

    def __iter__(self) -> Iterator[str]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def export(self, path: Union[str, os.PathLike]) -> str:
        """Copy the shared library to ``path`` (atomically); load it with :func:`load_module`."""
        path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".ember-export-", suffix=".so")
        os.close(fd)
        try:
            shutil.copyfile(self.path, tmp)
            os.chmod(tmp, 0o755)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    def __repr__(self) -> str:
        return f"<ember Module {self.path}: {', '.join(self._kernels)}>"


def load_module(path: Union[str, os.PathLike]) -> Module:
    """Load a library written by :func:`ember.codegen.llvm.export_library` / ``Module.export``."""
    if not os.path.exists(path):
        raise EmberError(f"no such kernel library: {path}")
    return Module(path)
