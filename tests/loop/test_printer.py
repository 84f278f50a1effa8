"""The loop IR's text form: print -> parse -> print is the identity, and parse(print(f)) == f."""
import math

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ember.errors import ParseError
from ember.loop import (EQ, GE, GT, LE, LT, NE, Add, Allocate, And, Broadcast, Buffer, Call, Cast,
                        Div, Evaluate, FloatImm, FloorDiv, FloorMod, For, IfThenElse, IntImm, Let,
                        LetStmt, Load, Max, Min, Mod, Mul, Not, Or, PrimFunc, Ramp, Select, SeqStmt,
                        Store, Sub, Var, dtype as dt, intrinsics, parse, walk)
from ember.loop.expr import BINARY_OPS, BitAnd, BitOr, BitXor, Shl, Shr
from ember.loop.parser import parse_expr
from ember.loop.printer import expr_to_str, func_to_str, stmt_to_str
from ember.loop.visit import free_vars

i, j, k, n = Var("i"), Var("j"), Var("k"), Var("n")
x, y = Var("x", "float32"), Var("y", "float32")
b, c, d = Var("b", "bool"), Var("c", "bool"), Var("d", "bool")
h = Var("h", "int32")
A = Buffer("A", (n, 16), "float32")
B = Buffer("B", (n, 16), "int32", strides=(32, 1), align=16)


def func_of(body, name="f", attrs=()):
    """A function whose parameters are the buffers and variables ``body`` leaves free."""
    allocated = {s.buffer for s in walk(body) if isinstance(s, Allocate)}
    bufs = list(dict.fromkeys(s.buffer for s in walk(body) if isinstance(s, (Load, Store))
                              and s.buffer not in allocated))
    fv = set(free_vars(body))
    for buf in set(bufs) | allocated:  # shapes name free variables too
        fv |= {v for e in buf.shape + (buf.strides or ()) for v in walk(e) if isinstance(v, Var)}
    scalars = tuple(sorted(fv, key=lambda v: (v.name, v.type)))
    return PrimFunc(name, tuple(bufs) + scalars, body, attrs)


def roundtrip(f: PrimFunc, equal: bool = True) -> str:
    text = func_to_str(f)
    g = parse(text)
    assert func_to_str(g) == text
    if equal:
        assert g == f, text
    return text


def rt_expr(e, equal: bool = True) -> str:
    """Round-trip ``e`` in a function and on its own; return its text."""
    roundtrip(func_of(Evaluate(e)), equal)
    text = expr_to_str(e)
    got = parse_expr(text, vars=[i, j, k, n, x, y, b, c, d, h], buffers=[A, B])
    assert expr_to_str(got) == text
    if equal:
        assert got == e
    return text


# --- literals --------------------------------------------------------------------------------

def _values(t):
    if t == "bool":
        return [0, 1]
    if dt.is_float(t):
        return [0.0, -0.0, 2.0, 0.1, -2.5, 1 / 3, 1e-30, 3.4e38, math.inf, -math.inf]
    bits = dt.bits(t)
    if dt.is_uint(t):
        return [0, 7, 2 ** bits - 1]
    return [0, 1, -3, 2 ** (bits - 1) - 1, -2 ** (bits - 1)]


@pytest.mark.parametrize("t,v", [(t, v) for t in dt.SCALAR_TYPES for v in _values(t)])
def test_immediates_every_dtype(t, v):
    e = FloatImm(v, t) if dt.is_float(t) else IntImm(v, t)
    text = rt_expr(e)
    back = parse_expr(text)
    assert type(back) is type(e) and back.dtype == t
    if dt.is_float(t):
        assert math.copysign(1, back.value) == math.copysign(1, v)  # -0.0 survives


