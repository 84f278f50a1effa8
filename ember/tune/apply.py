"""Compiling with a tuning database: each fused group that has a record gets its best one.

``ember.compile(model, tuning_db="tuning.db")`` reads the best record per workload for the
target once (one query), then while the model builds, :func:`tuned_schedule` answers per
group. A tuned group keeps its static shapes (a shape-generic kernel would be another
workload) and its record's schedule travels with its compile job.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from .workload import target_name, workload_key

__all__ = ["tuned_schedule", "tuning_records"]

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("ember_tuning_records", default=None)


@contextlib.contextmanager
def tuning_records(db, target) -> Iterator[dict]:
    """Apply the records of ``db`` (a path or URL, an open ``Database``, or a dict of
    workload -> Record) to the models compiled inside."""
    if db is None:
        yield {}
        return
    if isinstance(db, dict):
        best = db
    else:
        from .database import Database, open_database

        if isinstance(db, Database):
            best = db.best_per_workload(target_name(target))
        else:
            with open_database(db) as opened:
                best = opened.best_per_workload(target_name(target))
    token = _ACTIVE.set((best, target))
    try:
        yield best
    finally:
        _ACTIVE.reset(token)


def active() -> bool:
    return bool(_ACTIVE.get() and _ACTIVE.get()[0])


def tuned_schedule(fn) -> tuple | None:
    """``(decisions JSON, trace JSON)`` of the best record for group ``fn``, or None."""
    cur = _ACTIVE.get()
    if not cur or not cur[0]:
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
