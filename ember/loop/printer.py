"""The text form of the loop IR: Python-syntax source that :func:`ember.loop.parse` reads back.

The text is exact: ``parse(func_to_str(f)) == f`` for every function whose dtypes are valid, and
printing the parsed function gives the same text again. The syntax, by example::

    @attrs(global_symbol="scale")
    def f(A: Buffer((n, 8), "float32"), B: Buffer((n, 8), "float16", strides=(16, 1)), n: int64):
        for i in parallel(n):
            for j in vectorized(min=2, extent=6):
                B[i, j] = cast("float16", A[i, j] * 2.0)
        with allocate("T", (8,), "float32", scope="local", align=16) as T:
            T[ramp(0, 1, 8)] = broadcast(0.0, 8)
        if n < 4 and not n == 0:
            x: int32 = int32(3)
            evaluate(exp(float64(0.1)))
        else:
            B.store(float16(1.0), (0, 0), predicate=n > 0)

Literals: ``3`` is an int64 IntImm, ``2.0`` (any Python float repr, ``inf``, ``nan``) a float32
FloatImm, ``True``/``False`` bool; every other dtype is spelled ``int32(3)``, ``float64(0.1)``.
``a // b`` and ``a % b`` are floor division/modulo, ``/`` float division, ``truncdiv``/
``truncmod`` C-style integer division; ``and or not`` are logical, ``& | ^ << >>`` bitwise.
Loops are ``serial(extent)`` when they start at 0, else ``serial(min=m, extent=e)`` (likewise
``parallel``, ``vectorized``, ``unrolled``). Masked accesses are ``A.load((i, j), predicate=p)``
and ``A.store(value, (i, j), predicate=p)``. A call the short form ``exp(x)`` would not rebuild
exactly (another dtype, arity or name) is ``call("name", *args, dtype="float32")``. The
profiling calls with effects are ``cycle_counter()`` and ``profile_record(site, start, end)``.
Names resolve to the innermost binding: a parameter, loop, let or allocation. A variable that is
not int64 declares its dtype where it is bound (``x: int32 = ...``, ``for i in serial(n,
var=int32)``, ``let(x, v, body, var=int32)``); names that are not identifiers, or are taken,
are printed under a fresh identifier with ``Var("real.name", "int64")`` as the declaration
(buffers: ``name="real.name"``; functions: ``@name("real.name")``).

Blocks hold one statement or a flat :class:`SeqStmt`; ``x = v`` binds ``x`` for the rest of its
block (a let that is not last in a sequence is ``with let(v) as x:``) and ``with seq():`` keeps a
sequence that is nested or has one statement. ``pass`` is an empty sequence.
"""
from __future__ import annotations

import json
import keyword
import math
import re

from . import dtype as dt
from . import intrinsics
from .expr import (EQ, GE, GT, LE, LT, NE, Add, And, BitAnd, BitOr, BitXor, Broadcast, Call, Cast,
                   Div, FloatImm, FloorDiv, FloorMod, IntImm, Let, Load, Max, Min, Mod, Mul, Not,
                   Or, Ramp, Select, Shl, Shr, Sub, Var)
from .node import Node
from .stmt import (Allocate, Barrier, Buffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Store,
                   WarpMma)
from .visit import walk

# Names the parser reads as something other than a variable or buffer.
RESERVED = frozenset(keyword.kwlist) | {"True", "False", "None", "inf", "nan", "__debug__"}

# Python precedence levels, loosest first; an operand binding looser than its operator needs
# parentheses. Comparisons do not associate (``a < b < c`` is a chain in Python).
_OR, _AND, _NOT, _CMP, _UNARY, _ATOM = 1, 2, 3, 4, 11, 12
INFIX = {Or: ("or", _OR), And: ("and", _AND), EQ: ("==", _CMP), NE: ("!=", _CMP), LT: ("<", _CMP),
         LE: ("<=", _CMP), GT: (">", _CMP), GE: (">=", _CMP), BitOr: ("|", 5), BitXor: ("^", 6),
         BitAnd: ("&", 7), Shl: ("<<", 8), Shr: (">>", 8), Add: ("+", 9), Sub: ("-", 9),
         Mul: ("*", 10), FloorDiv: ("//", 10), FloorMod: ("%", 10)}