@pytest.mark.parametrize("t", ["float16", "bfloat16", "float32", "float64"])
def test_nan(t):
    e = FloatImm(math.nan, t)
    text = rt_expr(e, equal=False)  # nan != nan, so compare the text
    assert text == ("nan" if t == "float32" else f"{t}(nan)")
    assert math.isnan(parse_expr(text).value) and parse_expr(text).dtype == t


@pytest.mark.parametrize("e,text", [
    (IntImm(3), "3"), (IntImm(-3), "-3"), (IntImm(3, "int32"), "int32(3)"),
    (IntImm(1, "bool"), "True"), (IntImm(0, "bool"), "False"), (IntImm(2, "bool"), "bool(2)"),
    (FloatImm(2.0), "2.0"), (FloatImm(0.1, "float64"), "float64(0.1)"), (FloatImm(math.inf), "inf"),
    (FloatImm(-math.inf, "float16"), "float16(-inf)"), (FloatImm(1.0, "bfloat16"), "bfloat16(1.0)"),
    (IntImm(4, "int32x4"), "int32x4(4)"),
    (IntImm(1, "float32"), 'IntImm(1, "float32")'),
    (FloatImm(2.0, "int32"), 'FloatImm(2.0, "int32")'),
])
def test_literal_spelling(e, text):
    assert rt_expr(e) == text


# --- operators and precedence --------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BINARY_OPS))
def test_every_binary_op(name):
    cls = BINARY_OPS[name]
    for a, bb in [(i, j), (x, y), (b, c), (h, IntImm(-2, "int32"))]:
        rt_expr(cls(a, bb))


@pytest.mark.parametrize("e,text", [
    (Sub(i, Sub(j, k)), "i - (j - k)"), (Sub(Sub(i, j), k), "i - j - k"),
    (Mul(Add(i, j), k), "(i + j) * k"), (Add(i, Mul(j, k)), "i + j * k"),
    (FloorDiv(i, Mul(j, k)), "i // (j * k)"), (FloorMod(FloorDiv(i, j), k), "i // j % k"),
    (And(b, And(c, d)), "b and (c and d)"), (And(And(b, c), d), "b and c and d"),
    (Or(And(b, c), d), "b and c or d"), (And(Or(b, c), d), "(b or c) and d"),
    (Not(And(b, c)), "not (b and c)"), (EQ(Not(b), c), "(not b) == c"),
    (And(Not(b), c), "not b and c"),
    (Not(Not(b)), "not not b"), (Not(LT(i, j)), "not i < j"),
    (LT(LT(i, j), b), "(i < j) < b"), (EQ(b, NE(i, j)), "b == (i != j)"),
    (BitOr(LT(i, j), GE(j, k)), "(i < j) | (j >= k)"), (Shl(i, Add(j, IntImm(1))), "i << j + 1"),
    (Add(Shr(i, j), k), "(i >> j) + k"), (BitAnd(BitXor(i, j), k), "(i ^ j) & k"),
    (BitXor(BitAnd(i, j), k), "i & j ^ k"), (BitOr(i, BitXor(j, k)), "i | j ^ k"),
    (Mul(IntImm(-3), i), "-3 * i"), (Sub(i, IntImm(-3)), "i - -3"), (Sub(IntImm(0), i), "0 - i"),
    (Mul(FloatImm(-math.inf), x), "-inf * x"), (Sub(x, FloatImm(-0.0)), "x - -0.0"),
    (Div(x, y), "x / y"), (Div(Div(x, y), x), "x / y / x"), (Div(x, Mul(y, x)), "x / (y * x)"),
    (Div(i, j), "truncdiv(i, j)"), (Mod(i, j), "truncmod(i, j)"), (Mod(x, y), "truncmod(x, y)"),
    (Min(i, Max(j, k)), "min(i, max(j, k))"), (GT(i, j), "i > j"), (LE(i, j), "i <= j"),
])
def test_precedence(e, text):
    assert rt_expr(e) == text


# --- other expressions -----------------------------------------------------------------------

