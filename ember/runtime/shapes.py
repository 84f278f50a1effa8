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


_PY = {"Add": "({} + {})", "Sub": "({} - {})", "Mul": "({} * {})", "FloorDiv": "({} // {})", "FloorMod": "({} % {})",
       "Min": "min({}, {})", "Max": "max({}, {})", "EQ": "int({} == {})", "NE": "int({} != {})", "LT": "int({} < {})",
       "LE": "int({} <= {})", "GT": "int({} > {})", "GE": "int({} >= {})", "And": "int(bool({}) & bool({}))",
       "Or": "int(bool({}) | bool({}))"}  # (both sides evaluated, as evaluate() does)


def _python(e: Any) -> str:
    if isinstance(e, int):
        return repr(int(e))
    if isinstance(e, str):
        return f"E[{e!r}]"
    return _PY[e[0]].format(_python(e[1]), _python(e[2]))


def compile_shapes(shapes: list):
    """A function of ``env`` giving each shape of ``shapes`` (lists of dimensions) as a tuple of
    ints, or None where a symbol is unbound or a division is by zero: :func:`evaluate` over
    every dimension, as one Python function compiled once. A model's layout evaluates a few
    thousand dimensions per new set of sizes (each step of a decoder: its past grew), which
    walking the JSON trees took most of."""
    if all(isinstance(d, int) for shape in shapes for d in shape):
        # (a static program's shapes: nothing to compile -- Python's compiler took ~0.1 s of
        # DenseNet-121's first result, a function per program and per kernel)
        fixed = [tuple(int(d) for d in shape) for shape in shapes]
        return lambda E: list(fixed)
    lines = ["def shapes(E):", f"    out = [None] * {len(shapes)}"]
    for k, shape in enumerate(shapes):
        dims = ", ".join(_python(d) for d in shape)
        lines.append(f"    try: out[{k}] = ({dims}{',' if len(shape) == 1 else ''})")
        lines.append("    except (KeyError, TypeError, ZeroDivisionError): pass")
    lines.append("    return out")
    scope: dict = {}
    exec(compile("\n".join(lines), "<ember shapes>", "exec"), scope)  # (only ints, names and operators)
    return scope["shapes"]


__all__ = ["OPS", "compile_shapes", "evaluate", "is_valid", "shape_symbols", "symbols_of", "text"]
