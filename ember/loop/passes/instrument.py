"""Loop instrumentation: cycle-counter reads around a kernel's body and its outer loops.

Run it *after* :func:`default_pipeline` (unroll and vectorize have run), so the loops it times
are the loops of the generated code. Each site is a let of the counter before the statement and
a record after it::

    prof1 = cycle_counter()
    for i in parallel(11):
        ...
    evaluate(profile_record(1, prof1, cycle_counter()))

Site 0 is the whole body (depth 0); every ``For`` at nesting depth 1 .. ``max_depth`` is a site
of its own (outermost loops are depth 1; only enclosing loops count towards the depth), numbered
in pre-order. The function gets the attrs ``profile_sites``, ``profile_records`` and
``profile_threads`` that size its counters (``ember.codegen.llvm.profile``); inside a parallel
loop the records go to the counters of the thread running it. Instrumentation only reads the
counter and writes the counters, so outputs stay bit-identical.
"""
from __future__ import annotations

import dataclasses
import re

from ...errors import CompileError
from ..expr import Var
from ..intrinsics import CYCLE_TYPE, cycle_counter, profile_record
from ..printer import expr_to_str
from ..stmt import Allocate, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt

PROFILE_ATTRS = ("profile_sites", "profile_records", "profile_threads")


@dataclasses.dataclass(frozen=True)
class LoopSite:
    """One instrumented statement: the body (site 0) or a loop.

    ``var``, ``extent`` and ``header`` are as the printed instrumented function
    (``func.script()``) shows them; ``line`` is the header's 0-based line number in that text.
    ``kind`` is the loop's kind (``serial``, ``parallel``, ...) or ``body`` for site 0.
    """

    kernel: str
    site: int
    depth: int
    var: str
    extent: str
    kind: str
    header: str
    line: int


def instrument_loops(func: PrimFunc, max_depth: int = 1, records_per_site: int = 256,
                     max_threads: int = 64) -> tuple[PrimFunc, list[LoopSite]]:
    """Time ``func``'s body and its loops down to ``max_depth``; returns ``(func, sites)``.

    ``records_per_site`` durations are kept per site and thread (the first ones; counts and
    cycle totals keep every execution); threads numbered ``max_threads - 1`` and above share
    one slot of atomically updated counters.
    """
    if max_depth < 0 or records_per_site < 0 or max_threads < 1:
        raise CompileError(f"instrument_loops: need max_depth >= 0, records_per_site >= 0 and "
                           f"max_threads >= 1, got {max_depth}, {records_per_site}, {max_threads}")
    if any(func.attr(k) is not None for k in PROFILE_ATTRS):
        raise CompileError(f"kernel {func.name!r} is already instrumented")
    loops: list = [None]  # site -> (For, its start variable, depth); site 0 is the body

    def visit(s: Stmt, depth: int) -> Stmt:
        """``s`` with its loops at depths > ``depth`` (down to max_depth) instrumented."""
        if isinstance(s, For):
            if depth + 1 > max_depth:
                return s
            site = len(loops)
            loops.append(None)  # numbered before its inner loops: pre-order
            body = visit(s.body, depth + 1)
            loop = s if body is s.body else s.replace(body=body)
            loops[site] = (loop, depth + 1)
            return _timed(loop, site)
        if isinstance(s, SeqStmt):
            stmts = tuple(visit(x, depth) for x in s.stmts)
            return s if all(a is b for a, b in zip(stmts, s.stmts)) else SeqStmt(stmts)
        if isinstance(s, (Allocate, LetStmt)):
            body = visit(s.body, depth)
            return s if body is s.body else s.replace(body=body)
        if isinstance(s, IfThenElse):
            then = visit(s.then_case, depth)
            other = None if s.else_case is None else visit(s.else_case, depth)
            return s.replace(then_case=then, else_case=other)
        return s

    body = _timed(visit(func.body, 0), 0)
    attrs = func.attrs + (("profile_sites", len(loops)), ("profile_records", records_per_site),
                          ("profile_threads", max_threads))
    out = func.replace(body=body, attrs=attrs)
    return out, _describe(out, loops)


def _start_var(site: int) -> Var:
    return Var(f"prof{site}", CYCLE_TYPE)


def _timed(s: Stmt, site: int) -> Stmt:
    """``start = cycle_counter(); s; profile_record(site, start, cycle_counter())``."""
    start = _start_var(site)
    record = Evaluate(profile_record(site, start, cycle_counter()))
    return LetStmt(start, cycle_counter(), SeqStmt((s, record)))


def _describe(func: PrimFunc, loops: list) -> list[LoopSite]:
    """The sites as the printed function shows them: the line after each start binding is the
    statement it times (a loop header; for site 0 the function's ``def`` line)."""
    lines = func.script().splitlines()
    def_line = next(k for k, t in enumerate(lines) if t.startswith("def "))
    sites = [LoopSite(func.name, 0, 0, "", "", "body", lines[def_line], def_line)]
    for site, (loop, depth) in enumerate(loops[1:], start=1):
        name = re.escape(expr_to_str(_start_var(site), within=func))
        binding = re.compile(rf"^\s*({name}(: \w+)? = |with let\(.*\) as {name}:$)")
        at = next(k for k, t in enumerate(lines) if binding.match(t)) + 1
        header = lines[at].strip()
        m = re.match(r"for (\S+) in ", header)
        if m is None:  # the printer's layout changed under us: say so rather than mislabel
            raise CompileError(f"kernel {func.name!r}: cannot find the header of loop site {site}")
        sites.append(LoopSite(func.name, site, depth, m.group(1),
                              expr_to_str(loop.extent, within=func), loop.kind, header, at))
    return sites


def mark_sites(script: str, sites: list[LoopSite]) -> str:
    """``script`` (the instrumented function's text) with ``# [L<site>]`` on each site's line."""
    lines = script.splitlines()
    for s in sites:
        lines[s.line] += f"  # [L{s.site}]"
    return "\n".join(lines) + "\n"