@pytest.mark.parametrize("e,text", [
    (Cast("float16", x), 'cast("float16", x)'),
    (Cast("int32x4", Ramp(i, j, 4)), 'cast("int32x4", ramp(i, j, 4))'),
    (Select(b, x, FloatImm(0.0)), "select(b, x, 0.0)"),
    (intrinsics.exp(x), "exp(x)"), (intrinsics.fma(x, y, x), "fma(x, y, x)"),
    (intrinsics.isnan(x), "isnan(x)"), (intrinsics.abs(h), "abs(h)"),
    (intrinsics.exp(Broadcast(x, 4)), "exp(broadcast(x, 4))"),
    (Call("float64", "exp", (x,)), 'exp(x, dtype="float64")'),
    (Call("int32", "exp", (h,)), 'call("exp", h, dtype="int32")'),  # intrinsics.call rejects it
    (Call("float32", "pow", (x,)), 'call("pow", x, dtype="float32")'),  # wrong arity
    (Call("float32", "my_op", (x, i)), 'call("my_op", x, i, dtype="float32")'),
    (Call("float32", "rand", ()), 'call("rand", dtype="float32")'),
    (Ramp(Mul(i, IntImm(16)), IntImm(1), 8), "ramp(i * 16, 1, 8)"),
    (Broadcast(b, 8), "broadcast(b, 8)"),
    (Let(Var("t"), Add(i, j), Mul(Var("t"), Var("t"))), "let(t, i + j, t * t)"),
    (Let(Var("t", "int32"), h, Var("t", "int32")), "let(t, h, t, var=int32)"),
    (Load(A, (i, j)), "A[i, j]"), (Load(A, (i, Ramp(j, IntImm(1), 8))), "A[i, ramp(j, 1, 8)]"),
    (Load(A, (i, Ramp(j, IntImm(1), 4)), Broadcast(b, 4)),
     "A.load((i, ramp(j, 1, 4)), predicate=broadcast(b, 4))"),
    (Load(Buffer("S", (), "int8"), ()), "S[()]"),
    (Load(Buffer("V", (8,), "int8"), (i,), b), "V.load((i,), predicate=b)"),
    (Add(Load(B, (i, j)), IntImm(1, "int32")), "B[i, j] + int32(1)"),
])
def test_expression_forms(e, text):
    assert expr_to_str(e) == text
    roundtrip(func_of(Evaluate(e)))


def test_repr_uses_the_printer():
    assert repr(Add(i, IntImm(1))) == "i + 1"
    assert repr(Store(A, x, (i, j))) == "A[i, j] = x"
    assert repr(SeqStmt((Evaluate(i), Evaluate(j)))) == "evaluate(i)\nevaluate(j)"
    assert repr(B) == 'Buffer("B", (n, 16), "int32", strides=(32, 1), align=16)'
    assert repr(func_of(Evaluate(i))) == "def f(i: int64):\n    evaluate(i)"


# --- statements and functions ----------------------------------------------------------------

EXAMPLE = '''\
@attrs(global_symbol="scale", tiles=(4, 8), fast=True)
def scale(A: Buffer((n, 1024), "float32"), C: Buffer((n, 1024), "float32", strides=(2048, 1), align=32), \
n: int64, h: int32):
    for i in parallel(n):
        for j in vectorized(min=2, extent=6):
            C[i, j] = A[i, j] * 2.0
    with allocate("T", (8,), "float32", scope="local", align=16) as T:
        T[ramp(0, 1, 8)] = broadcast(0.0, 8)
        C.store(T[ramp(0, 1, 8)], (0, ramp(0, 1, 8)), predicate=broadcast(n > 1, 8))
    if n < 4 and not n == 0:
        x: int32 = h + int32(3)
        evaluate(exp(float64(0.1)))
    elif h == int32(0):
        pass
    else:
        t = n * 2
        C[t, 0] = 1.0
'''


