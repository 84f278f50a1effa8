"""Shapes as data: the JSON form of dimension expressions, evaluated per run.

A dimension in a program or a kernel's metadata is an int, the name of a symbol (``"batch"``)
or ``[op, a, b]`` over those, with ``op`` one of ``Add Sub Mul FloorDiv FloorMod Min Max``,
the comparisons ``EQ NE LT LE GT GE`` and ``And Or`` (for conditions). The compiler writes
them (from the graph's :class:`~ember.graph.types.Dim` expressions); the runtime evaluates
them once per new set of symbol values, never per kernel call.
"""
from __future__ import annotations

from typing import Any

OPS = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
       "FloorDiv": lambda a, b: a // b if b else None, "FloorMod": lambda a, b: a % b if b else None,
       "Min": min, "Max": max,
       "EQ": lambda a, b: int(a == b), "NE": lambda a, b: int(a != b), "LT": lambda a, b: int(a < b),
       "LE": lambda a, b: int(a <= b), "GT": lambda a, b: int(a > b), "GE": lambda a, b: int(a >= b),
       "And": lambda a, b: int(bool(a) and bool(b)), "Or": lambda a, b: int(bool(a) or bool(b))}
# how deep a dimension may nest (a bound on the checker's recursion over a file's JSON): Swin-V2
# with a dynamic height and width pads each stage's plane to its window, ((h + 1) // 2 ... + 6)
# // 7 * 7 over four stages, 20-odd levels
MAX_DEPTH = 64


def evaluate(e: Any, env: dict) -> Any:
    """The value of the dimension ``e`` with symbols bound by ``env`` (None where a symbol is
    unbound or a division is by zero)."""
    if isinstance(e, int) or e is None:
        return e
    if isinstance(e, str):
        return env.get(e)
    a, b = evaluate(e[1], env), evaluate(e[2], env)
    if a is None or b is None:
        return None
    return OPS[e[0]](a, b)


def text(e: Any) -> str:
    """``e`` as readable text: ``(12 * batch)``, ``min(seq, 512)``."""
    if isinstance(e, (int, str)):
        return str(e)
    if e is None:
        return "?"
    sym = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "FloorMod": "%", "EQ": "==", "NE": "!=",
           "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "And": "and", "Or": "or"}.get(e[0])
    if sym:
        return f"({text(e[1])} {sym} {text(e[2])})"
    return f"{e[0].lower()}({text(e[1])}, {text(e[2])})"


def symbols_of(e: Any, out: set) -> set:
    """The symbol names ``e`` refers to, added to ``out``."""
    if isinstance(e, str):
        out.add(e)
    elif isinstance(e, list) and len(e) == 3:
        symbols_of(e[1], out)
        symbols_of(e[2], out)
    return out


def shape_symbols(shape) -> set:
    """The symbol names a shape (a list of dimensions) refers to."""
    out: set = set()
    for d in shape:
        symbols_of(d, out)
    return out


def is_valid(e: Any, symbols, depth: int = 0) -> bool:
    """Whether ``e`` is a well-formed dimension over ``symbols`` (for the verifier)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(e, bool):
        return False
    if isinstance(e, int):
        return abs(e) < (1 << 62)
    if isinstance(e, str):
        return e in symbols
    return (isinstance(e, list) and len(e) == 3 and e[0] in OPS
            and is_valid(e[1], symbols, depth + 1) and is_valid(e[2], symbols, depth + 1))


__all__ = ["OPS", "evaluate", "is_valid", "shape_symbols", "symbols_of", "text"]
