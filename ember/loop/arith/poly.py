"""Integer expressions as polynomials: the canonical form behind the index simplifier.

An integer expression is read as ``const + sum(coeff * monomial)`` where a monomial is a sorted
tuple of *atoms*: variables and every expression that is not ``+``, ``-`` or ``*`` (a floordiv, a
load, a min, ...). Like terms are collected, so ``(i*8 + j) - i*8`` is ``j``. This is exact in
modular arithmetic (``+ - *`` form a ring modulo 2**bits), so it holds for every integer type,
overflow or not. Coefficients are kept modulo 2**bits as signed numbers.

A product of two multi-term sums is *not* expanded (that would grow the expression); it stays an
atom. A single monomial times a sum is distributed, which costs nothing and lets
``(i + 1)*n - n`` become ``i*n``.

Order keys, variable sets and polynomials are cached on the (immutable) nodes themselves, the way
``node.py`` caches hashes, so they are computed once per node for the life of the program.
"""
from __future__ import annotations

from .. import dtype as dt
from ..expr import Add, Expr, FloatImm, IntImm, Mul, Sub, Var
from ..node import Node, field_names
from ..stmt import Buffer
from .fold import imm, wrap_signed


# --- deterministic order and variable sets ---------------------------------------------------

def order_key(n: Node) -> tuple:
    """A total, run-independent order on nodes (hashes of strings change between runs).

    Every key is ``(rank, label, number, children)`` so keys of any two nodes compare.
    """
    d = n.__dict__
    k = d.get("_arith_key")
    if k is None:
        t = type(n)
        if t is IntImm:
            k = (0, n.type, n.value, ())
        elif t is FloatImm:
            k = (1, f"{n.type}:{n.value!r}", 0, ())
        elif t is Var:
            k = (2, f"{n.name}:{n.type}", 0, ())
        else:
            k = (3, t.__name__, 0, tuple(_field_key(getattr(n, name)) for name in field_names(t)))
        d["_arith_key"] = k
    return k


def _field_key(v) -> tuple:
    if isinstance(v, Node):
        return order_key(v)
    if isinstance(v, tuple):
        return (5, "", len(v), tuple(_field_key(x) for x in v))
    if v is None:
        return (6, "", 0, ())
    if isinstance(v, str):
        return (7, v, 0, ())
    if isinstance(v, int):
        return (8, "", int(v), ())
    return (9, repr(v), 0, ())


_EMPTY: frozenset = frozenset()


def vars_of(n) -> frozenset:
    """Every Var a node mentions, bound or free (buffer shapes are not looked into)."""
    if isinstance(n, tuple):
        out = _EMPTY
        for x in n:
            out = out | vars_of(x)
        return out
    if not isinstance(n, Node):
        return _EMPTY
    d = n.__dict__
    s = d.get("_arith_vars")
    if s is None:
        t = type(n)
        if t is Var:
            s = frozenset((n,))
        elif t in (IntImm, FloatImm) or isinstance(n, Buffer):
            s = _EMPTY
        else:
            s = _EMPTY
            for name in field_names(type(n)):
                v = getattr(n, name)
                if isinstance(v, (Node, tuple)):
                    s = s | vars_of(v)
        d["_arith_vars"] = s
    return s


# --- polynomials -----------------------------------------------------------------------------