def test_example_text_is_a_fixed_point():
    f = parse(EXAMPLE)
    assert func_to_str(f) == EXAMPLE
    assert f.attrs == (("global_symbol", "scale"), ("tiles", (4, 8)), ("fast", True))
    C = f.params[1]
    assert C.strides == (IntImm(2048), IntImm(1)) and C.align == 32 and C.shape[0] is f.params[2]
    assert parse(f.script()) == f


LOOP = For(i, IntImm(3), Sub(n, IntImm(3)), "serial", Store(A, x, (i, IntImm(0))))


@pytest.mark.parametrize("kind", ["serial", "parallel", "vectorized", "unrolled"])
def test_loops_of_every_kind(kind):
    f = func_of(LOOP.replace(kind=kind, min=IntImm(3)))
    assert f"for i in {kind}(min=3, extent=n - 3):" in roundtrip(f)
    text = roundtrip(func_of(LOOP.replace(kind=kind, min=IntImm(0), extent=n)))
    assert f"for i in {kind}(n):" in text


def test_loop_vars_of_other_dtypes_and_names():
    v, w = Var("v", "int32"), Var("i.outer")
    f = func_of(For(v, IntImm(0, "int32"), h, "unrolled",
                    For(w, IntImm(0), IntImm(4), "serial", Store(B, v, (w, i)))))
    text = roundtrip(f)
    assert 'for v in unrolled(min=int32(0), extent=h, var=int32):' in text
    assert 'for i_outer in serial(4, var=Var("i.outer", "int64")):' in text


def test_statements():
    T = Buffer("T", (4, k), "float32", strides=(k, 1), scope="local", align=8)
    G = Buffer("G", (16,), "float64")
    s = SeqStmt((
        Allocate(T, Store(T, Load(A, (i, j)), (IntImm(0), j))),
        Allocate(G, Evaluate(Load(G, (i,)))),
        Store(A, Broadcast(x, 4), (i, Ramp(j, IntImm(1), 4)), Broadcast(b, 4)),
        IfThenElse(b, Evaluate(x)),
        IfThenElse(b, Evaluate(x), Evaluate(y)),
        IfThenElse(b, Evaluate(x), SeqStmt(())),
        IfThenElse(b, Evaluate(x), IfThenElse(c, Evaluate(y), IfThenElse(d, Evaluate(i)))),
        LetStmt(Var("q", "float32"), x, Evaluate(Var("q", "float32"))),  # not last: a with-block
        LetStmt(Var("r"), i, SeqStmt((Evaluate(Var("r")), SeqStmt((Evaluate(i),)), SeqStmt(())))),
    ))
    text = roundtrip(func_of(s))
    assert ('with allocate("T", (4, k), "float32", strides=(k, 1), scope="local", align=8) as T:'
            in text)
    assert "with let(x, var=float32) as q:" in text and "    r = i\n" in text
    assert "    elif c:" in text and "with seq():" in text


@pytest.mark.parametrize("body", [
    SeqStmt(()), SeqStmt((Evaluate(i),)), SeqStmt((SeqStmt((Evaluate(i), Evaluate(j))),)),
    SeqStmt((Evaluate(i), SeqStmt((Evaluate(j), Evaluate(k))))),
    LetStmt(Var("r"), i, SeqStmt(())), LetStmt(Var("r"), i, SeqStmt((Evaluate(j),))),
    LetStmt(Var("r", "bool"), b, LetStmt(Var("s"), i, Evaluate(Var("r", "bool")))),
    SeqStmt((Evaluate(i), LetStmt(Var("r"), i, SeqStmt((Evaluate(j), Evaluate(k)))))),
    For(i, IntImm(0), n, "serial", SeqStmt(())),
])
def test_block_structure_is_exact(body):
    roundtrip(func_of(body))


