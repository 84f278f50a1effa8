"""Loads under a select guarded by the condition that picks their arm, where it is on indices."""
from ember.loop import intrinsics
from ember.loop.expr import LT, IntImm, Load, Select, Var, const
from ember.loop.passes.guard_loads import guard_select_loads
from ember.loop.stmt import Buffer, For, PrimFunc, Store


def _func(value):
    x = Var("x")
    return PrimFunc("k", (OUT, INP), For(x, IntImm(0), IntImm(8), "serial", Store(OUT, value(x), (x,))))


OUT, INP = Buffer("out", (8,)), Buffer("inp", (12,))


def _loads(f):
    from ember.loop.visit import walk

    return [n for n in walk(f) if isinstance(n, Load)]


def test_a_padded_read_gets_the_condition_as_its_predicate():
    g = guard_select_loads(_func(lambda x: Select(LT(x, const(6)), Load(INP, (x + 4,)), const(0.0))))
    (load,) = _loads(g)
    assert load.predicate is not None


def test_a_condition_on_data_alone_leaves_the_loads_unguarded():
    """where(isnan(v), 0, v): no index is ruled out, and the arm stays the same expression as the
    condition's (one computation of v, not a masked second one)."""
    def value(x):
        v = Load(INP, (x,)) * const(2.0)
        return Select(intrinsics.isnan(v), const(0.0), v)
    f = _func(value)
    assert guard_select_loads(f) == f
