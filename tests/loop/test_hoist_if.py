"""Hoisting a loop-invariant guard of accumulator updates above the loops it sits in."""
from ember.loop.expr import GE, IntImm, Load, Var, const
from ember.loop.passes.hoist_if import hoist_invariant_ifs
from ember.loop.stmt import Buffer, For, IfThenElse, PrimFunc, Store


def _nest(scope: str):
    """for r: for x: if t + r >= 3: acc[x] = acc[x] + inp[x + r]  (acc in ``scope``)."""
    r, x, t = Var("r"), Var("x"), Var("t")
    acc = Buffer("acc", (4,), scope=scope)
    inp = Buffer("inp", (8,))
    upd = Store(acc, Load(acc, (x,)) + Load(inp, (x + r,)), (x,))
    cond = GE(t + r, const(3))
    body = For(r, IntImm(0), IntImm(3), "serial", For(x, IntImm(0), IntImm(4), "unrolled", IfThenElse(cond, upd, None)))
    return PrimFunc("k", (acc, inp), body), cond


def test_a_guard_of_register_updates_leaves_the_loops_it_does_not_depend_on():
    f, cond = _nest("local")
    g = hoist_invariant_ifs(f)
    outer = g.body
    assert isinstance(outer, For) and outer.var.name == "r"  # (it uses r: it stays inside r)
    assert isinstance(outer.body, IfThenElse) and outer.body.condition == cond
    assert isinstance(outer.body.then_case, For) and outer.body.then_case.var.name == "x"


def test_a_guard_of_a_write_back_stays_where_it_is():
    """Stores to memory keep their guard innermost, where the vectorizer makes it a mask."""
    f, _ = _nest("global")
    assert hoist_invariant_ifs(f) == f


def test_a_guard_on_what_the_loop_writes_stays_in_the_loop():
    """for l: if state[0] == 0: state[0] = ...  -- the condition changes inside the loop (a scan
    that stops at its first find: Unique's row comparison was hoisted and compared only the
    first column)."""
    from ember.loop.expr import EQ, NE

    l = Var("l")
    state = Buffer("state", (1,), "int32", scope="local")
    inp = Buffer("inp", (8,))
    zero = IntImm(0)
    upd = IfThenElse(NE(Load(inp, (l,)), const(0.0)), Store(state, IntImm(1, "int32"), (zero,)), None)
    body = For(l, zero, IntImm(8), "serial", IfThenElse(EQ(Load(state, (zero,)), IntImm(0, "int32")), upd, None))
    f = PrimFunc("k", (state, inp), body)
    assert hoist_invariant_ifs(f) == f