def test_names_that_are_not_identifiers_or_collide():
    vi32, vweird, vkw, vinf = Var("i", "int32"), Var("0x.y"), Var("lambda"), Var("inf", "float32")
    T1 = Buffer("T", (4,), "float32", scope="local")
    T2 = Buffer("T", (8,), "int8", scope="local")
    S = Buffer("A.shared", (4,), "float32")
    body = SeqStmt((
        Allocate(T1, Allocate(T2, Store(T1, Cast("float32", Load(T2, (i,))), (i,)))),
        Allocate(Buffer("A", (2,), "int64"), Evaluate(Load(Buffer("A", (2,), "int64"), (i,)))),
        LetStmt(vi32, h, LetStmt(vweird, i, Evaluate(Add(Add(vweird, vkw), Cast("int64", vi32))))),
        LetStmt(vinf, x, Store(S, vinf, (i,))),
    ))
    text = roundtrip(func_of(body, name="fused.add-1", attrs=(("a.b", 1), ("a.b", "two"))))
    assert '@name("fused.add-1")' in text and '@attrs(("a.b", 1), ("a.b", "two"))' in text
    assert 'as T_1:' in text and 'with let(h, var=Var("i", "int32")) as i_1:' in text
    assert '_0x_y: Var("0x.y", "int64") = i' in text
    assert '_lambda: Var("lambda", "int64")' in text and '_inf: Var("inf", "float32") = x' in text


def test_symbolic_shapes_and_scalar_params():
    m = Var("m", "int32")
    m64 = Cast("int64", m)
    D = Buffer("D", (Mul(n, IntImm(2)), m64), "bfloat16", strides=(m64, IntImm(1)))
    f = PrimFunc("g", (m, D, n), Store(D, FloatImm(1.5, "bfloat16"), (IntImm(0), IntImm(0))))
    text = roundtrip(f)
    assert text.startswith('def g(m: int32, D: Buffer((n * 2, cast("int64", m)), "bfloat16", '
                           'strides=(cast("int64", m), 1)), n: int64):')


def test_stmt_to_str_indents():
    assert stmt_to_str(Evaluate(i), 2) == "        evaluate(i)\n"


def test_handwritten_text():
    f = parse('''
        def h(A: Buffer((8,), "float32"), x: float32):
            for i in serial(extent=8):
                A[i] = -x + exp(2.0)
    ''')
    loop = f.body
    assert loop.min == IntImm(0) and loop.extent == IntImm(8)
    neg_x = Sub(FloatImm(0.0), Var("x", "float32"))
    assert loop.body.value == Add(neg_x, intrinsics.exp(FloatImm(2.0)))


# --- random expression trees -----------------------------------------------------------------

_DTYPES = st.sampled_from(dt.SCALAR_TYPES + ("int32x4", "float32x8"))
_LET_VARS = [Var("t"), Var("t", "float32"), Var("u", "bool")]


def _imm(t, v):
    if dt.is_float(t):
        return FloatImm(float(v), t)
    return IntImm(int(v) if not dt.is_bool(t) else int(v) & 1, t)


_leaves = st.one_of(
    st.sampled_from([i, j, n, x, b, h]),
    st.builds(_imm, _DTYPES, st.integers(-2 ** 64, 2 ** 64)),
    st.builds(lambda t, v: FloatImm(v, t),
              st.sampled_from(["float16", "bfloat16", "float32", "float64"]), st.floats()),
)


