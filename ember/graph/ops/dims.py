"""Arithmetic on dimensions that may be symbolic, for type inference.

A dimension is an ``int`` or a :class:`~ember.graph.types.Dim`, whose ``expr`` is an int64
expression of the loop IR over named sizes (``batch``, ``seq``). Every operation here builds
the expression and simplifies it under the rule that a named size is at least 1 (checked when
a run binds it), so equal computations give equal dims and constants fold back to ints::

    >>> dim_mul(Dim("batch"), 12), dim_mul(3, 4), dim_add(Dim("h"), 0)
    (Dim.parse('12*batch'), 12, Dim('h'))

**Assumptions.** Some shape rules cannot decide a symbolic case: two inputs of an add with
dims ``n`` and ``m`` broadcast only if ``n == m`` (or one is 1), a slice ``x[:seq]`` of an axis
of 512 is ``seq`` long only if ``seq <= 512``. The rule then takes the usual case (``n``;
``seq``) and calls :func:`assume`, which records the condition in the active
:func:`collect_assumptions` (the compile holds one). The compiled program checks every
assumption once per new input shape, before any kernel runs, and a run that breaks one gets a
:class:`~ember.errors.ShapeError` naming the node and the condition -- kernels are compiled for
the shapes the rules gave, so they are only ever called on those.
"""
from __future__ import annotations

import ast
import contextlib
import contextvars
import dataclasses
import functools
from typing import Iterable, Iterator, Optional, Union

from .. import types as _types
from ...errors import ShapeError
from ...loop import expr as E
from ...loop.arith import can_prove, simplify

Dim = _types.Dim
DimT = Union[int, Dim]

SYMBOL_MAX = 1 << 40  # the range a named size is simplified under: [1, SYMBOL_MAX]; [0, ...] for '?n'


# -- expressions ----------------------------------------------------------------------------------

def is_int(d) -> bool:
    return isinstance(d, int)


def index(d: DimT) -> E.Expr:
    """``d`` as an int64 expression of the loop IR."""
    if isinstance(d, Dim):
        return d.expr
    return E.IntImm(int(d), "int64")


def _symbols(e: E.Expr) -> list:
    from ...loop.visit import walk

    return [n for n in walk(e) if isinstance(n, E.Var)]


DATA_PREFIX = "?"  # a size a kernel computes while the model runs: it may be 0
VALUE_SEP = "#"  # "?x#3": element 3 of model input x, bound from its value before the run


def value_source(name: str):
    """``(input name, element)`` of a data size bound from a model input's value, else None."""
    if not name.startswith(DATA_PREFIX) or VALUE_SEP not in name:
        return None
    base, _, k = name[len(DATA_PREFIX):].rpartition(VALUE_SEP)
    return (base, int(k)) if k.isdigit() else None


def data_dim(name: str) -> Dim:
    """A size known only when the model runs (the number of nonzeros of a tensor, say): at
    least 0, not 1, and bound by the program from a value a kernel computes."""
    return Dim(DATA_PREFIX + name)


def is_data_symbol(name: str) -> bool:
    return name.startswith(DATA_PREFIX)


def _ranges(e: E.Expr) -> dict:
    """The ranges of ``e``'s sizes: at least 1, or 0 for a size that may be empty ('?n')."""
    return {v: (0 if is_data_symbol(v.name) else 1, SYMBOL_MAX) for v in _symbols(e)}


@functools.lru_cache(maxsize=65536)
def _canonical(e: E.Expr) -> E.Expr:
    ranges = _ranges(e)
    return simplify(e, ranges)


def to_dim(e: E.Expr) -> DimT:
    """The canonical dim of the int64 expression ``e`` (an int when it folds)."""
    e = _canonical(e)
    if isinstance(e, E.IntImm):
        return int(e.value)
    return Dim(e)


def _lift(fn):
    """An operation on dims from one on expressions; ints stay ints."""
    @functools.wraps(fn)
    def op(*dims):
        return to_dim(fn(*(index(d) for d in dims)))
    return op


def dim_mul(a: DimT, b: DimT) -> DimT:
    """``a * b``."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return to_dim(index(a) * index(b))


def dim_add(a: DimT, b: DimT) -> DimT:
    """``a + b``."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return to_dim(index(a) + index(b))