class Poly:
    """``const + sum(k * prod(monomial))`` over one integer dtype. Never mutated once built."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, terms: dict, const: int, dtype: str):
        self.terms = terms  # tuple of atoms (sorted by order_key) -> nonzero signed coefficient
        self.const = const
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Poly({self.terms!r}, {self.const})"


def make(terms: dict, const: int, dtype: str) -> Poly:
    """A normalized polynomial: coefficients reduced modulo 2**bits, zero terms dropped."""
    out = {}
    for m, k in terms.items():
        k = wrap_signed(k, dtype)
        if k:
            out[m] = k
    return Poly(out, wrap_signed(const, dtype), dtype)


def constant(c: int, dtype: str) -> Poly:
    return Poly({}, wrap_signed(c, dtype), dtype)


def add(p: Poly, q: Poly, sign: int = 1) -> Poly:
    """``p + sign*q``."""
    terms = dict(p.terms)
    for m, k in q.terms.items():
        terms[m] = terms.get(m, 0) + sign * k
    return make(terms, p.const + sign * q.const, p.dtype)


def scale(p: Poly, c: int) -> Poly:
    return make({m: k * c for m, k in p.terms.items()}, p.const * c, p.dtype)


def merge(m1: tuple, m2: tuple) -> tuple:
    return tuple(sorted(m1 + m2, key=order_key))


def _mono_times(q: Poly, m: tuple, k: int) -> Poly:
    terms: dict = {}
    for m2, k2 in q.terms.items():
        mm = merge(m, m2)
        terms[mm] = terms.get(mm, 0) + k * k2
    if q.const:
        terms[m] = terms.get(m, 0) + k * q.const
    return make(terms, 0, q.dtype)


def mul(p: Poly, q: Poly):
    """``p * q`` when that does not grow the expression, else None (the product stays an atom)."""
    if not p.terms:
        return scale(q, p.const)
    if not q.terms:
        return scale(p, q.const)
    if len(p.terms) == 1 and p.const == 0:
        (m, k), = p.terms.items()
        return _mono_times(q, m, k)
    if len(q.terms) == 1 and q.const == 0:
        (m, k), = q.terms.items()
        return _mono_times(p, m, k)
    return None


def atom(e: Expr) -> Poly:
    from .common import dtype_of

    return Poly({(e,): 1}, 0, dtype_of(e))


def split(p: Poly, pred) -> tuple[Poly, Poly]:
    """(terms where ``pred(monomial, coeff)``, the other terms and the constant)."""
    yes = {m: k for m, k in p.terms.items() if pred(m, k)}
    no = {m: k for m, k in p.terms.items() if m not in yes}
    return Poly(yes, 0, p.dtype), Poly(no, p.const, p.dtype)


def poly_of(e: Expr) -> Poly:
    """The polynomial of a scalar integer expression (cached on the node)."""
    d = e.__dict__
    p = d.get("_arith_poly")
    if p is None:
        t = type(e)
        if t is IntImm:
            p = constant(e.value, e.dtype)
        elif t is Add:
            p = add(poly_of(e.a), poly_of(e.b))
        elif t is Sub:
            p = add(poly_of(e.a), poly_of(e.b), -1)
        elif t is Mul:
            p = mul(poly_of(e.a), poly_of(e.b)) or atom(e)
        else:
            p = atom(e)
        d["_arith_poly"] = p
    return p


def _term_key(item) -> tuple:
    m, k = item
    # Big coefficients first, then higher degree: row-major indices read i*64 + j*8 + k.
    return (-abs(k), -len(m), tuple(order_key(a) for a in m))


def _mono_expr(m: tuple, k: int, dtype: str) -> Expr:
    x = m[0]
    for a in m[1:]:
        x = Mul(x, a)
    return x if k == 1 else Mul(x, imm(k, dtype))


def to_expr(p: Poly) -> Expr:
    """The canonical expression of ``p``: positive terms, then subtracted ones, then the constant."""
    dtype = p.dtype
    items = sorted(p.terms.items(), key=_term_key)
    pos = [(m, k) for m, k in items if k > 0]
    neg = [(m, -k) for m, k in items if k < 0]
    acc, c = None, p.const
    if not pos and neg and c > 0:
        acc, c = imm(c, dtype), 0  # 5 - i rather than i*-1 + 5
    for m, k in pos:
        t = _mono_expr(m, k, dtype)
        acc = t if acc is None else Add(acc, t)
    for m, k in neg:
        acc = _mono_expr(m, -k, dtype) if acc is None else Sub(acc, _mono_expr(m, k, dtype))
    if acc is None:
        acc = imm(c, dtype)
    elif c > 0:
        acc = Add(acc, imm(c, dtype))
    elif c < 0:
        acc = Sub(acc, imm(-c, dtype))
    acc.__dict__.setdefault("_arith_poly", p)
    return acc


def is_int_scalar(dtype: str) -> bool:
    return dt.is_int(dtype) and dt.lanes(dtype) == 1


__all__ = ["Poly", "add", "atom", "constant", "is_int_scalar", "make", "mul", "order_key", "poly_of",
           "scale", "split", "to_expr", "vars_of"]
