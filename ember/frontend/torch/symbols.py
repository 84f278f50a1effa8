"""Symbolic sizes of an exported program as Ember dims.

``torch.export`` writes a dynamic size as a sympy expression over its symbols (``s17``,
``2*s17``); Ember writes it as a :class:`~ember.graph.Dim` over named sizes. A symbol takes the
name of the ``torch.export.Dim`` the user gave it (``batch``), so the executable's inputs show
``("batch", 3, 224, 224)``; a symbol the user did not name (``Dim.AUTO``) is named after the
first input axis that carries it (``x_dim0``).
"""
from __future__ import annotations

from typing import Mapping, Union

from ...errors import UnsupportedOpError
from ...graph import Dim
from ...graph.ops import dims as D

DimT = Union[int, Dim]


def sympy_to_dim(expr, names: Mapping[str, str]) -> DimT:
    """The Ember dim of the sympy expression ``expr``; ``names`` maps symbol names to dim names."""
    import sympy

    if isinstance(expr, (int,)) or getattr(expr, "is_Integer", False):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return Dim(names.get(expr.name, expr.name))
    args = [sympy_to_dim(a, names) for a in expr.args]
    kind = type(expr).__name__
    if kind == "Add":
        return _fold(D.dim_add, args)
    if kind == "Mul":
        return _fold(D.dim_mul, args)
    if kind in ("FloorDiv", "CleanDiv", "IntTrueDiv") and len(args) == 2:
        return D.dim_floordiv(*args)
    if kind in ("Mod", "PythonMod") and len(args) == 2:
        return D.dim_mod(*args)
    if kind == "CeilDiv" and len(args) == 2:
        return D.dim_ceildiv(*args)
    if kind == "Max":
        return _fold(D.dim_max, args)
    if kind == "Min":
        return _fold(D.dim_min, args)
    raise UnsupportedOpError(f"the symbolic size {expr} ({kind}) has no Ember form; export with static sizes "
                             "for this axis")


def _fold(fn, args):
    out = args[0]
    for a in args[1:]:
        out = fn(out, a)
    return out


def symint_to_dim(v, names: Mapping[str, str]) -> DimT:
    """A python int or a torch SymInt as an Ember dim."""
    if isinstance(v, int):
        return v
    expr = getattr(getattr(v, "node", None), "expr", None)
    return int(v) if expr is None else sympy_to_dim(expr, names)


__all__ = ["symint_to_dim", "sympy_to_dim"]