FUNCS = {Min: "min", Max: "max", Div: "truncdiv", Mod: "truncmod"}
BUFFER_DEFAULTS = {"strides": None, "scope": "global", "align": 64}


def expr_to_str(expr, within=None) -> str:
    """One expression as text (variables by name; their dtypes are declared where bound).

    A Buffer prints as its constructor call and a PrimFunc as :func:`func_to_str` does, so that
    every node's ``repr`` is readable. With ``within`` (a function or statement holding
    ``expr``), variables are named as the text of ``within`` names them.
    """
    if isinstance(expr, PrimFunc):
        return func_to_str(expr).rstrip()
    return _Printer(expr if within is None else within).expr(expr)


def stmt_to_str(stmt, indent: int = 0) -> str:
    """A statement as lines of text indented by ``indent`` levels, ending in a newline."""
    return "\n".join(_Printer(stmt).block(stmt, indent)) + "\n"


def func_to_str(func: PrimFunc) -> str:
    """A whole function as text that :func:`ember.loop.parse` turns back into an equal function."""
    p = _Printer(func)
    lines = []
    if func.attrs:
        lines.append(f"@attrs({_attr_args(func.attrs)})")
    fname = func.name
    if not _natural(fname):
        lines.append(f"@name({_q(fname)})")
        fname = _sanitize(fname)
    params = []
    for prm in func.params:
        if isinstance(prm, Buffer):
            params.append(f"{p.ref(prm)}: Buffer({p.buffer_args(prm)})")
        elif isinstance(prm, Var):
            params.append(f"{p.ref(prm)}: {p.decl(prm, always=True)}")
        else:
            params.append(f"_: {prm!r}")  # not a valid parameter; shown, not parseable
    lines.append(f"def {fname}({', '.join(params)}):")
    lines += p.block(func.body, 1)
    return "\n".join(lines) + "\n"


def is_dtype(s) -> bool:
    """Whether ``s`` names a dtype (``"int32"``, ``"float32x8"``)."""
    try:
        dt.split(s)
        return True
    except Exception:
        return False


def _natural(name) -> bool:
    return isinstance(name, str) and name.isascii() and name.isidentifier() and name not in RESERVED


def _sanitize(name) -> str:
    s = re.sub(r"[^0-9A-Za-z_]", "_", str(name)) or "_"
    return "_" + s if s[0].isdigit() or s in RESERVED else s


