"""Arithmetic on dimensions that may be symbolic, for type inference.

A dimension is an ``int`` or a :class:`~ember.graph.types.Dim`. When every operand is an int
the result is the exact int. When a symbol is involved, the result is the operand itself where
the arithmetic is an identity (``n * 1``, ``n + 0``, a stride-1 "same" convolution), and
otherwise a *derived* Dim whose name spells the expression (``Dim("12*batch")``,
``Dim("(h-1)//2+1")``). Derived names are deterministic, so the same computation on the same
symbols gives the same Dim (equal values get equal types), and a reader sees where a size came
from. Products are canonical (integer factor first, symbols sorted), so ``n*m`` and ``m*n``
agree and a reshape that divides a product by a symbol recovers it exactly.

    >>> dim_mul(Dim("batch"), 12), dim_mul(3, 4), dim_add(Dim("h"), 0)
    (Dim('12*batch'), 12, Dim('h'))
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Optional, Union

from .. import types as _types
from ...errors import ShapeError

Dim = _types.Dim
DimT = Union[int, Dim]

_ATOM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z|\d+\Z")


def is_int(d) -> bool:
    return isinstance(d, int)


def _paren(d: DimT) -> str:
    """The text of ``d`` as an operand: bare for a name or number, parenthesized otherwise."""
    s = str(d) if isinstance(d, int) else d.name
    if _ATOM.match(s) or _factors_of_name(s) is not None:
        return s
    return f"({s})"


# -- products (the common case: flatten, reshape, batch*channels) -------------------------------

def _factors_of_name(name: str) -> Optional[tuple]:
    """A product name ``"12*batch*seq"`` taken apart into (int factor, symbol names); None if the
    name is not a product of identifiers (then it is one opaque symbol)."""
    parts = name.split("*")
    if len(parts) < 2:
        return None
    coef, syms = 1, []
    for p in parts:
        if p.isdigit():
            coef *= int(p)
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p):
            syms.append(p)
        else:
            return None
    return coef, syms


def _factors(d: DimT) -> tuple[int, Counter]:
    """``d`` as an integer factor times a multiset of symbol names."""
    if isinstance(d, int):
        return d, Counter()
    f = _factors_of_name(d.name)
    if f is None:
        return 1, Counter([d.name])
    return f[0], Counter(f[1])


def _from_factors(coef: int, syms: Counter) -> DimT:
    names = sorted(syms.elements())
    if not names or coef == 0:
        return coef
    if coef == 1 and len(names) == 1:
        return Dim(names[0])
    # symbol names that are not identifiers cannot be parsed back out of a product; they are
    # wrapped, and such a product is then one opaque symbol
    text = "*".join(([str(coef)] if coef != 1 else []) + [n if _ATOM.match(n) else f"({n})" for n in names])
    return Dim(text)


def dim_mul(a: DimT, b: DimT) -> DimT:
    """``a * b``."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    ca, sa = _factors(a)
    cb, sb = _factors(b)
    return _from_factors(ca * cb, sa + sb)


def prod(dims: Iterable[DimT]) -> DimT:
    """The product of ``dims`` (1 for none)."""
    out: DimT = 1
    for d in dims:
        out = dim_mul(out, d)
    return out


def dim_div_exact(a: DimT, b: DimT) -> Optional[DimT]:
    """``a / b`` when it is provably a whole dimension (b's factors divide a's), else None."""
    ca, sa = _factors(a)
    cb, sb = _factors(b)
    if cb == 0 or ca % cb or any(sa[k] < v for k, v in sb.items()):
        return None
    return _from_factors(ca // cb, sa - sb)


# -- sums and divisions (convolution and pooling windows, slices) ------------------------------

def dim_add(a: DimT, b: DimT) -> DimT:
    """``a + b``."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if b == 0:
        return a
    if a == 0:
        return b
    # '+' binds loosest in derived names, so the left operand never needs parentheses
    text = str(a) if isinstance(a, int) else a.name
    if isinstance(b, int):
        return Dim(f"{text}{b:+d}")
    return Dim(f"{text}+{_paren(b)}")


def dim_floordiv(a: DimT, b: int) -> DimT:
    """``a // b`` for an int ``b > 0``."""
    if isinstance(a, int):
        return a // b
    if b == 1:
        return a
    exact = dim_div_exact(a, b)
    return exact if exact is not None else Dim(f"{_paren(a)}//{b}")


def dim_ceildiv(a: DimT, b: int) -> DimT:
    """``ceil(a / b)`` for an int ``b > 0``."""
    if isinstance(a, int):
        return -(-a // b)
    if b == 1:
        return a
    exact = dim_div_exact(a, b)
    return exact if exact is not None else Dim(f"ceil({a}/{b})")


def window_out(size: DimT, kernel: int, stride: int, dilation: int, pad_begin: int, pad_end: int,
               ceil_mode: bool = False) -> DimT:
    """Output length of a sliding window (conv, pool): ``(size + pads - dil*(k-1) - 1) // s + 1``.

    With ``ceil_mode`` a partial last window counts, unless it would start past the input and
    its leading padding (then it would read padding only; PyTorch and ONNX drop it)."""
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
    if stride == 1:
        return dim_add(size, extra + 1)
    div = dim_ceildiv if ceil_mode else dim_floordiv
    return dim_add(div(dim_add(size, extra), stride), 1)


# -- broadcasting -------------------------------------------------------------------------------

def broadcast_dim(a: DimT, b: DimT) -> DimT:
    """The broadcast of two dimensions (numpy rules); ShapeError when two ints disagree."""
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if isinstance(a, int) and isinstance(b, int):
        raise ShapeError(f"{a} vs {b}")
    # a symbol against an int > 1: the symbol must be that int or 1, the result is the int
    if isinstance(a, int):
        return a
    if isinstance(b, int):
        return b
    # two different symbols: legal only if they are equal or one is 1, so the result is their max
    x, y = sorted([a.name, b.name])
    return Dim(f"max({x},{y})")


def broadcast_shapes(*shapes: tuple) -> tuple:
    """numpy broadcasting of several shapes; ShapeError naming the shapes and the dimension."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        d: DimT = 1
        for s in shapes:
            j = i - (ndim - len(s))
            if j < 0:
                continue
            try:
                d = broadcast_dim(d, s[j])
            except ShapeError as e:
                text = " and ".join(_types._tuple_str(s) for s in shapes)
                raise ShapeError(f"cannot broadcast shapes {text}: dimension {i - ndim} is {e}") from None
        out.append(d)
    return tuple(out)