def dim_sub(a: DimT, b: DimT) -> DimT:
    """``a - b``."""
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return to_dim(index(a) - index(b))


def dim_min(a: DimT, b: DimT) -> DimT:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return to_dim(E.min_(index(a), index(b)))


def dim_max(a: DimT, b: DimT) -> DimT:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return to_dim(E.max_(index(a), index(b)))


_COMPARE = {"==": E.EQ, "!=": E.NE, "<": E.LT, "<=": E.LE, ">": E.GT, ">=": E.GE}


def dim_compare(op: str, a: DimT, b: DimT) -> Optional[bool]:
    """``a op b`` (``op`` one of ``== != < <= > >=``) when it holds, or fails, for every value
    of the sizes (a named size is at least 1, a '?' size at least 0), else None (unknown).

    Exporters compare shapes with numbers: TorchScript writes ``expand`` as
    ``Where(Equal(shape, -1), 1, shape)``, and ``batch == -1`` is False for every batch."""
    if isinstance(a, int) and isinstance(b, int):
        return bool({"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])
    cond = _COMPARE[op](index(a), index(b))
    ranges = _ranges(cond)
    if can_prove(cond, ranges):
        return True
    if can_prove(E.Not(cond), ranges):
        return False
    return None


def prod(dims: Iterable[DimT]) -> DimT:
    """The product of ``dims`` (1 for none)."""
    out: DimT = 1
    for d in dims:
        out = dim_mul(out, d)
    return out


def dim_floordiv(a: DimT, b: DimT) -> DimT:
    """``a // b`` (``b > 0``)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if b == 1:
        return a
    return to_dim(E.FloorDiv(index(a), index(b)))


def dim_mod(a: DimT, b: DimT) -> DimT:
    """``a % b`` (``b > 0``)."""
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return to_dim(E.FloorMod(index(a), index(b)))


def dim_ceildiv(a: DimT, b: DimT) -> DimT:
    """``ceil(a / b)`` (``b > 0``)."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    if b == 1:
        return a
    return to_dim(E.FloorDiv(index(a) + index(b) - 1, index(b)))


def dim_div_exact(a: DimT, b: DimT) -> Optional[DimT]:
    """``a / b`` when it is provably a whole dimension, else None."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b and a % b == 0 else None
    if b == 0:
        return None
    fa, fb = _product(index(a)), _product(index(b))
    if fa is not None and fb is not None:  # monomials: divide coefficient and factors
        (ca, xa), (cb, xb) = fa, fb
        if cb and ca % cb == 0 and all(xa.count(x) >= xb.count(x) for x in set(xb)):
            rest = list(xa)
            for x in xb:
                rest.remove(x)
            q: DimT = ca // cb
            for x in rest:
                q = dim_mul(q, to_dim(x))
            return q
    q = dim_floordiv(a, b)
    return q if dim_mul(q, b) == a else None


def _product(e: E.Expr) -> Optional[tuple]:
    """``e`` as (int coefficient, [non-constant factors]) when it is a product, else None."""
    if isinstance(e, E.IntImm):
        return int(e.value), []
    if isinstance(e, E.Mul):
        pa, pb = _product(e.a), _product(e.b)
        if pa is None or pb is None:
            return None
        return pa[0] * pb[0], pa[1] + pb[1]
    if isinstance(e, (E.Add, E.Sub)):
        return None
    return 1, [e]


# -- sliding windows and broadcasting ----------------------------------------------------------------

def window_out(size: DimT, kernel: int, stride: int, dilation: int, pad_begin: int, pad_end: int,
               ceil_mode: bool = False) -> DimT:
    """Output length of a sliding window (conv, pool): ``(size + pads - dil*(k-1) - 1) // s + 1``.

    With ``ceil_mode`` a partial last window counts, unless it would start past the input and
    its leading padding (then it would read padding only; PyTorch and ONNX drop it)."""
    if not all(isinstance(v, int) for v in (kernel, stride, dilation, pad_begin, pad_end)):
        # (a tier-0 pool's window as sizes, each call passing its own: ceil mode has its last
        # window's rule, which such a kernel does not take)
        if ceil_mode:
            raise ShapeError("a window of symbolic sizes is computed in floor mode only")
        span = dim_sub(dim_add(size, dim_add(pad_begin, pad_end)), dim_add(dim_mul(dilation, dim_sub(kernel, 1)), 1))
        assume(index(span) >= 0, f"the window (kernel {kernel}, dilation {dilation}) fits in the padded input "
                                 f"of size {size}")
        return dim_add(dim_floordiv(span, stride), 1)
    pad_total = pad_begin + pad_end
    extra = pad_total - dilation * (kernel - 1) - 1
    if isinstance(size, int):
        span = size + extra
        if span < 0:
            raise ShapeError(f"the window (kernel {kernel}, dilation {dilation}) is larger than the "
                             f"padded input ({size} + {pad_total} padding)")
        out = (-(-span // stride) if ceil_mode else span // stride) + 1
        # ceil mode: the last window must start inside the input or its left padding
        if ceil_mode and out > 1 and (out - 1) * stride >= size + pad_begin:
            out -= 1
        return out
    assume(index(size) + extra >= 0, f"the window (kernel {kernel}, dilation {dilation}) fits in "
                                      f"the padded input of size {size}")
    if stride == 1:
        return dim_add(size, extra + 1)
    div = dim_ceildiv if ceil_mode else dim_floordiv
    return dim_add(div(dim_add(size, extra), stride), 1)


def _simpler(a: Dim, b: Dim) -> Dim:
    """The one of two dims assumed equal that downstream types keep: the shorter text."""
    return min(a, b, key=lambda d: (len(d.name), d.name))


def broadcast_dim(a: DimT, b: DimT, where: str = "") -> DimT:
    """The broadcast of two dimensions (numpy rules); ShapeError when two ints disagree. Two
    different symbolic dims (or a symbolic one and an int > 1) are assumed equal."""
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if isinstance(a, int) and isinstance(b, int):
        raise ShapeError(f"{a} vs {b}")
    why = f"broadcasting {where}: " if where else "broadcasting: "
    if isinstance(a, int) or isinstance(b, int):
        n, d = (a, b) if isinstance(a, int) else (b, a)
        assume(E.eq(index(d), n), f"{why}{d} must be {n} (broadcasting a symbolic size of 1 is not supported)")
        return n
    keep = _simpler(a, b)
    other = b if keep is a else a
    assume(E.eq(index(other), index(keep)), f"{why}{a} and {b} must be equal (broadcasting a symbolic "
                                            f"size of 1 is not supported)")
    return keep


def _broadcast_static(shapes: tuple) -> "tuple | None":
    """The broadcast of shapes of ints alone, or None (a symbol, or shapes that do not
    broadcast: the general path then names them). The common case, without the text of the
    shapes each dimension's assumption or error would need."""
    ndim = 0
    for s in shapes:
        if not all(type(d) is int for d in s):
            return None
        ndim = max(ndim, len(s))
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if d != out[i] and d != 1:
                if out[i] != 1:
                    return None
                out[i] = d
    return tuple(out)


def broadcast_shapes(*shapes: tuple) -> tuple:
    """numpy broadcasting of several shapes; ShapeError naming the shapes and the dimension."""
    static = _broadcast_static(shapes)
    if static is not None:
        return static
    ndim = max((len(s) for s in shapes), default=0)
    text = " and ".join(_types._tuple_str(s) for s in shapes)
    out = []
    for i in range(ndim):
        d: DimT = 1
        for s in shapes:
            j = i - (ndim - len(s))
            if j < 0:
                continue
            try:
                d = broadcast_dim(d, s[j], f"{text} (dimension {i - ndim})")
            except ShapeError as e:
                raise ShapeError(f"cannot broadcast shapes {text}: dimension {i - ndim} is {e}") from None
        out.append(d)
    return tuple(out)


# -- assumptions ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Assumption:
    """A condition on the named sizes that a shape rule took for granted, and why."""

    cond: E.Expr  # a bool expression over symbol Vars
    why: str


_ASSUMED: contextvars.ContextVar = contextvars.ContextVar("ember_dim_assumptions", default=None)


@contextlib.contextmanager
def collect_assumptions(fresh: bool = False) -> Iterator[dict]:
    """Record every :func:`assume` made inside (condition -> Assumption, first reason kept).
    Nested collections share the outer one's records, unless ``fresh`` (one program's own)."""
    outer = _ASSUMED.get()
    found: dict = {} if outer is None or fresh else outer
    token = _ASSUMED.set(found)
    try:
        yield found
    finally:
        _ASSUMED.reset(token)


def assume(cond: E.Expr, why: str) -> None:
    """Record that a shape rule relies on ``cond`` (a no-op when it provably holds)."""
    cond = _canonical(cond)
    if isinstance(cond, E.IntImm):
        if cond.value:
            return
        raise ShapeError(why)
    found = _ASSUMED.get()
    if found is not None and cond not in found:
        from .. import ir

        if ir._SPAN:  # the model node whose conversion made the rule assume it
            why = f"node {'+'.join(ir._SPAN)}: {why}"
        found[cond] = Assumption(cond, why)


def assume_le(a: DimT, b: DimT, why: str) -> None:
    if isinstance(a, int) and isinstance(b, int):
        if a > b:
            raise ShapeError(why)
        return
    assume(index(a) <= index(b), why)


def assume_equal(a: DimT, b: DimT, why: str) -> DimT:
    """Assume ``a == b``; returns the one downstream types keep."""
    if a == b:
        return a
    if isinstance(a, int) and isinstance(b, int):
        raise ShapeError(why)
    assume(E.eq(index(a), index(b)), why)
    if isinstance(a, int) or isinstance(b, int):
        return a if isinstance(a, int) else b
    return _simpler(a, b)


# -- text -----------------------------------------------------------------------------------------------

def parse_dim(text: str) -> DimT:
    """The dim written as ``text`` (``12*n``, ``(h-1)//2+1``, ``max(m,n)``, ``"seq len"``)."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ShapeError(f"{text!r} is not a dimension expression") from None

    def conv(n) -> E.Expr:
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return E.IntImm(n.value, "int64")
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            return E.Var(n.value, "int64")
        if isinstance(n, ast.Name):
            return E.Var(n.id, "int64")
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return E.IntImm(0, "int64") - conv(n.operand)
        if isinstance(n, ast.BinOp):
            ops = {ast.Add: E.Add, ast.Sub: E.Sub, ast.Mult: E.Mul, ast.FloorDiv: E.FloorDiv, ast.Mod: E.FloorMod}
            if type(n.op) in ops:
                return ops[type(n.op)](conv(n.left), conv(n.right))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("min", "max") \
                and len(n.args) == 2:
            return (E.min_ if n.func.id == "min" else E.max_)(conv(n.args[0]), conv(n.args[1]))
        raise ShapeError(f"{text!r} is not a dimension expression ({ast.dump(n)[:60]})")

    return to_dim(conv(tree))


def eval_dim(d: DimT, env: dict) -> int:
    """The value of ``d`` with its symbols bound by ``env`` (name -> int)."""
    if isinstance(d, int):
        return d
    return eval_index(d.expr, env)


def eval_index(e: E.Expr, env: dict) -> int:
    t = type(e)
    if t is E.IntImm:
        return int(e.value)
    if t is E.Var:
        return int(env[e.name])
    if t is E.Cast:
        return eval_index(e.value, env)
    a, b = eval_index(e.a, env), eval_index(e.b, env)
    return _EVAL[t.__name__](a, b)


_EVAL = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
         "FloorDiv": lambda a, b: a // b, "FloorMod": lambda a, b: a % b, "Min": min, "Max": max,
         "EQ": lambda a, b: int(a == b), "NE": lambda a, b: int(a != b), "LT": lambda a, b: int(a < b),
         "LE": lambda a, b: int(a <= b), "GT": lambda a, b: int(a > b), "GE": lambda a, b: int(a >= b),
         "And": lambda a, b: int(a and b), "Or": lambda a, b: int(a or b)}


__all__ = ["Assumption", "DATA_PREFIX", "VALUE_SEP", "value_source", "Dim", "assume", "data_dim", "is_data_symbol", "assume_equal", "assume_le", "broadcast_dim", "broadcast_shapes",
           "collect_assumptions", "dim_add", "dim_ceildiv", "dim_div_exact", "dim_floordiv", "dim_max",
           "dim_min", "dim_mod", "dim_mul", "dim_sub", "eval_dim", "index", "is_int", "parse_dim", "prod",
           "to_dim", "window_out"]