def _q(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid Python string literal


def _lit(v) -> str:
    return _q(v) if isinstance(v, str) else repr(v)


def _tuple(items) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _float_text(v) -> str:
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def _attr_args(attrs) -> str:
    keys = [k for k, _ in attrs]
    if all(_natural(k) for k in keys) and len(set(keys)) == len(keys):
        return ", ".join(f"{k}={_lit(v)}" for k, v in attrs)
    return ", ".join(f"({_lit(k)}, {_lit(v)})" for k, v in attrs)


def _assign_names(root) -> dict:
    """A distinct identifier for each distinct variable and buffer under ``root``.

    Each keeps its own name where that is a free identifier (first come, first served);
    the rest get fresh ones, so one text name never means two different objects.
    """
    nodes = walk(root, visit_buffers=True)
    objs = list(dict.fromkeys(n for n in nodes if isinstance(n, (Var, Buffer))))
    names, taken = {}, set()
    for n in objs:
        if _natural(n.name) and n.name not in taken:
            names[n] = n.name
            taken.add(n.name)
    for n in objs:
        if n not in names:
            base, k = _sanitize(n.name), 1
            cand = base
            while cand in taken:
                cand, k = f"{base}_{k}", k + 1
            names[n] = cand
            taken.add(cand)
    return names


class _Printer:
    def __init__(self, root):
        self.names = _assign_names(root) if isinstance(root, (Node, tuple)) else {}

    def ref(self, n) -> str:
        return self.names.get(n) or str(n.name)

    def decl(self, var: Var, always: bool = False):
        """How a binding declares ``var``: None (int64, own name), a dtype, or ``Var(...)``."""
        own = self.ref(var) == var.name
        if own and not always and var.type == dt.INDEX:
            return None
        if own and is_dtype(var.type) and var.type.isidentifier():
            return var.type
        return f"Var({_q(var.name)}, {_q(var.type)})"

    def buffer_args(self, b: Buffer, with_name: bool = True) -> str:
        args = [_tuple([self.expr(s) for s in b.shape]), _q(b.dtype)]
        if b.strides is not None:
            args.append("strides=" + _tuple([self.expr(s) for s in b.strides]))
        for key in ("scope", "align"):
            if getattr(b, key) != BUFFER_DEFAULTS[key]:
                args.append(f"{key}={_lit(getattr(b, key))}")
        if with_name and self.ref(b) != b.name:
            args.append(f"name={_q(b.name)}")
        return ", ".join(args)

    # -- expressions ------------------------------------------------------------------------
    def expr(self, e) -> str:
        return self._e(e)[0]

    def _e(self, e) -> tuple[str, int]:
        """The text of ``e`` and the precedence level of its outermost operator."""
        t = type(e)
        if t in INFIX:
            return self._infix(e, *INFIX[t])
        if t in FUNCS:
            if t is Div and _is_float(e.a):
                return self._infix(e, "/", 10)
            return f"{FUNCS[t]}({self.expr(e.a)}, {self.expr(e.b)})", _ATOM
        if t is IntImm:
            v = int(e.value)
            if is_dtype(e.type) and dt.is_float(e.type):
                return f"IntImm({v}, {_q(e.type)})", _ATOM
            if e.type == dt.INDEX:
                return str(v), (_UNARY if v < 0 else _ATOM)
            if e.type == "bool" and v in (0, 1):
                return ("True" if v else "False"), _ATOM
            return self._typed(e.type, str(v), "IntImm"), _ATOM
        if t is FloatImm:
            s = _float_text(e.value)
            if is_dtype(e.type) and not dt.is_float(e.type):
                return f"FloatImm({s}, {_q(e.type)})", _ATOM
            if e.type == "float32":
                return s, (_UNARY if s.startswith("-") else _ATOM)
            return self._typed(e.type, s, "FloatImm"), _ATOM
        if t is Var:
            return self.ref(e), _ATOM
        if t is Not:
            a, pa = self._e(e.a)
            return "not " + (f"({a})" if pa < _NOT else a), _NOT
        if t is Cast:
            return f"cast({_q(e.type)}, {self.expr(e.value)})", _ATOM
        if t is Select:
            parts = (e.condition, e.true_value, e.false_value)
            return f"select({', '.join(self.expr(p) for p in parts)})", _ATOM
        if t is Call:
            return self._call(e), _ATOM
        if t is Ramp:
            return f"ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes!r})", _ATOM
        if t is Broadcast:
            return f"broadcast({self.expr(e.value)}, {e.lanes!r})", _ATOM
        if t is Let:
            d = self.decl(e.var)
            var = f", var={d}" if d else ""
            return f"let({self.ref(e.var)}, {self.expr(e.value)}, {self.expr(e.body)}{var})", _ATOM
        if t is Load:
            idx = [self.expr(i) for i in e.indices]
            if e.predicate is None:
                return f"{self.ref(e.buffer)}[{', '.join(idx) if idx else '()'}]", _ATOM
            pred = self.expr(e.predicate)
            return f"{self.ref(e.buffer)}.load({_tuple(idx)}, predicate={pred})", _ATOM
        if t is Buffer:
            return f"Buffer({_q(e.name)}, {self.buffer_args(e, with_name=False)})", _ATOM
        return repr(e) if not isinstance(e, Node) else f"<{t.__name__}>", _ATOM

    def _infix(self, e, op: str, p: int) -> tuple[str, int]:
        a, pa = self._e(e.a)
        b, pb = self._e(e.b)
        if pa < p or (p == _CMP and pa == p):
            a = f"({a})"
        if pb <= p:
            b = f"({b})"
        return f"{a} {op} {b}", p

    @staticmethod
    def _typed(type_: str, value: str, raw: str) -> str:
        if is_dtype(type_) and type_.isidentifier():
            return f"{type_}({value})"
        return f"{raw}({value}, {_q(type_)})"

    def _call(self, e: Call) -> str:
        args = [self.expr(a) for a in e.args]
        if e.name in intrinsics.EFFECTS:  # cycle_counter(), profile_record(site, start, end)
            try:
                ref = intrinsics.effect_call(e.name, *e.args)
            except Exception:
                ref = None
            if ref == e:
                return f"{e.name}({', '.join(args)})"
        if e.name in intrinsics.ALL:
            try:
                ref = intrinsics.call(e.name, *e.args)
            except Exception:
                ref = None
            # The short form only where it rebuilds exactly these arguments.
            if ref is not None and ref.args == tuple(e.args):
                if ref.type != e.type:
                    args.append(f"dtype={_q(e.type)}")
                return f"{e.name}({', '.join(args)})"
        return f"call({', '.join([_q(e.name)] + args)}, dtype={_q(e.type)})"

    # -- statements -------------------------------------------------------------------------
    def block(self, s, ind: int) -> list[str]:
        """Lines of a block: a sequence of other than one statement is printed flat."""
        if isinstance(s, SeqStmt) and len(s.stmts) != 1:
            return self.flat(s.stmts, ind)
        return self.stmt(s, ind, last=True)

    def flat(self, stmts, ind: int) -> list[str]:
        if not stmts:
            return ["    " * ind + "pass"]
        out = []
        for k, s in enumerate(stmts):
            out += self.stmt(s, ind, last=k == len(stmts) - 1)
        return out

    def stmt(self, s, ind: int, last: bool) -> list[str]:
        pad = "    " * ind
        if isinstance(s, For):
            if s.min == IntImm(0):
                args = [self.expr(s.extent)]
            else:
                args = [f"min={self.expr(s.min)}", f"extent={self.expr(s.extent)}"]
            d = self.decl(s.var)
            if d:
                args.append(f"var={d}")
            head = f"{pad}for {self.ref(s.var)} in {s.kind}({', '.join(args)}):"
            return [head] + self.block(s.body, ind + 1)
        if isinstance(s, Store):
            idx = [self.expr(i) for i in s.indices]
            buf = self.ref(s.buffer)
            if s.predicate is None:
                return [f"{pad}{buf}[{', '.join(idx) if idx else '()'}] = {self.expr(s.value)}"]
            return [f"{pad}{buf}.store({self.expr(s.value)}, {_tuple(idx)}, "
                    f"predicate={self.expr(s.predicate)})"]
        if isinstance(s, Allocate):
            b = s.buffer
            args = self.buffer_args(b, with_name=False)
            head = f"{pad}with allocate({_q(b.name)}, {args}) as {self.ref(b)}:"
            return [head] + self.block(s.body, ind + 1)
        if isinstance(s, IfThenElse):
            lines = [f"{pad}if {self.expr(s.condition)}:"] + self.block(s.then_case, ind + 1)
            e = s.else_case
            while isinstance(e, IfThenElse):
                lines += [f"{pad}elif {self.expr(e.condition)}:"] + self.block(e.then_case, ind + 1)
                e = e.else_case
            if e is not None:
                lines += [pad + "else:"] + self.block(e, ind + 1)
            return lines
        if isinstance(s, LetStmt):
            d, name, value = self.decl(s.var), self.ref(s.var), self.expr(s.value)
            if last:  # binds for the rest of the block
                return [f"{pad}{name}{': ' + d if d else ''} = {value}"] + self.block(s.body, ind)
            var = f", var={d}" if d else ""
            return [f"{pad}with let({value}{var}) as {name}:"] + self.block(s.body, ind + 1)
        if isinstance(s, SeqStmt):
            return [pad + "with seq():"] + self.flat(s.stmts, ind + 1)
        if isinstance(s, Evaluate):
            return [f"{pad}evaluate({self.expr(s.value)})"]
        if isinstance(s, Barrier):
            return [f"{pad}barrier()"]
        if isinstance(s, WarpMma):
            ops = ", ".join(f"{self.ref(getattr(s, k))}, {self.expr(getattr(s, k + '_offset'))}" for k in "dabc")
            return [f"{pad}mma_sync({ops})"]
        return [f"{pad}<{type(s).__name__}>"]


def _is_float(e) -> bool:
    try:
        return dt.is_float(e.dtype)
    except Exception:
        return False
