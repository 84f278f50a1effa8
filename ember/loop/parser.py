"""Read the text form of the loop IR (see :mod:`ember.loop.printer`) back into nodes.

The text is Python syntax, read with :mod:`ast` and never executed. Every construct maps to
exactly one node built directly from its fields, so what the printer wrote comes back equal;
only the short intrinsic form (``exp(x)``) goes through :func:`intrinsics.call` to infer the
result dtype. Mistakes raise :class:`ember.errors.ParseError` naming the line.
"""
from __future__ import annotations

import ast
import contextlib
import textwrap

from ..errors import EmberError, ParseError
from . import dtype as dt
from . import intrinsics
from .expr import (EQ, GE, GT, LE, LT, NE, Add, And, BitAnd, BitOr, BitXor, Broadcast, Call, Cast,
                   Div, Expr, FloatImm, FloorDiv, FloorMod, IntImm, Let, Load, Max, Min, Mod, Mul,
                   Not, Or, Ramp, Select, Shl, Shr, Sub, Var, const)
from .printer import RESERVED, is_dtype
from .stmt import (LOOP_KINDS, Allocate, Barrier, Buffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc,
                   SeqStmt, Store, WarpMma)

BINOPS = {ast.Add: Add, ast.Sub: Sub, ast.Mult: Mul, ast.Div: Div, ast.FloorDiv: FloorDiv,
          ast.Mod: FloorMod, ast.BitAnd: BitAnd, ast.BitOr: BitOr, ast.BitXor: BitXor,
          ast.LShift: Shl, ast.RShift: Shr}
CMPOPS = {ast.Eq: EQ, ast.NotEq: NE, ast.Lt: LT, ast.LtE: LE, ast.Gt: GT, ast.GtE: GE}
FUNCS = {"min": Min, "max": Max, "truncdiv": Div, "truncmod": Mod}


def parse(text: str) -> PrimFunc:
    """Parse the text of one function (as :meth:`PrimFunc.script` prints it) into a PrimFunc."""
    text = textwrap.dedent(text)
    p = _Parser(text)
    tree = p.syntax(text, "exec")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        where = tree.body[1] if len(tree.body) > 1 else (tree.body[0] if tree.body else None)
        raise p.err(where, "expected exactly one function definition ('def name(...):')")
    return p.func(tree.body[0])


def parse_expr(text: str, vars=(), buffers=()) -> Expr:
    """Parse one expression whose names are ``vars`` and ``buffers`` (lists, or dicts by name)."""
    p = _Parser(text)
    for objs in (vars, buffers):
        items = objs.items() if isinstance(objs, dict) else ((o.name, o) for o in objs)
        p.scopes[0].update(items)
    return p.expr(p.syntax(text.strip(), "eval").body)


