"""instrument_loops: which statements become sites, what each site records, and the text form."""
import pytest

from ember.errors import CompileError, DTypeError, ParseError
from ember.loop import Buffer, For, PrimFunc, Store, Var, parse
from ember.loop.arith import simplify
from ember.loop.expr import Call, as_expr, const
from ember.loop.intrinsics import cycle_counter, profile_record
from ember.loop.passes import instrument_loops, mark_sites
from ember.loop.stmt import Allocate, IfThenElse, LetStmt, seq
from ember.loop.visit import walk


def nest(*extents, kinds=None):
    """``for i0 in e0: for i1 in e1: ... Y[i0, i1, ...] = X[...] * 2``."""
    shape = tuple(extents)
    X, Y = Buffer("X", shape), Buffer("Y", shape)
    vs = [Var(f"i{k}") for k in range(len(extents))]
    body = Store(Y, X[tuple(vs)] * 2.0, tuple(vs))
    kinds = kinds or ["serial"] * len(extents)
    for v, e, k in reversed(list(zip(vs, extents, kinds))):
        body = For(v, as_expr(0), as_expr(e), k, body)
    return PrimFunc("nest", (X, Y), body)


def records(func):
    return [n for n in walk(func.body) if isinstance(n, Call) and n.name == "profile_record"]


def timed_loops(func):
    """The loops that are directly timed (the first statement of a site's let)."""
    return [n.body.stmts[0] for n in walk(func.body)
            if isinstance(n, LetStmt) and n.var.name.startswith("prof")
            and isinstance(n.body.stmts[0], For)]


def test_sites_follow_depth():
    f = nest(4, 5, 6)
    for depth, want in [(0, 1), (1, 2), (2, 3), (3, 4), (9, 4)]:
        g, sites = instrument_loops(f, depth)
        assert len(sites) == want == len(records(g))
        assert [s.depth for s in sites] == list(range(want))
        assert g.attr("profile_sites") == want
        assert max(s.depth for s in sites) <= depth


def test_loops_below_depth_are_untouched():
    f = nest(4, 5, 6)
    g, _ = instrument_loops(f, 1)
    (outer,) = timed_loops(g)
    assert outer.body == f.body.body  # the inner nest is the original one, node for node


def test_site_description():
    f = nest(4, 5, kinds=["parallel", "serial"])
    g, sites = instrument_loops(f, 2, records_per_site=8, max_threads=4)
    assert g.attrs == (("profile_sites", 3), ("profile_records", 8), ("profile_threads", 4))
    body, outer, inner = sites
    assert (body.site, body.depth, body.kind, body.kernel) == (0, 0, "body", "nest")
    assert body.header.startswith("def nest(")
    assert (outer.var, outer.extent, outer.kind, outer.header) == ("i0", "4", "parallel", "for i0 in parallel(4):")
    assert (inner.var, inner.extent, inner.kind, inner.header) == ("i1", "5", "serial", "for i1 in serial(5):")
    lines = g.script().splitlines()
    for s in sites:
        assert lines[s.line].strip() == s.header
    marked = mark_sites(g.script(), sites).splitlines()
    assert marked[inner.line].endswith("for i1 in serial(5):  # [L2]")
    assert marked[body.line].endswith("):  # [L0]")


def test_symbolic_extent_and_min_as_printed():
    n = Var("n")
    X = Buffer("X", (n,))
    i = Var("i")
    f = PrimFunc("sym", (X, n), For(i, const(1), n - 1, "serial", Store(X, X[i] + 1.0, (i,))))
    g, sites = instrument_loops(f, 1)
    assert sites[1].extent == "n - 1"
    assert sites[1].header == "for i in serial(min=1, extent=n - 1):"


def test_loops_under_ifs_allocations_and_lets_count_by_enclosing_loops():
    X = Buffer("X", (8,))
    i, j, c = Var("i"), Var("j"), Var("c")
    inner = For(j, const(0), const(8), "serial", Store(X, X[j] + 1.0, (j,)))

    T = Buffer("T", (8,), scope="local")
    body = seq(LetStmt(c, const(3), IfThenElse(c > 2, Allocate(T, inner))),
               For(i, const(0), const(2), "serial", inner))
    f = PrimFunc("mixed", (X,), body)
    g, sites = instrument_loops(f, 1)
    assert [(s.depth, s.var) for s in sites] == [(0, ""), (1, "j"), (1, "i")]
    g2, sites2 = instrument_loops(f, 2)
    assert [(s.depth, s.var) for s in sites2] == [(0, ""), (1, "j"), (1, "i"), (2, "j")]


def test_round_trip_and_short_forms():
    g, _ = instrument_loops(nest(3, 4, kinds=["parallel", "serial"]), 2)
    text = g.script()
    assert "prof1 = cycle_counter()" in text or "with let(cycle_counter()) as prof1:" in text
    assert "evaluate(profile_record(2, prof2, cycle_counter()))" in text
    back = parse(text)
    assert back == g
    assert back.script() == text


def test_simplify_keeps_the_instrumentation():
    g, _ = instrument_loops(nest(3, 4), 2)
    assert simplify(g) == g


def test_errors():
    f = nest(2, 2)
    g, _ = instrument_loops(f)
    with pytest.raises(CompileError, match="already instrumented"):
        instrument_loops(g)
    with pytest.raises(CompileError, match="max_depth >= 0"):
        instrument_loops(f, -1)
    with pytest.raises(DTypeError, match="int64"):
        profile_record(1, Var("t", "int32"), cycle_counter())
    bad = g.script().replace("profile_record(0, prof0, cycle_counter())", "profile_record(0, prof0)")
    with pytest.raises(ParseError, match="3 arguments"):
        parse(bad)