def _extend(kids):
    ops = sorted(BINARY_OPS.values(), key=lambda c: c.__name__)
    lanes = st.integers(2, 16)
    return st.one_of(
        st.builds(lambda cls, a, b_: cls(a, b_), st.sampled_from(ops), kids, kids),
        st.builds(Not, kids),
        st.builds(Cast, _DTYPES, kids),
        st.builds(Select, kids, kids, kids),
        st.builds(lambda nm, args: Call("float32", nm, tuple(args)),
                  st.sampled_from(intrinsics.ALL + ("custom",)), st.lists(kids, max_size=3)),
        st.builds(lambda a: intrinsics.call("exp", a), st.just(x)),
        st.builds(Ramp, kids, kids, lanes),
        st.builds(Broadcast, kids, lanes),
        # a let's variable appears only in its body
        st.builds(lambda v, val, body: Let(v, val, Mul(body, v)),
                  st.sampled_from(_LET_VARS), kids, kids),
        st.builds(lambda idx, p: Load(A, tuple(idx), p),
                  st.lists(kids, max_size=2), st.none() | kids),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(_leaves, _extend, max_leaves=25))
def test_random_expressions_roundtrip(e):
    text = func_to_str(func_of(Evaluate(e)))
    rt_expr(e, equal="nan" not in text)


# --- errors ----------------------------------------------------------------------------------

HEAD = 'def f(A: Buffer((4,), "float32"), n: int64):\n'


@pytest.mark.parametrize("text,line,msg", [
    (HEAD + "    A[0] = = 1.0\n", 2, "invalid syntax"),
    (HEAD + "    A[0] = 1.0\n    B[0] = 1.0\n", 3, "undefined name 'B'"),
    (HEAD + "    A[i] = 1.0\n", 2, "undefined name 'i'"),
    (HEAD + "    if 0 < n < 4:\n        pass\n", 2, "chained comparison"),
    (HEAD + "    pass\n    while n:\n        pass\n", 3, "unsupported statement"),
    (HEAD + "    A[0] = foo(1.0)\n", 2, "unknown function 'foo'"),
    (HEAD + "    for i in range(4):\n        pass\n", 2, "a loop iterates over"),
    (HEAD + "    for i in serial(4, step=2):\n        pass\n", 2, "unexpected keyword 'step'"),
    (HEAD + "    for i in serial(0, 4):\n        pass\n", 2, "takes the extent once"),
    (HEAD + "    A[0] = cast(\"float32\", int32(n))\n", 2, "takes a number literal"),
    (HEAD + "    x: int31 = 3\n    pass\n", 2, "unknown dtype 'int31'"),
    (HEAD + "    evaluate(exp(1.0, 2.0))\n", 2, "exp takes 1 argument"),
    (HEAD + "\n    evaluate(exp(3))\n", 3, "needs a float argument"),
    (HEAD + "    evaluate(A)\n", 2, "used as a value"),
    (HEAD + "    with allocate(\"T\", (4,), \"float32\"):\n        pass\n", 2, "needs 'as name'"),
    (HEAD + "    A[0] = cast(\"float33\", n)\n", 2, "unknown dtype"),
    (HEAD + "    A[0] = broadcast(1.0, n)\n", 2, "lanes must be an integer literal"),
    (HEAD + "    nan = 3\n", 2, "reserved"),
    (HEAD + "    A[0] = int32(1.5)\n", 2, "needs an integer literal"),
    (HEAD + "    A.store(1.0, 0)\n", 2, "indices must be a tuple"),
    (HEAD + "    pass\ndef g():\n    pass\n", 3, "exactly one function"),
    ("", 1, "exactly one function"),
    ("def f(A):\n    pass\n", 1, "needs an annotation"),
    ('def f(A: Buffer(4, "float32")):\n    pass\n', 1, "must be a tuple"),
    ('def f(A: Buffer((4,), "float32", scope="remote")):\n    pass\n', 1, ""),
    ("@attrs(x=foo)\ndef f():\n    pass\n", 1, "@attrs takes"),
    ("@jit\ndef f():\n    pass\n", 1, "unknown decorator"),
])
def test_malformed_text_names_the_line(text, line, msg):
    if "remote" in text:  # Buffer does not check scopes; an unknown one parses as written
        assert parse(text).params[0].scope == "remote"
        return
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.lineno == line
    assert str(info.value).startswith(f"line {line}: ") and msg in str(info.value)