class _Parser:
    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.scopes: list[dict] = [{}]
        self.implicit_sizes = False  # (while reading buffer parameters)

    # -- plumbing ---------------------------------------------------------------------------
    def err(self, node, msg: str) -> ParseError:
        line = getattr(node, "lineno", None) or 1
        src = self.lines[line - 1].strip() if line <= len(self.lines) else ""
        e = ParseError(f"line {line}: {msg}" + (f"\n    {src}" if src else ""))
        e.lineno = line
        return e

    def syntax(self, text: str, mode: str):
        try:
            return ast.parse(text, mode=mode)
        except (SyntaxError, ValueError) as e:
            line = getattr(e, "lineno", None) or 1
            msg = getattr(e, "msg", e)
            raise self.err(ast.Pass(lineno=line), f"invalid syntax: {msg}") from None

    @contextlib.contextmanager
    def scope(self, name: str, obj, node):
        if name in RESERVED:
            raise self.err(node, f"{name!r} is reserved and cannot be bound")
        self.scopes.append({name: obj})
        try:
            yield
        finally:
            self.scopes.pop()

    def lookup(self, node: ast.Name):
        for s in reversed(self.scopes):
            if node.id in s:
                return s[node.id]
        if self.implicit_sizes and node.id not in RESERVED:
            # a size a buffer parameter's shape names without declaring it: an int64 the
            # runtime takes from the array's shape (as ``codegen.signature_scalars`` does)
            v = self.scopes[-1][node.id] = Var(node.id, "int64")
            return v
        raise self.err(node, f"undefined name {node.id!r}")

    def buffer(self, node) -> Buffer:
        b = self.lookup(node) if isinstance(node, ast.Name) else None
        if not isinstance(b, Buffer):
            raise self.err(node, f"expected a buffer name, got {ast.unparse(node)!r}")
        return b

    def args(self, call: ast.Call, n: int, kws=()):
        """The ``n`` positional args and the keyword args (among ``kws``) of a call."""
        what, pos = ast.unparse(call.func), call.args
        if any(isinstance(a, ast.Starred) for a in pos) or None in [k.arg for k in call.keywords]:
            raise self.err(call, f"{what}(): *args and **kwargs are not supported")
        if len(pos) != n:
            raise self.err(call, f"{what}() takes {n} positional argument(s), got {len(pos)}")
        kw = {}
        for k in call.keywords:
            if k.arg not in kws or k.arg in kw:
                allowed = ", ".join(kws) or "none"
                raise self.err(k, f"{what}(): unexpected keyword {k.arg!r} (allowed: {allowed})")
            kw[k.arg] = k.value
        return pos, kw

    def string(self, node, what: str) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        raise self.err(node, f"{what} must be a string literal")

    def integer(self, node, what: str) -> int:
        v = self.number(node)
        if type(v) is not int:
            raise self.err(node, f"{what} must be an integer literal")
        return v

    def dtype(self, node, s: str | None = None) -> str:
        """The dtype ``s``, or the one the string literal ``node`` names, checked."""
        s = self.string(node, "a dtype") if s is None else s
        if not is_dtype(s):
            raise self.err(node, f"unknown dtype {s!r}")
        return s

    def number(self, node):
        """The Python number a literal spells (``3``, ``-2.5``, ``inf``, ``-nan``), else None."""
        neg = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
        n = node.operand if neg else node
        if isinstance(n, ast.Constant) and type(n.value) in (int, float):
            v = n.value
        elif isinstance(n, ast.Constant) and type(n.value) is bool and not neg:
            v = int(n.value)
        elif isinstance(n, ast.Name) and n.id in ("inf", "nan"):
            v = float(n.id)
        else:
            return None
        return -v if neg else v

    def decl(self, node, name: str) -> Var:
        """The variable a binding declares: ``int32`` or ``Var("real.name", "int32")``."""
        if isinstance(node, ast.Name):
            return Var(name, self.dtype(node, node.id))
        if _callee(node) == "Var":
            (n, t), _ = self.args(node, 2)
            return Var(self.string(n, "a Var name"), self.dtype(t))
        raise self.err(node, 'expected a dtype such as int32, or Var("name", "dtype")')

    def bound(self, kw: dict, name: str) -> Var:
        """The variable bound as ``name`` by a loop or let with keyword args ``kw``."""
        return self.decl(kw["var"], name) if "var" in kw else Var(name)

    def opt(self, kw: dict, key: str):
        return self.expr(kw[key]) if key in kw else None

    def target(self, node) -> str:
        if not isinstance(node, ast.Name):
            raise self.err(node, f"expected a name to bind, got {ast.unparse(node)!r}")
        return node.id

    # -- functions and statements -----------------------------------------------------------
    def func(self, fn: ast.FunctionDef) -> PrimFunc:
        name, attrs = fn.name, ()
        for d in fn.decorator_list:
            if _callee(d) == "name":
                name = self.string(self.args(d, 1)[0][0], "the function name")
            elif _callee(d) == "attrs":
                attrs += self.attrs(d)
            else:
                raise self.err(d, "unknown decorator (expected @attrs(...) or @name(...))")
        a, scope, bufs = fn.args, self.scopes[-1], []
        if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults or fn.returns:
            raise self.err(fn, "parameters must be plain 'name: annotation' pairs")
        for arg in a.args:  # scalars first: buffer shapes may name them
            if arg.annotation is None or arg.arg in scope or arg.arg in RESERVED:
                raise self.err(arg, f"parameter {arg.arg!r} needs an annotation (Buffer(...) or "
                                    "a dtype) and a name of its own")
            is_buf = _callee(arg.annotation) == "Buffer"
            scope[arg.arg] = None if is_buf else self.decl(arg.annotation, arg.arg)
            bufs += [arg] if is_buf else []
        self.implicit_sizes = True
        try:
            for arg in bufs:
                pos, kw = self.args(arg.annotation, 2, ("strides", "scope", "align", "name"))
                bname = self.string(kw.pop("name"), "a buffer name") if "name" in kw else arg.arg
                scope[arg.arg] = self.new_buffer(arg.annotation, bname, *pos, kw)
        finally:
            self.implicit_sizes = False
        return PrimFunc(name, tuple(scope[arg.arg] for arg in a.args), self.block(fn.body), attrs)

    def attrs(self, d: ast.Call) -> tuple:
        try:
            pairs = [tuple(ast.literal_eval(p)) for p in d.args]
            pairs += [(k.arg, ast.literal_eval(k.value)) for k in d.keywords]
            if any(len(p) != 2 or p[0] is None for p in pairs):
                raise ValueError
        except (ValueError, TypeError, SyntaxError):
            raise self.err(d, "@attrs takes key=literal or (key, literal) pairs") from None
        return tuple(pairs)

    def new_buffer(self, node, name: str, shape, dtype, kw: dict) -> Buffer:
        def dims(n, what):
            if not isinstance(n, ast.Tuple):
                raise self.err(n, f"buffer {what} must be a tuple, e.g. (n, 8) or (8,)")
            return tuple(self.expr(e) for e in n.elts)

        fields = {"shape": dims(shape, "shape"), "dtype": self.dtype(dtype)}
        if "strides" in kw:
            fields["strides"] = dims(kw["strides"], "strides")
        if "scope" in kw:
            fields["scope"] = self.string(kw["scope"], "scope")
        if "align" in kw:
            fields["align"] = self.integer(kw["align"], "align")
        return self.wrap(node, lambda: Buffer(name, **fields))

    def block(self, body: list) -> object:
        items = self.items(body)
        return items[0] if len(items) == 1 else SeqStmt(tuple(items))

    def items(self, body: list) -> list:
        out = []
        for k, node in enumerate(body):
            if isinstance(node, ast.Pass):
                continue
            ann = isinstance(node, ast.AnnAssign)
            if (node.value is not None) if ann else (_assign_to(node) is ast.Name):
                # ``x = value`` binds x for the rest of this block.
                name = self.target(node.target if ann else node.targets[0])
                var = self.decl(node.annotation, name) if ann else Var(name)
                value = self.expr(node.value)
                with self.scope(name, var, node):
                    out.append(LetStmt(var, value, self.block(body[k + 1:])))
                break
            out.append(self.stmt(node))
        return out

    def stmt(self, node):
        if _assign_to(node) is ast.Subscript:
            t = node.targets[0]
            return Store(self.buffer(t.value), self.expr(node.value), self.indices(t.slice))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call, f = node.value, node.value.func
            if isinstance(f, ast.Name) and f.id == "evaluate":
                (v,), _ = self.args(call, 1)
                return Evaluate(self.expr(v))
            if isinstance(f, ast.Name) and f.id == "barrier":
                self.args(call, 0)
                return Barrier()
            if isinstance(f, ast.Name) and f.id == "mma_sync":
                a, _ = self.args(call, 8)
                return WarpMma(*[self.buffer(x) if i % 2 == 0 else self.expr(x) for i, x in enumerate(a)])
            if isinstance(f, ast.Attribute) and f.attr == "store":
                (v, idx), kw = self.args(call, 2, ("predicate",))
                idx = self.indices(idx, tuple_only=True)
                return Store(self.buffer(f.value), self.expr(v), idx, self.opt(kw, "predicate"))
        if isinstance(node, ast.For):
            return self.for_(node)
        if isinstance(node, ast.If):
            orelse = self.block(node.orelse) if node.orelse else None
            return IfThenElse(self.expr(node.test), self.block(node.body), orelse)
        if isinstance(node, ast.With):
            return self.with_(node)
        first = ast.unparse(node).splitlines()[0]
        raise self.err(node, f"unsupported statement {first!r} (expected a store, for, if, "
                             "with allocate/let/seq, 'x = value', evaluate(...), barrier() or mma_sync(...))")

    def for_(self, node: ast.For) -> For:
        it = node.iter
        if _callee(it) not in LOOP_KINDS:
            kinds = "/".join(LOOP_KINDS)
            raise self.err(it, f"a loop iterates over {kinds}(extent) or (min=..., extent=...)")
        if node.orelse:
            raise self.err(node.orelse[0], "for ... else is not supported")
        pos, kw = self.args(it, len(it.args), ("min", "extent", "var"))
        if len(pos) + ("extent" in kw) != 1:
            raise self.err(it, f"{it.func.id}() takes the extent once, positionally or as extent=")
        name = self.target(node.target)
        var = self.bound(kw, name)
        lo = self.expr(kw["min"]) if "min" in kw else IntImm(0)
        extent = self.expr(pos[0] if pos else kw["extent"])
        with self.scope(name, var, node.target):
            return For(var, lo, extent, it.func.id, self.block(node.body))

    def with_(self, node: ast.With):
        item = node.items[0]
        call = item.context_expr
        kind = _callee(call)
        if len(node.items) != 1 or kind not in ("allocate", "let", "seq"):
            raise self.err(node, "expected 'with allocate(...) as B:', 'with let(value) as x:' "
                                 "or 'with seq():'")
        if kind == "seq":
            self.args(call, 0)
            if item.optional_vars is not None:
                raise self.err(node, "'with seq():' binds no name")
            return SeqStmt(tuple(self.items(node.body)))
        if item.optional_vars is None:
            raise self.err(node, f"'with {kind}(...)' needs 'as name'")
        name = self.target(item.optional_vars)
        if kind == "let":
            (v,), kw = self.args(call, 1, ("var",))
            var, value = self.bound(kw, name), self.expr(v)
            with self.scope(name, var, node):
                return LetStmt(var, value, self.block(node.body))
        (bname, shape, dtype), kw = self.args(call, 3, ("strides", "scope", "align"))
        buf = self.new_buffer(call, self.string(bname, "the buffer name"), shape, dtype, kw)
        with self.scope(name, buf, node):
            return Allocate(buf, self.block(node.body))

    # -- expressions ------------------------------------------------------------------------
    def indices(self, node, tuple_only: bool = False) -> tuple:
        if tuple_only and not isinstance(node, ast.Tuple):
            raise self.err(node, "indices must be a tuple, e.g. (i, j) or (i,)")
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        return tuple(self.expr(e) for e in elts)

    def expr(self, node) -> Expr:
        v = self.number(node)
        if v is not None:
            if isinstance(node, ast.Constant) and type(node.value) is bool:
                return IntImm(v, "bool")
            return FloatImm(v) if type(v) is float else IntImm(v)
        if isinstance(node, ast.Name):
            v = self.lookup(node)
            if not isinstance(v, Expr):
                raise self.err(node, f"buffer {node.id!r} used as a value (index it: {node.id}[i])")
            return v
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Not(self.expr(node.operand))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # as Expr.__neg__ does
            a = self.expr(node.operand)
            return Sub(self.wrap(node, lambda: const(0, a.dtype)), a)
        if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
            return BINOPS[type(node.op)](self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.BoolOp):
            cls = And if isinstance(node.op, ast.And) else Or
            out = self.expr(node.values[0])
            for v in node.values[1:]:
                out = cls(out, self.expr(v))
            return out
        if isinstance(node, ast.Compare) and type(node.ops[0]) in CMPOPS:
            if len(node.ops) != 1:
                raise self.err(node, "chained comparison: parenthesize, e.g. (a < b) == c")
            return CMPOPS[type(node.ops[0])](self.expr(node.left), self.expr(node.comparators[0]))
        if isinstance(node, ast.Subscript):
            return Load(self.buffer(node.value), self.indices(node.slice))
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.err(node, f"unsupported expression {ast.unparse(node)!r}")

    def wrap(self, node, build):
        """``build()``, with IR errors reported at ``node``'s line."""
        try:
            return build()
        except EmberError as e:
            raise self.err(node, str(e)) from None

    def call(self, node: ast.Call) -> Expr:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "load":
            (idx,), kw = self.args(node, 1, ("predicate",))
            idx = self.indices(idx, tuple_only=True)
            return Load(self.buffer(f.value), idx, self.opt(kw, "predicate"))
        if not isinstance(f, ast.Name):
            raise self.err(node, f"unknown function {ast.unparse(f)!r}")
        name = f.id
        if name in FUNCS:
            (a, b), _ = self.args(node, 2)
            return FUNCS[name](self.expr(a), self.expr(b))
        if name == "cast":
            (t, v), _ = self.args(node, 2)
            return Cast(self.dtype(t), self.expr(v))
        if name == "select":
            (c, a, b), _ = self.args(node, 3)
            return Select(self.expr(c), self.expr(a), self.expr(b))
        if name == "ramp":
            (b, s, n), _ = self.args(node, 3)
            return Ramp(self.expr(b), self.expr(s), self.integer(n, "ramp lanes"))
        if name == "broadcast":
            (v, n), _ = self.args(node, 2)
            return Broadcast(self.expr(v), self.integer(n, "broadcast lanes"))
        if name == "let":
            (x, v, body), kw = self.args(node, 3, ("var",))
            text = self.target(x)
            var, value = self.bound(kw, text), self.expr(v)
            with self.scope(text, var, x):
                return Let(var, value, self.expr(body))
        if name == "call":
            pos, kw = self.args(node, len(node.args), ("dtype",))
            if not pos or "dtype" not in kw:
                raise self.err(node, 'write call("name", *args, dtype="...")')
            args = tuple(self.expr(a) for a in pos[1:])
            return Call(self.dtype(kw["dtype"]), self.string(pos[0], "the call's name"), args)
        if name in intrinsics.EFFECTS:
            pos, _ = self.args(node, len(node.args))
            return self.wrap(node, lambda: intrinsics.effect_call(name, *[self.expr(a) for a in pos]))
        if name in intrinsics.ALL:
            pos, kw = self.args(node, len(node.args), ("dtype",))
            c = self.wrap(node, lambda: intrinsics.call(name, *[self.expr(a) for a in pos]))
            return c.replace(type=self.dtype(kw["dtype"])) if "dtype" in kw else c
        if name in ("IntImm", "FloatImm") or is_dtype(name):
            raw = name in ("IntImm", "FloatImm")
            pos, _ = self.args(node, 2 if raw else 1)
            type_ = self.dtype(pos[1]) if raw else name
            v = self.number(pos[0])
            if v is None:
                raise self.err(node, f"{name}(...) takes a number literal; to convert a value, "
                                     f"use cast({type_!r}, x)")
            if name == "FloatImm" or (not raw and dt.is_float(type_)):
                return FloatImm(float(v), type_)
            if type(v) is not int:
                raise self.err(node, f"{name}(...) needs an integer literal, got {v!r}")
            return IntImm(v, type_)
        raise self.err(node, f"unknown function {name!r}")


def _callee(node):
    """The name ``node`` calls, if it is a call of a plain name."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


def _assign_to(node):
    """The target's node type of a single-target assignment ``t = v``."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return type(node.targets[0])
    return None
