"""The schedule space: the decisions a default schedule makes, which the tuner may change.

A kernel's schedule function asks for each of its decisions through :func:`knob`::

    xb = knob("conv.xb", range(1, most + 1), default=width_block(...))

Outside tuning that returns the default, so the compiler's schedules are exactly what they
were. Under :func:`decisions` it records the knob (its name, choices and default: the space
this kernel offers) and returns the value the tuner chose. A candidate schedule is therefore
a set of decisions; the schedule it makes is recorded as a trace of primitive calls
(``Schedule.trace``), and that trace is what the database stores and a compile replays.

Knobs a schedule reaches only under some decisions (the chunked reduction's knobs when it
chunks) are seen only then: the space is discovered as the search goes.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["Decisions", "Knob", "active_values", "deciding", "decisions", "knob"]


@dataclasses.dataclass(frozen=True)
class Knob:
    """One decision of a schedule: its choices and the default schedule's value."""

    name: str
    choices: tuple
    default: Any


class Decisions:
    """The values chosen for knobs (``values``) and the knobs the schedule asked for
    (``seen``, filled as the schedule runs)."""

    def __init__(self, values: dict | None = None):
        self.values = dict(values or {})
        self.seen: dict = {}

    def to_json(self) -> str:
        """Only the decisions the schedule used, sorted: equal schedules, equal text."""
        used = {k: v for k, v in self.values.items() if k in self.seen}
        return json.dumps(used, sort_keys=True)


_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("ember_tune_decisions", default=None)


@contextlib.contextmanager
def decisions(values: dict | None = None) -> Iterator[Decisions]:
    """Schedules made inside take their knobs from ``values`` (the default for a knob not in
    it, or a value that is not one of its choices now) and record the knobs they ask for."""
    d = Decisions(values)
    token = _ACTIVE.set(d)
    try:
        yield d
    finally:
        _ACTIVE.reset(token)


def active_values() -> dict | None:
    """The values of the active :func:`decisions` (None outside one): what a compile made
    inside passes to its compile jobs, which schedule in other processes."""
    d = _ACTIVE.get()
    return None if d is None else dict(d.values)


def deciding() -> bool:
    """Whether schedules made now take a tuner's decisions (inside :func:`decisions`): what
    is compiled then is not the default, so it must not be kept as the model's executable."""
    return _ACTIVE.get() is not None


def knob(name: str, choices: Sequence, default: Any) -> Any:
    """The value of decision ``name``: ``default`` unless a tuner's :func:`decisions` chose
    another of ``choices``. Choices are JSON values (ints, strings, booleans)."""
    d = _ACTIVE.get()
    if d is None:
        return default
    choices = tuple(dict.fromkeys(choices))  # (ordered, without repeats)
    if default not in choices:
        choices = (default,) + choices
    d.seen[name] = Knob(name, choices, default)
    v = d.values.get(name, default)
    if v not in choices:
        v = default
    d.values[name] = v
    return v
