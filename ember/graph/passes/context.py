"""Passes and the context that runs them.

A pass is a named function ``Module -> Module`` with the lowest opt level it runs at::

    fold = graph_pass("fold_constant", opt_level=1)(fold_constant_fn)
    with PassContext(opt_level=3, disabled={"fuse_ops"}, instruments=[PassTimer()],
                     config={"evaluate": evaluate_constants}) as ctx:
        mod = ctx.run(mod, [fold, ...])

``config`` carries what the layers above give the passes: the compile's ``options``
(:class:`ember.options.CompileOptions`), its ``target``, and the constant folder's
``evaluate`` (``ember.compiler.fold.evaluate_constants``: a pass cannot import the compiler).

Instruments see every pass: :class:`PassTimer` records wall time per pass,
:class:`VerifyAfterPass` re-infers types and checks the graph after each pass, so a broken
graph is reported with the name of the pass that broke it, not three passes later.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Iterable, Optional, Sequence

from ...errors import EmberError
from ..ir import Module


class PassError(EmberError):
    """A pass produced an invalid graph (names the pass and the problem)."""


@dataclasses.dataclass(frozen=True)
class Pass:
    """A named graph transformation. ``fn(mod, ctx) -> mod``; runs when ``ctx.opt_level >= opt_level``."""

    name: str
    fn: Callable
    opt_level: int = 0
    doc: str = ""

    def __call__(self, mod: Module, ctx: Optional["PassContext"] = None) -> Module:
        return self.fn(mod, ctx or PassContext.current())


def graph_pass(name: str, opt_level: int = 0) -> Callable[[Callable], Pass]:
    """Decorator: ``@graph_pass("dce", opt_level=0)`` on ``fn(mod, ctx) -> mod``."""
    def wrap(fn: Callable) -> Pass:
        return Pass(name, fn, opt_level, (fn.__doc__ or "").strip().split("\n")[0])
    return wrap


def typed_call(op: str, args: list, attrs: dict, span=None):
    """A new call of ``op`` with its type inferred: what a rewrite builds."""
    from ..ir import Call
    from ..ops import infer_type

    return Call(op, args, attrs, infer_type(op, [a.type for a in args], attrs), span=span)


def rewrite_main(mod, fn: Callable, original: bool = False):
    """``mod`` with its ``main`` body rewritten by :func:`ember.graph.visit.rewrite` with
    ``fn`` (a node with rewritten operands -> its replacement or None; with ``original``,
    ``fn(new, node, get)``); ``mod`` itself when nothing changed. The shape of most graph
    passes."""
    from ..visit import rewrite

    main = mod.main
    body = rewrite(main.body, fn, original)
    return mod if body is main.body else mod.with_function("main", main.replace(body=body))


class Instrument:
    """Hooks around every pass. Subclasses override what they need."""

    def before(self, p: Pass, mod: Module) -> None:
        pass

    def after(self, p: Pass, mod: Module) -> None:
        pass


class PassTimer(Instrument):
    """Wall time per pass, in run order: ``timer.times == [(name, seconds), ...]``."""

    def __init__(self):
        self.times: list = []
        self._t0 = 0.0

    def before(self, p, mod):
        self._t0 = time.perf_counter()

    def after(self, p, mod):
        self.times.append((p.name, time.perf_counter() - self._t0))

    def report(self) -> str:
        total = sum(t for _, t in self.times) or 1e-12
        lines = [f"{name:<24} {t * 1e3:9.2f} ms  {100 * t / total:5.1f}%" for name, t in self.times]
        return "\n".join(lines + [f"{'total':<24} {total * 1e3:9.2f} ms"])


class VerifyAfterPass(Instrument):
    """Re-infer every type after each pass; a failure names the pass that broke the graph."""

    def after(self, p, mod):
        from .verify import verify

        try:
            verify(mod)
        except EmberError as e:
            raise PassError(f"the graph is invalid after pass {p.name!r}: {e}") from e


class PrintAfterPass(Instrument):
    """Print the module after each pass (to ``out``, a callable taking a string)."""

    def __init__(self, out: Callable[[str], None] = print):
        self.out = out

    def after(self, p, mod):
        self.out(f"# after {p.name}\n{mod}")


_STACK: list = []


class PassContext:
    """Which passes run and what watches them: ``opt_level`` (0-3), ``disabled`` pass names,
    ``instruments``. Use as a context manager; :meth:`current` is the innermost one."""

    def __init__(self, opt_level: int = 3, disabled: Iterable[str] = (),
                 instruments: Sequence[Instrument] = (), config: Optional[dict] = None):
        if opt_level not in (0, 1, 2, 3):
            raise EmberError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
        self.opt_level = opt_level
        self.disabled = frozenset(disabled)
        self.instruments = list(instruments)
        self.config = dict(config or {})

    def __enter__(self) -> "PassContext":
        _STACK.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _STACK.pop()

    @staticmethod
    def current() -> "PassContext":
        return _STACK[-1] if _STACK else PassContext()

    def enabled(self, p: Pass) -> bool:
        return p.opt_level <= self.opt_level and p.name not in self.disabled

    def run(self, mod: Module, passes: Sequence[Pass]) -> Module:
        """Run the enabled ``passes`` in order, instruments around each."""
        unknown = self.disabled - {p.name for p in passes}
        if unknown and not self.config.get("allow_unknown_disabled"):
            names = ", ".join(p.name for p in passes)
            raise EmberError(f"disabled pass(es) {', '.join(sorted(unknown))} do not exist (passes: {names})")
        with self:
            for p in passes:
                if not self.enabled(p):
                    continue
                for ins in self.instruments:
                    ins.before(p, mod)
                mod = p(mod, self)
                for ins in self.instruments:
                    ins.after(p, mod)
        return mod


__all__ = ["Instrument", "Pass", "PassContext", "PassError", "PassTimer", "PrintAfterPass",
           "VerifyAfterPass", "graph_pass"]
