"""The converter table: an ATen operator overload (``"aten.add.Tensor"``) -> a function that
builds Ember ops for one node of an exported program.

Converters register with :func:`converter`, one file per op family (elementwise, reduce, nn,
layout, index, creation, attention, symbolic). An entry may declare ``check(fx_node)``: the
reason a use of the op is not supported (a training-mode batch norm, dropout with p > 0), or
None; the importer runs every check before converting anything, so all problems of a program
are reported at once.

Targets are named by :func:`target_name`: ATen overloads by their qualified name, Python
builtins on sizes by ``operator.mul`` etc., other callables by module and name.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional


@dataclasses.dataclass(frozen=True)
class Converter:
    target: str
    fn: Callable
    check: Optional[Callable] = None
    training: bool = False  # the op exists only in training graphs (the error says so)


_TABLE: dict = {}


def converter(*targets: str, check: Optional[Callable] = None):
    """Decorator: ``fn(node) -> value`` converts each of ``targets`` (a value is an Ember
    expression, a tuple of them for several outputs, a size, or None)."""
    def register(fn):
        for t in targets:
            if t in _TABLE:
                raise ValueError(f"converter for {t} registered twice")
            _TABLE[t] = Converter(t, fn, check)
        return fn

    return register


def target_name(target) -> str:
    """``"aten.add.Tensor"`` for an ATen overload, ``"operator.mul"`` for a builtin."""
    import operator

    mod = getattr(target, "__module__", None)
    name = getattr(target, "__name__", None)
    if type(target).__name__ in ("OpOverload", "HigherOrderOperator", "OpOverloadPacket"):
        return str(target)
    if name and getattr(operator, name, None) is target:
        return f"operator.{name}"
    if name and mod:
        return f"{mod}.{name}"
    return str(target)


def _load() -> None:
    from . import (attention, creation, elementwise, index, layout, nn, recurrent, reduce,  # noqa: F401
                   symbolic)  # (converters register on import)


def lookup(target: str) -> Optional[Converter]:
    """The converter of the target named ``target``, or None."""
    _load()
    return _TABLE.get(target)


def supported_targets() -> list:
    """Every target name with a converter, sorted."""
    _load()
    return sorted(_TABLE)


__all__ = ["Converter", "converter", "lookup", "supported_targets", "target_name"]
