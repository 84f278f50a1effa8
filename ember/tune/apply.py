"""Compiling with a tuning database: ``ember.compile(model, tuning_db="tuning.db")`` reads the
best record per workload for the target here (one query) and the compiler applies them
(:mod:`ember.compiler.records`)."""
from __future__ import annotations

import os
from collections.abc import Mapping

from ..compiler.workload import target_name

__all__ = ["best_records", "with_tuning_db"]


def best_records(db, target) -> dict:
    """The best record per workload of ``db`` (a path or URL, an open ``Database``, or already a
    dict of workload -> Record) for ``target``."""
    if isinstance(db, Mapping):
        return dict(db)
    from .database import Database, open_database

    if isinstance(db, Database):
        return db.best_per_workload(target_name(target))
    with open_database(db) as opened:
        return opened.best_per_workload(target_name(target))


def with_tuning_db(options, db=None):
    """``options`` with the records of ``db`` (default: ``$EMBER_TUNING_DB`` when set)."""
    if db is None:
        db = os.environ.get("EMBER_TUNING_DB") or None
    if db is None:
        return options
    return options.replace(tuning_records=best_records(db, options.target))
