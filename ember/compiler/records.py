"""Compiling with tuning records: each fused group that has a record gets its best one.

The front door reads the best record per workload for the target once
(``ember.tune.apply.best_records``: one query) and passes them in the options
(``CompileOptions.tuning_records``); while the model builds, :func:`tuned_schedule` answers per
group. A tuned group keeps its static shapes (a shape-generic kernel would be another workload)
and its record's schedule travels with its compile job.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Optional

from .workload import workload_key

__all__ = ["active", "applying", "records_digest", "tuned_schedule"]

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("ember_tuning_records", default=None)


@contextlib.contextmanager
def applying(records: Optional[Mapping], target) -> Iterator[None]:
    """Apply ``records`` (workload -> record) to the models compiled inside."""
    token = _ACTIVE.set((records, target) if records else None)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active() -> bool:
    return _ACTIVE.get() is not None


def tuned_schedule(fn) -> tuple | None:
    """``(decisions JSON, trace JSON)`` of the best record for group ``fn``, or None."""
    cur = _ACTIVE.get()
    if cur is None:
        return None
    best, target = cur
    rec = best.get(workload_key(fn, target))
    return None if rec is None else (rec.decisions, rec.trace)


def records_digest(groups: list) -> str:
    """What the applied records add to a model's kernel cache key."""
    parts = []
    for g, fn in groups:
        t = tuned_schedule(fn)
        if t is not None:
            parts.append(f"{g}:{t[0]}:{t[1]}")
    return "\n".join(parts)
