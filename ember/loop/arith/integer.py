"""Integer rules: canonical sums, floordiv/floormod, min/max, comparisons, bit operations.

Rules that reason about magnitudes are applied to int64 (the index type, assumed never to
overflow) only; other integer types get ring identities (exact under wraparound) and decisions
from intervals that account for wrapping.
"""
from __future__ import annotations

import functools
import math

from ..expr import (Add, BitAnd, BitOr, BitXor, Div, EQ, Expr, FloorDiv, FloorMod, GE, GT, IntImm, LE, LT,
                    Max, Min, Mod, Mul, NE, Sub)
from . import poly as P
from .common import FLIP, INDEX, INT64_MAX, dtype_of, is_index, same_block
from .fold import bool_const, fold_binary, imm, wrap, wrap_signed
from .poly import order_key, poly_of, to_expr, vars_of


class IntegerMixin:
    """Mixed into the Analyzer (uses ``iv``, ``iv_poly``, ``prove_le0``)."""

    def _int(self, cls, a, b, ctx):
        if cls is Add or cls is Sub or cls is Mul:
            return self._arith(cls, a, b, ctx)
        if cls is FloorDiv:
            return self._floordiv(a, b, ctx)
        if cls is FloorMod:
            return self._floormod(a, b, ctx)
        if cls is Div or cls is Mod:
            return self._truncdivmod(cls, a, b, ctx)
        if cls is Min or cls is Max:
            return self._minmax(cls, a, b, ctx)
        if cls in FLIP:
            return self._cmp(cls, a, b, ctx)
        return self._bits(cls, a, b)

    def _arith(self, cls, a, b, ctx):
        pa, pb = poly_of(a), poly_of(b)
        if cls is Add:
            p = P.add(pa, pb)
        elif cls is Sub:
            p = P.add(pa, pb, -1)
        else:
            p = P.mul(pa, pb)
            if p is None:  # sum * sum: kept as one product, operands in canonical order
                x, y = sorted((a, b), key=order_key)
                return Mul(x, y)
        return to_expr(self._fuse_divmod(p, ctx))

    def _arith_chain(self, e, ctx):
        """A tree of int ``+ - *`` simplified into one canonical sum."""
        return to_expr(self._fuse_divmod(self._chain_poly(e, ctx), ctx))

    def _chain_poly(self, e, ctx) -> P.Poly:
        terms: dict = {}
        c = self._collect(e, ctx, 1, terms, 0)
        return P.make(terms, c, dtype_of(e))

    def _collect(self, e, ctx, k: int, terms: dict, c: int) -> int:
        """Add ``k * e`` into ``terms``; returns the new constant. Leaves are simplified."""
        t = type(e)
        if (t is Add or t is Sub or t is Mul) and dtype_of(e.b) == dtype_of(e):
            if t is Add or t is Sub:
                c = self._collect(e.a, ctx, k, terms, c)
                return self._collect(e.b, ctx, k if t is Add else -k, terms, c)
            if type(e.b) is IntImm:
                return self._collect(e.a, ctx, k * wrap(e.b.value, dtype_of(e)), terms, c)
            if type(e.a) is IntImm:
                return self._collect(e.b, ctx, k * wrap(e.a.value, dtype_of(e)), terms, c)
            pa, pb = self._chain_poly(e.a, ctx), self._chain_poly(e.b, ctx)
            p = P.mul(pa, pb)
            if p is None:  # sum * sum: kept as one product, operands in canonical order
                x, y = sorted((self._arith_chain_of(pa, ctx), self._arith_chain_of(pb, ctx)), key=order_key)
                p = P.atom(Mul(x, y))
        elif t is IntImm:
            return c + k * wrap(e.value, e.dtype)
        else:
            p = poly_of(self.expr(e, ctx))
        for m, kk in p.terms.items():
            terms[m] = terms.get(m, 0) + k * kk
        return c + k * p.const

    def _arith_chain_of(self, p: P.Poly, ctx):
        return to_expr(self._fuse_divmod(p, ctx))

    def _fuse_divmod(self, p: P.Poly, ctx) -> P.Poly:
        """``(x // c)*c*k*r + (x % c)*k*r -> x*k*r`` (``r`` a product of other factors):
        recombine what a split took apart. A fused loop's index into a row-major buffer of
        symbolic shape, ``((i // (s*4))*4 + i // s % 4)*s + i % s``, folds back to ``i``."""
        for _ in range(8):
            fused = None
            for m, k in p.terms.items():
                for j, a in enumerate(m):
                    if type(a) is FloorMod and (j == 0 or a is not m[j - 1]):
                        fused = self._fuse_pair(p, m, k, j, ctx)
                        if fused is not None:
                            break
                if fused is not None:
                    break
            if fused is None:
                return p
            p = fused
        return p

    def _fuse_pair(self, p: P.Poly, m: tuple, k: int, j: int, ctx):
        """``p`` with its term ``k*m`` (whose factor ``m[j]`` is ``x % c``) and the term of
        ``x // c`` that pairs with it replaced by ``x`` times the rest, or None."""
        a = m[j]
        rest = m[:j] + m[j + 1:]
        unit = _divisor_monomial(a.b)
        # x // 0 and x % 0 are 0 on the machine: the identity needs a nonzero divisor.
        if unit is None or (unit[0] and not self._nonzero(a.b, ctx)):
            return None
        mb, kb = unit
        want = wrap_signed(k * kb, p.dtype)
        x, dm = a.a, None
        for q in _quotients(self, a, ctx):
            cand = P.merge(P.merge((q,), mb), rest)
            if p.terms.get(cand) == want:
                dm = cand
                break
            nested = self._fuse_nested(p, m, k, a, q, mb, rest, want, ctx)
            if nested is not None:
                return nested
        if dm is None:
            # the dividends may differ by a multiple of a constant divisor: the remainder's was
            # reduced (a split's (15 i + j) % 9 is (6 i + j) % 9)
            dm = None if mb or rest else _congruent_div(p, a, kb, want)
            if dm is None:
                return None
            x = dm[0].a
        pair = P.Poly({m: k, dm: p.terms[dm]}, 0, p.dtype)
        tail = P.mul(poly_of(x), P.make({rest: k}, 0, p.dtype)) if rest else P.scale(poly_of(x), k)
        return P.add(P.add(p, pair, -1), tail)

    def _fuse_nested(self, p: P.Poly, m: tuple, k: int, a, q, mb: tuple, rest: tuple, want: int, ctx):
        """``c*((x // c) % d)*k*r + (x % c)*k*r -> (x % (c*d))*k*r`` for positive ``c`` and
        ``d``: the same recombination from the inside, where the outermost quotient is absent
        (a buffer of the fused loop's shape but its first axis, broadcast or of one: a
        row-major offset ``(i // s // s % n)*s*s + (i // s % s)*s + i % s`` is ``i``), or None."""
        if self.iv(a.b, ctx)[0] < 1:
            return None
        for m2, k2 in p.terms.items():
            if k2 != want or m2 == m:
                continue
            for f in m2:
                if type(f) is FloorMod and f.a == q and self.iv(f.b, ctx)[0] >= 1 \
                        and P.merge(P.merge((f,), mb), rest) == m2:
                    whole = self._floormod(a.a, self._arith(Mul, a.b, f.b, ctx), ctx)
                    pair = P.Poly({m: k, m2: k2}, 0, p.dtype)
                    tail = P.mul(poly_of(whole), P.make({rest: k}, 0, p.dtype)) if rest else P.scale(poly_of(whole), k)
                    return P.add(P.add(p, pair, -1), tail)
        return None

    def _nonzero(self, b, ctx) -> bool:
        lo, hi = self.iv(b, ctx)
        if lo > 0 or hi < 0:
            return True
        if is_index(dtype_of(b)):
            pb = poly_of(b)
            one = P.constant(1, INDEX)
            return self.prove_le0(P.add(one, pb, -1), ctx) or self.prove_le0(P.add(pb, one), ctx)
        return False

    def _floordiv(self, a, b, ctx):
        dtype = dtype_of(a)
        if type(b) is IntImm:
            c = wrap(b.value, dtype)
            if c == 1:
                return a
            if c > 0:
                if is_index(dtype):
                    return self._floordiv_index(a, c, ctx)
                k = same_block(self.iv(a, ctx), c)
                return imm(k, dtype) if k is not None else FloorDiv(a, b)
        ia, ib = self.iv(a, ctx), self.iv(b, ctx)
        if ib[0] > 0 and ia[0] >= 0 and ia[1] < ib[0]:
            return imm(0, dtype)
        if is_index(dtype) and type(a) is FloorDiv and ib[0] >= 1 and self.iv(a.b, ctx)[0] >= 1:
            # (x // n) // m == x // (n*m) for positive divisors: one division, and the form
            # that pairs with x % (n*m) (``_fuse_divmod``)
            return self._floordiv(a.a, self._arith(Mul, a.b, b, ctx), ctx)
        qr = self._symbolic_divmod(a, b, ctx) if is_index(dtype) else None
        return to_expr(qr[0]) if qr is not None else FloorDiv(a, b)

    def _floordiv_index(self, a, c: int, ctx):
        if type(a) is FloorDiv and type(a.b) is IntImm and a.b.value > 0 and a.b.value * c <= INT64_MAX:
            return self._floordiv(a.a, imm(a.b.value * c, INDEX), ctx)  # (x // c1) // c == x // (c1*c)
        if type(a) is FloorDiv and type(a.b) is not IntImm and self.iv(a.b, ctx)[0] >= 1:
            # the same for a positive symbolic divisor: (x // n) // c == x // (n*c)
            return self._floordiv(a.a, self._arith(Mul, a.b, imm(c, INDEX), ctx), ctx)
        p = poly_of(a)
        g = math.gcd(c, *p.terms.values()) if p.terms else math.gcd(c, p.const)
        if g > 1:  # (4i + 2j) // 8 == (2i + j) // 4 and (4i + 1) // 68 == i // 17: the terms are g*y,
            # and floor((g*y + k) / c) == floor((y + k // g) / (c / g)) as k % g < g cannot carry
            p = P.make({m: k // g for m, k in p.terms.items()}, p.const // g, INDEX)
            c //= g
            if c == 1:
                return to_expr(p)
        # x == c*q + r  =>  x // c == q + r // c; the constant keeps its part in [0, c).
        q, r = P.split(p, lambda m, k: k % c == 0)
        q = P.make({m: k // c for m, k in q.terms.items()}, r.const // c, INDEX)
        r = P.Poly(r.terms, r.const % c, INDEX)
        if q.terms or q.const:
            rest = self._floordiv(to_expr(r), imm(c, INDEX), ctx) if r.terms else imm(0, INDEX)
            return self._arith(Add, to_expr(q), rest, ctx)
        k = self._same_block_poly(p, c, ctx)
        if k is not None:
            return imm(k, INDEX)
        split = self._low_part(p, c, ctx)
        if split is not None:  # (32 o + i) // 64 == o // 2 for i in [0, 32)
            d, high, _ = split
            return self._floordiv(to_expr(high), imm(c // d, INDEX), ctx)
        return FloorDiv(to_expr(p), imm(c, INDEX))

    def _low_part(self, p: P.Poly, c: int, ctx):
        """``(d, y, r)`` with ``p == d*y + r``, ``d`` a divisor of ``c`` (the largest that
        serves, below ``c``), ``y`` the terms whose coefficients ``d`` divides (divided) and
        ``0 <= r < d`` wherever ``ctx`` allows: then ``p // c == y // (c/d)`` and ``p % c ==
        d * (y % (c/d)) + r``. A vector of 32 lanes in a row of 64 (a head of attention read
        across heads) is then one load at ``o // 2``, where ``(32 o + lane) // 64`` was a gather."""
        if not p.terms:
            return None
        for d in _proper_divisors(c):
            high, low = P.split(p, lambda m, k: k % d == 0)
            if not high.terms:
                continue
            low = P.Poly(low.terms, p.const, INDEX)
            lo, hi = self.iv_poly(low, ctx)
            if lo >= 0 and hi < d:
                return d, P.make({m: k // d for m, k in high.terms.items()}, 0, INDEX), low
        return None

    def _floormod(self, a, b, ctx):
        dtype = dtype_of(a)
        if type(b) is IntImm:
            c = wrap(b.value, dtype)
            if c == 1:
                return imm(0, dtype)
            if c > 0:
                if is_index(dtype):
                    return self._floormod_index(a, c, ctx)
                k = same_block(self.iv(a, ctx), c)
                if k is not None:  # a machine value in [k*c, k*c + c): subtracting is exact
                    return self._arith(Sub, a, imm(k * c, dtype), ctx)
                return FloorMod(a, b)
        ia, ib = self.iv(a, ctx), self.iv(b, ctx)
        if ib[0] > 0 and ia[0] >= 0 and ia[1] < ib[0]:
            return a
        qr = self._symbolic_divmod(a, b, ctx) if is_index(dtype) else None
        return to_expr(qr[1]) if qr is not None else FloorMod(a, b)

    def _symbolic_divmod(self, a, b, ctx):
        """(q, r) with ``a == q*b + r`` and ``0 <= r < b`` provable, for a divisor ``b`` that is
        one positive monomial (``(i*n + j) // n -> i`` when j is in [0, n - 1])."""
        unit = _divisor_monomial(b)
        if unit is None or not unit[0]:
            return None
        mb, cb = unit
        pb = poly_of(b)
        if not self.prove_le0(P.add(P.constant(1, INDEX), pb, -1), ctx):  # b >= 1
            return None
        pa = poly_of(a)
        q, r = {}, {}
        for m, k in pa.terms.items():
            rest = _mono_div(m, mb)
            if rest is None or k % cb:
                r[m] = k
            else:
                q[rest] = q.get(rest, 0) + k // cb
        if not q:
            # (a dividend already in [0, b): a fused index's remainder by its loop's extent)
            one = P.constant(1, INDEX)
            if self.prove_le0(P.scale(pa, -1), ctx) and self.prove_le0(P.add(P.add(pa, pb, -1), one), ctx):
                return P.constant(0, INDEX), pa
            return None
        qc = q.pop((), 0)
        qp, rp = P.make(q, qc, INDEX), P.make(r, pa.const, INDEX)
        one = P.constant(1, INDEX)
        if self.prove_le0(P.scale(rp, -1), ctx) and self.prove_le0(P.add(P.add(rp, pb, -1), one), ctx):
            return qp, rp  # 0 <= r < b
        if self.prove_le0(P.add(rp, one), ctx) and self.prove_le0(P.scale(P.add(rp, pb), -1), ctx):
            return P.add(qp, one, -1), P.add(rp, pb)  # -b <= r < 0: one fewer whole b
        return None

    def _floormod_index(self, a, c: int, ctx):
        if type(a) is FloorMod and type(a.b) is IntImm and a.b.value > 0 and a.b.value % c == 0:
            return self._floormod(a.a, imm(c, INDEX), ctx)  # (x % (c*m)) % c == x % c
        p = poly_of(a)
        # Inside a sum taken modulo c, x % (c*m) may be replaced by x.
        for _ in range(8):
            inner = [(m, k) for m, k in p.terms.items() if len(m) == 1 and type(m[0]) is FloorMod
                     and type(m[0].b) is IntImm and m[0].b.value > 0 and m[0].b.value % c == 0]
            if not inner:
                break
            for m, k in inner:
                p = P.add(P.add(p, P.Poly({m: k}, 0, INDEX), -1), P.scale(poly_of(m[0].a), k))
        # Multiples of c vanish; big coefficients reduce.
        terms = {}
        for m, k in p.terms.items():
            if k % c:
                terms[m] = k % c if abs(k) >= c else k
        p = P.make(terms, p.const % c, INDEX)
        if not p.terms:
            return imm(p.const, INDEX)
        g = math.gcd(c, p.const, *p.terms.values())
        if g > 1:  # (2x) % 8 == (x % 4) * 2
            inner = self._floormod_index(to_expr(P.make({m: k // g for m, k in p.terms.items()},
                                                        p.const // g, INDEX)), c // g, ctx)
            return self._arith(Mul, inner, imm(g, INDEX), ctx)
        k = self._same_block_poly(p, c, ctx)
        if k is not None:
            return to_expr(P.add(p, P.constant(k * c, INDEX), -1))
        split = self._low_part(p, c, ctx)
        if split is not None:  # (32 o + i) % 64 == 32 * (o % 2) + i for i in [0, 32)
            d, high, low = split
            inner = self._floormod(to_expr(high), imm(c // d, INDEX), ctx)
            return self._arith(Add, self._arith(Mul, inner, imm(d, INDEX), ctx), to_expr(low), ctx)
        return FloorMod(to_expr(p), imm(c, INDEX))

    def _same_block_poly(self, p: P.Poly, c: int, ctx):
        """``k`` when the index polynomial ``p`` lies in ``[k c, k c + c)`` wherever ``ctx``
        allows, else None: by constant intervals, then by symbolic bounds where a range is
        symbolic -- with a dynamic batch, ``i // 192 // (batch * 49)`` over ``i`` in ``[0,
        batch * 28224)`` is in [0, 2] though no constant interval says so (a window
        partition's vector of 16 channels then stays one load, not a gather)."""
        k = same_block(self.iv_poly(p, ctx), c)
        if k is None and ctx.symbolic and ctx.has_sym and ctx.sym.keys() & vars_of(to_expr(p)):
            lo, hi = self.sym_bounds(to_expr(p), ctx)
            if lo is not None and hi is not None:
                k = same_block((self.iv(lo, ctx)[0], self.iv(hi, ctx)[1]), c)
        return k

    def _truncdivmod(self, cls, a, b, ctx):
        dtype = dtype_of(a)
        if type(b) is IntImm and wrap(b.value, dtype) == 1:
            return a if cls is Div else imm(0, dtype)
        ia, ib = self.iv(a, ctx), self.iv(b, ctx)
        if ia[0] >= 0 and ib[0] > 0:  # C and floor division agree here
            return self._floordiv(a, b, ctx) if cls is Div else self._floormod(a, b, ctx)
        return cls(a, b)

    def _minmax(self, cls, a, b, ctx):
        if a == b:
            return a
        if type(a) is IntImm or (type(b) is not IntImm and order_key(b) < order_key(a)):
            a, b = b, a  # canonical operand order, constants last
        le = self._le(a, b, ctx)
        if le is not None:
            return (a if le else b) if cls is Min else (b if le else a)
        if type(b) is IntImm and type(a) is cls and type(a.b) is IntImm:
            c = min(a.b.value, b.value) if cls is Min else max(a.b.value, b.value)
            return self._minmax(cls, a.a, imm(c, dtype_of(a)), ctx)
        return cls(a, b)

    def _le(self, a, b, ctx):
        """True if a <= b always, False if b <= a always, else None."""
        if is_index(dtype_of(a)):
            d = P.add(poly_of(a), poly_of(b), -1)
            if self.prove_le0(d, ctx):
                return True
            if self.prove_le0(P.scale(d, -1), ctx):
                return False
            return None
        ia, ib = self.iv(a, ctx), self.iv(b, ctx)
        if ia[1] <= ib[0]:
            return True
        if ib[1] <= ia[0]:
            return False
        return None

    def _cmp(self, cls, a, b, ctx):
        if a == b:
            return bool_const(cls in (EQ, LE, GE))
        if is_index(dtype_of(a)):
            d = P.add(poly_of(a), poly_of(b), -1)
            v = self._decide(cls, d, ctx)
            if v is not None:
                return bool_const(v)
            return self._cmp_canonical(cls, d)
        v = _decide_iv(cls, self.iv(a, ctx), self.iv(b, ctx))
        return bool_const(v) if v is not None else cls(a, b)

    def _decide(self, cls, d: P.Poly, ctx):
        """The value of ``d <cls> 0`` if provable either way."""
        if not d.terms:
            return fold_binary(cls, imm(d.const, INDEX), imm(0, INDEX)).value == 1
        le = lambda p: self.prove_le0(p, ctx)  # noqa: E731
        one = P.constant(1, INDEX)
        nd = P.scale(d, -1)
        lt0, ge0 = (lambda: le(P.add(d, one))), (lambda: le(nd))  # d < 0, d >= 0
        gt0, le0 = (lambda: le(P.add(nd, one))), (lambda: le(d))  # d > 0, d <= 0
        if cls is LT:
            return True if lt0() else False if ge0() else None
        if cls is GE:
            return True if ge0() else False if lt0() else None
        if cls is LE:
            return True if le0() else False if gt0() else None
        if cls is GT:
            return True if gt0() else False if le0() else None
        if lt0() or gt0():
            return cls is NE
        return None

    def _cmp_canonical(self, cls, d: P.Poly):
        """``d <cls> 0`` written as positive terms on the left, the rest on the right, divided
        by the gcd of the coefficients (``i*6 < 35 -> i < 6``)."""
        g = math.gcd(*d.terms.values())
        if g > 1:
            k0 = d.const
            if cls is EQ or cls is NE:
                if k0 % g:
                    return bool_const(cls is NE)
                c = k0 // g
            elif cls is LT or cls is GE:  # g*t + k0 < 0  <=>  t + floor(k0/g) < 0
                c = k0 // g
            else:  # g*t + k0 <= 0  <=>  t + ceil(k0/g) <= 0
                c = -(-k0 // g)
            d = P.make({m: k // g for m, k in d.terms.items()}, c, INDEX)
        left = P.make({m: k for m, k in d.terms.items() if k > 0}, 0, INDEX)
        right = P.make({m: -k for m, k in d.terms.items() if k < 0}, -d.const, INDEX)
        if left.terms:
            return cls(to_expr(left), to_expr(right))
        return FLIP[cls](to_expr(P.Poly(right.terms, 0, INDEX)), imm(d.const, INDEX))

    def _bits(self, cls, a, b):
        dtype = dtype_of(a)
        ones = wrap(-1, dtype)
        for x, y in ((a, b), (b, a)) if cls in (BitAnd, BitOr, BitXor) else ((a, b),):
            if type(y) is not IntImm:
                continue
            v = wrap(y.value, dtype)
            if v == 0:
                return imm(0, dtype) if cls is BitAnd else x
            if v == ones and cls in (BitAnd, BitOr):
                return x if cls is BitAnd else imm(ones, dtype)
        if a == b and cls in (BitAnd, BitOr):
            return a
        if a == b and cls is BitXor:
            return imm(0, dtype)
        return cls(a, b)

    # --- floats, logic, vectors ----------------------------------------------------------------


def _quotients(an, mod: FloorMod, ctx):
    """The quotient atoms that pair with ``mod`` (``x % c``): ``x // c`` as built, and as the
    simplifier writes it where that differs (``(y // s) // 4`` is ``y // (s*4)``)."""
    raw = FloorDiv(mod.a, mod.b)
    yield raw
    q = an._floordiv(mod.a, mod.b, ctx)
    if type(q) is FloorDiv and q != raw:
        yield q


def _congruent_div(p: P.Poly, mod: FloorMod, c: int, want: int):
    """The monomial ``(y // c,)`` of a term of ``p`` with coefficient ``want`` whose dividend
    ``y`` differs from ``mod``'s by a multiple of the constant ``c`` (so ``y % c`` is ``mod``),
    or None."""
    px = poly_of(mod.a)
    for m, k in p.terms.items():
        d = m[0] if len(m) == 1 else None
        if type(d) is FloorDiv and k == want and d.b == mod.b:
            diff = P.add(poly_of(d.a), px, -1)
            if diff.const % c == 0 and all(v % c == 0 for v in diff.terms.values()):
                return m
    return None


def _divisor_monomial(b: Expr):
    """``(monomial, coeff)`` when the divisor ``b`` is ``coeff * monomial`` with a positive
    constant coefficient (a constant divisor has the empty monomial), else None."""
    if type(b) is IntImm:
        return ((), b.value) if b.value > 0 else None
    if not P.is_int_scalar(dtype_of(b)):
        return None
    pb = poly_of(b)
    if pb.const or len(pb.terms) != 1:
        return None
    (m, k), = pb.terms.items()
    return (m, k) if k > 0 else None


def _mono_div(m: tuple, d: tuple):
    """``m / d`` for monomials (one factor removed per factor of ``d``), or None."""
    rest = list(m)
    for a in d:
        for i, x in enumerate(rest):
            if x == a:
                del rest[i]
                break
        else:
            return None
    return tuple(rest)


def _decide_iv(cls, ia: tuple, ib: tuple):
    if cls is LT:
        return True if ia[1] < ib[0] else False if ia[0] >= ib[1] else None
    if cls is LE:
        return True if ia[1] <= ib[0] else False if ia[0] > ib[1] else None
    if cls is GT:
        return True if ia[0] > ib[1] else False if ia[1] <= ib[0] else None
    if cls is GE:
        return True if ia[0] >= ib[1] else False if ia[1] < ib[0] else None
    disjoint = ia[1] < ib[0] or ib[1] < ia[0]
    same = ia[0] == ia[1] == ib[0] == ib[1]
    if cls is EQ:
        return True if same else False if disjoint else None
    return False if same else True if disjoint else None


@functools.lru_cache(maxsize=1024)
def _proper_divisors(c: int) -> tuple:
    """The divisors of ``c`` in (1, c), largest first (by pairs up to its square root: a
    divisor by a plane's size is asked often, and a scan up to ``c`` is that size's work)."""
    small = [d for d in range(2, math.isqrt(c) + 1) if c % d == 0]
    return tuple(sorted(set(small) | {c // d for d in small}, reverse=True))
