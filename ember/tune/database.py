"""The tuning records database: SQLite by default, PostgreSQL by URL for a team.

``open_database("tuning.db")`` opens (creating it) an SQLite file; ``open_database(
"postgresql://user:pw@host/db")`` a PostgreSQL database through SQLAlchemy and psycopg 3. Both
hold one table of :class:`~ember.tune.records.Record` rows, ``ember_tuning_records``, and a
table ``ember_tuning_meta`` with the schema's version; both are created when missing.

Several processes may write one SQLite file at once (WAL journal, write transactions begun with
``BEGIN IMMEDIATE``, a busy timeout), and several clients one PostgreSQL database (one
transaction per call; an import holds an advisory lock so that its duplicate check holds).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import time
from collections.abc import Iterable, Iterator

from ..errors import TuneError
from .records import PASSED_OVER, SET_ASIDE, Record

SCHEMA_VERSION = 1
RECORDS_TABLE = "ember_tuning_records"
META_TABLE = "ember_tuning_meta"

#: How long an SQLite writer waits for another process's write to finish (seconds).
SQLITE_BUSY_TIMEOUT = 60.0
#: How long connecting to a PostgreSQL server may take before it counts as unreachable (seconds).
CONNECT_TIMEOUT = 10
# pg_advisory_xact_lock keys (any constant int64 no one else uses): schema creation, imports
_LOCK_SCHEMA = 0x656D6265_72000001
_LOCK_IMPORT = 0x656D6265_72000002

_INSERT_CHUNK = 500


def _tables():
    """The schema's SQLAlchemy tables (built on first use: SQLAlchemy is the ``tune`` extra)."""
    global _TABLES
    try:
        return _TABLES
    except NameError:
        pass
    from sqlalchemy import Column, Double, Index, Integer, MetaData, Table, Text

    meta = MetaData()
    records = Table(
        RECORDS_TABLE, meta,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("workload", Text, nullable=False),
        Column("target", Text, nullable=False),
        Column("trace", Text, nullable=False),
        Column("decisions", Text, nullable=False),
        Column("times", Text, nullable=False),       # JSON list of seconds
        Column("median", Double, nullable=True),     # NULL when the record is not ok
        Column("error", Text, nullable=False),
        Column("task", Text, nullable=False),
        Column("features", Text, nullable=False),
        Column("ember_version", Text, nullable=False),
        Column("created", Double, nullable=False),
        Index(f"ix_{RECORDS_TABLE}_workload_target", "workload", "target"),
    )
    info = Table(META_TABLE, meta, Column("key", Text, primary_key=True), Column("value", Text, nullable=False))
    _TABLES = (meta, records, info)
    return _TABLES


# -- URLs -------------------------------------------------------------------------------------


def _mask(url: str) -> str:
    """``url`` with any password replaced by ``***`` (works on URLs SQLAlchemy cannot parse)."""
    return re.sub(r"(://[^:/@\s]*):[^@/\s]*@", r"\1:***@", url)


def _url_of(where) -> "tuple[object, str]":
    """(SQLAlchemy URL, the same masked as text) for a path or a URL."""
    try:
        from sqlalchemy.engine import make_url
    except ImportError:  # pragma: no cover - the tune extra is missing
        raise TuneError("the tuning database needs SQLAlchemy: pip install 'ember[tune]'") from None
    if isinstance(where, os.PathLike) or (isinstance(where, str) and "://" not in where):
        path = os.path.abspath(os.path.expanduser(os.fspath(where)))
        if os.path.isdir(path):
            raise TuneError(f"tuning database {path!r} is a directory; give a file name, e.g. {os.path.join(path, 'tuning.db')!r}")
        parent = os.path.dirname(path)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise TuneError(f"cannot create the folder of tuning database {path!r}: {e}") from None
        from sqlalchemy.engine import URL

        url = URL.create("sqlite", database=path)
        return url, f"sqlite:///{path}"
    if not isinstance(where, str):
        raise TuneError(f"a tuning database is a path or a URL string, not {type(where).__name__}")
    text = where.strip()
    scheme = text.split("://", 1)[0].lower()
    if scheme in ("postgresql", "postgres"):  # psycopg 3, not SQLAlchemy's default psycopg2
        text = "postgresql+psycopg://" + text.split("://", 1)[1]
    try:
        url = make_url(text)
    except Exception as e:  # sqlalchemy.exc.ArgumentError, ValueError on a bad port
        raise TuneError(f"tuning database URL {_mask(where)!r} cannot be read ({e}); use a file path, "
                        "'sqlite:///path/to/tuning.db' or 'postgresql://user:password@host:port/database'") from None
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise TuneError(f"tuning database URL {_mask(where)!r}: {url.get_backend_name()!r} databases are not supported; "
                        "use a file path, 'sqlite:///path/to/tuning.db' or 'postgresql://user:password@host:port/database'")
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        path = os.path.abspath(os.path.expanduser(url.database))
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as e:
            raise TuneError(f"cannot create the folder of tuning database {path!r}: {e}") from None
        url = url.set(database=path)
    return url, url.render_as_string(hide_password=True)


# -- rows -------------------------------------------------------------------------------------


def _row_of(r: Record) -> dict:
    return {"workload": r.workload, "target": r.target, "trace": r.trace, "decisions": r.decisions,
            "times": json.dumps(list(r.times)), "median": r.median if r.ok else None, "error": r.error,
            "task": r.task, "features": r.features, "ember_version": r.ember_version, "created": r.created}


def _filled(r: Record) -> Record:
    """``r`` with ``created`` (now) and ``ember_version`` (this Ember's) filled in when unset."""
    changes = {}
    if not r.created:
        changes["created"] = time.time()
    if not r.ember_version:
        from ..version import __version__

        changes["ember_version"] = __version__
    return dataclasses.replace(r, **changes) if changes else r


def _record_of(row) -> Record:
    m = row._mapping
    return Record(workload=m["workload"], target=m["target"], trace=m["trace"], decisions=m["decisions"],
                  times=tuple(json.loads(m["times"] or "[]")), error=m["error"], task=m["task"],
                  features=m["features"], ember_version=m["ember_version"], created=m["created"])


# -- the database -----------------------------------------------------------------------------


class Database:
    """A tuning records store (see :func:`open_database`). Safe to share between threads; a
    forked child gets fresh connections of its own."""

    def __init__(self, where: str | os.PathLike):
        from sqlalchemy import create_engine, event

        url, self.url = _url_of(where)
        self.dialect = url.get_backend_name()
        if self.dialect == "sqlite":
            engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT})

            @event.listens_for(engine, "connect")
            def _connect(dbapi_conn, _record):
                # transactions are begun by the "begin" hook below, not by the sqlite3 module
                dbapi_conn.isolation_level = None
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT * 1000)}")
                if url.database and url.database != ":memory:":
                    cur.execute("PRAGMA journal_mode = WAL")
                    cur.execute("PRAGMA synchronous = NORMAL")
                cur.close()

            @event.listens_for(engine, "begin")
            def _begin(conn):
                # a writer takes the write lock up front: a deferred transaction that reads and
                # then writes fails at once with "database is locked" instead of waiting
                conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("ember_write") else "BEGIN")
        else:
            engine = create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT})
        self._engine = engine
        self._pid = os.getpid()
        try:
            self._create_schema()
        except BaseException:
            engine.dispose()
            raise

    # connections and errors

    @contextlib.contextmanager
    def _begin(self, write: bool = False) -> Iterator:
        """One transaction (committed at the end, rolled back on an error); database errors
        become :class:`TuneError` naming this database."""
        import sqlalchemy.exc

        if self._engine is None:
            raise TuneError(f"tuning database {self.url} is closed")
        if os.getpid() != self._pid:  # a forked child must not use its parent's connections
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        try:
            with self._engine.connect() as conn:
                if write:
                    conn = conn.execution_options(ember_write=True)
                with conn.begin():
                    yield conn
        except sqlalchemy.exc.DBAPIError as e:
            raise TuneError(self._explain(e)) from e
        except sqlalchemy.exc.SQLAlchemyError as e:
            raise TuneError(f"tuning database {self.url}: {e}") from e

    def _explain(self, e) -> str:
        orig = " ".join(str(getattr(e, "orig", None) or e).split())
        operational = type(getattr(e, "orig", None)).__name__ == "OperationalError"
        if self.dialect == "postgresql" and (operational or e.connection_invalidated):
            return (f"cannot use tuning database {self.url}: {orig}. Check that the PostgreSQL server is running "
                    "and reachable at that host and port, that the user, password and database name are right "
                    "(create the database with `createdb NAME`), or use an SQLite file path instead.")
        if self.dialect == "sqlite" and operational:
            return (f"cannot use tuning database {self.url}: {orig}. Check that the file and its folder are "
                    "writable and on a local disk (SQLite's locking does not work on network file systems).")
        return f"tuning database {self.url}: {orig}"

    def _create_schema(self) -> None:
        from sqlalchemy import insert, select

        meta, _, info = _tables()
        with self._begin(write=True) as conn:
            if self.dialect == "postgresql":  # two clients creating the tables at once would clash
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_LOCK_SCHEMA})")
            meta.create_all(conn, checkfirst=True)
            version = conn.execute(select(info.c.value).where(info.c.key == "schema_version")).scalar()
            if version is None:
                conn.execute(insert(info).values(key="schema_version", value=str(SCHEMA_VERSION)))
            elif not str(version).isdigit() or int(version) > SCHEMA_VERSION:
                raise TuneError(f"tuning database {self.url} has schema version {version}, newer than this Ember "
                                f"reads ({SCHEMA_VERSION}); upgrade Ember, or use another database")

    @property
    def schema_version(self) -> int:
        from sqlalchemy import select

        info = _tables()[2]
        with self._begin() as conn:
            return int(conn.execute(select(info.c.value).where(info.c.key == "schema_version")).scalar())

    # writing

    def add(self, record: Record) -> None:
        """Store one record (``created`` and ``ember_version`` filled in when unset)."""
        self.add_all([record])

    def add_all(self, records: Iterable[Record]) -> int:
        """Store records in one transaction; returns how many."""
        rows = [_row_of(_filled(self._check(r))) for r in records]
        if rows:
            table = _tables()[1]
            with self._begin(write=True) as conn:
                for i in range(0, len(rows), _INSERT_CHUNK):
                    conn.execute(table.insert(), rows[i:i + _INSERT_CHUNK])
        return len(rows)

    @staticmethod
    def _check(r) -> Record:
        if not isinstance(r, Record):
            raise TuneError(f"the tuning database stores Record values, not {type(r).__name__}")
        return r

    # reading

    def _where(self, q, workload=None, target=None, ok_only=False):
        t = _tables()[1]
        if workload is not None:
            q = q.where(t.c.workload == workload)
        if target is not None:
            q = q.where(t.c.target == target)
        if ok_only:
            q = q.where(t.c.median.is_not(None))
        return q

    def _applicable(self, q, target: str):
        """``q`` (a select of the records table) narrowed to the records a compile may apply, and
        the column to rank them by: their trace's **score**, the mean of its ok records' medians
        (a trace measured again is judged by all its measurements, not by its luckiest: the
        tuner re-measures its apparent bests, :mod:`ember.tune.tuner`). Applicable: ok, of a
        trace that never failed (a kernel that crashed, hung or went wrong once is not trusted
        because it passed another time), not passed over in the model (it lost there to a
        runner-up), and, for a workload with a set-aside trace (:mod:`ember.tune.in_model`:
        slower in the model than the default), scored better than that trace."""
        from sqlalchemy import and_, case, func, not_, or_, select

        t = _tables()[1]
        s = t.alias("scored")
        verdict = or_(s.c.error.like(f"{SET_ASIDE}%"), s.c.error.like(f"{PASSED_OVER}%"))

        def flag(cond):
            return func.max(case((cond, 1), else_=0))
        scores = (select(s.c.workload, s.c.trace, func.avg(s.c.median).label("score"),
                         flag(s.c.error.like(f"{SET_ASIDE}%")).label("aside"),
                         flag(s.c.error.like(f"{PASSED_OVER}%")).label("passed"),
                         flag(and_(s.c.median.is_(None), not_(verdict))).label("failed"))
                  .where(s.c.target == target).group_by(s.c.workload, s.c.trace)).subquery()
        cut = (select(scores.c.workload, func.min(scores.c.score).label("cut"))
               .where(scores.c.aside == 1).group_by(scores.c.workload)).subquery()
        q = (q.join(scores, and_(scores.c.workload == t.c.workload, scores.c.trace == t.c.trace))
             .outerjoin(cut, cut.c.workload == t.c.workload)
             .where(t.c.median.is_not(None), scores.c.passed == 0, scores.c.failed == 0,
                    or_(cut.c.cut.is_(None), scores.c.score < cut.c.cut)))
        return q, scores.c.score

    def ranked_per_workload(self, target: str, k: int, workloads: Iterable[str] | None = None) -> dict[str, list[Record]]:
        """``{workload: records}``: the ``k`` applicable traces of best score (:meth:`_applicable`:
        the mean of their records' medians) per workload (of ``workloads`` if given), each its
        record of least median, best first (what the in-model check
        compares: :mod:`ember.tune.in_model`). The first is :meth:`best_per_workload`'s."""
        from sqlalchemy import select

        t = _tables()[1]
        q, score = self._applicable(self._where(select(t), target=target), target)
        if workloads is not None:
            q = q.where(t.c.workload.in_(list(workloads)))
        out: dict[str, list[Record]] = {}
        seen: set = set()
        with self._begin() as conn:
            for row in conn.execute(q.order_by(score, t.c.median, t.c.id)):
                m = row._mapping
                ranked = out.setdefault(m["workload"], [])
                if len(ranked) < k and (m["workload"], m["trace"]) not in seen:
                    seen.add((m["workload"], m["trace"]))
                    ranked.append(_record_of(row))
        return out

    def best(self, workload: str, target: str) -> Record | None:
        """The applicable record (:meth:`best_per_workload`) of the best-scored trace for
        ``workload`` on ``target``; None if there is none."""
        from sqlalchemy import select

        t = _tables()[1]
        q, score = self._applicable(self._where(select(t), workload, target), target)
        q = q.order_by(score, t.c.median, t.c.id).limit(1)
        with self._begin() as conn:
            row = conn.execute(q).first()
        return None if row is None else _record_of(row)

    def records(self, workload: str | None = None, target: str | None = None, limit: int | None = None) -> list[Record]:
        """The records (of ``workload`` and/or ``target``, if given) in the order they were added;
        the first ``limit`` of them if given."""
        from sqlalchemy import select

        t = _tables()[1]
        q = self._where(select(t), workload, target).order_by(t.c.id)
        if limit is not None:
            q = q.limit(int(limit))
        with self._begin() as conn:
            return [_record_of(row) for row in conn.execute(q)]

    def workloads(self, target: str | None = None) -> list[str]:
        """The distinct workloads with records (on ``target``, if given), first added first."""
        from sqlalchemy import func, select

        t = _tables()[1]
        q = self._where(select(t.c.workload), target=target).group_by(t.c.workload).order_by(func.min(t.c.id))
        with self._begin() as conn:
            return list(conn.execute(q).scalars())

    def count(self, workload: str | None = None, target: str | None = None, ok_only: bool = False) -> int:
        """How many records (of ``workload``/``target``; only ok ones with ``ok_only``)."""
        from sqlalchemy import func, select

        q = self._where(select(func.count()).select_from(_tables()[1]), workload, target, ok_only)
        with self._begin() as conn:
            return int(conn.execute(q).scalar())

    def best_per_workload(self, target: str) -> dict[str, Record]:
        """``{workload: best record}`` for every workload with an applicable record on ``target``,
        in one query (what a compile applies): of the applicable traces (:meth:`_applicable`:
        never failed, not passed over in the model, scored better than any set aside there) the
        one of best score, the mean of its records' medians; its record of least median."""
        from sqlalchemy import func, select

        t = _tables()[1]
        q, score = self._applicable(self._where(select(t), target=target), target)
        ranked = q.add_columns(func.row_number().over(partition_by=t.c.workload, order_by=(score, t.c.median, t.c.id))
                               .label("rank")).subquery()
        q = select(*[ranked.c[c.name] for c in t.columns]).where(ranked.c.rank == 1).order_by(ranked.c.id)
        with self._begin() as conn:
            return {row.workload: _record_of(row) for row in conn.execute(q)}

    # files

    def export_jsonl(self, path_or_file) -> int:
        """Write every record, one JSON object per line (:meth:`Record.to_json`), in the order they
        were added, to a path or an open file; returns how many."""
        from sqlalchemy import select

        t = _tables()[1]
        with _opened(path_or_file, "w") as f:
            n = 0
            with self._begin() as conn:
                result = conn.execution_options(yield_per=1000).execute(select(t).order_by(t.c.id))
                for row in result:
                    f.write(_record_of(row).to_json() + "\n")
                    n += 1
        return n

    def import_jsonl(self, path_or_file) -> int:
        """Add the records of a JSON-lines file (a path or an open file) as they are (nothing filled
        in), skipping blank lines and records already here (same workload, target, trace and
        ``created``) or repeated in the file; returns how many were added. A malformed line raises
        :class:`TuneError` naming it, and then nothing is added."""
        from sqlalchemy import select, tuple_

        with _opened(path_or_file, "r") as f:
            name = getattr(f, "name", None) if not isinstance(path_or_file, (str, os.PathLike)) else os.fspath(path_or_file)
            name = name if isinstance(name, str) else "<file>"
            records = []
            for i, line in enumerate(f, 1):
                if line.strip():
                    records.append(Record.from_json(line, where=f"{name}:{i}"))
        if not records:
            return 0
        t = _tables()[1]
        added = 0
        with self._begin(write=True) as conn:
            if self.dialect == "postgresql":  # two imports at once would both miss each other's rows
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_LOCK_IMPORT})")
            seen = set()
            for i in range(0, len(records), _INSERT_CHUNK):
                chunk = records[i:i + _INSERT_CHUNK]
                pairs = sorted({(r.workload, r.target) for r in chunk})
                q = select(t.c.workload, t.c.target, t.c.trace, t.c.created).where(
                    tuple_(t.c.workload, t.c.target).in_(pairs))
                seen.update(tuple(row) for row in conn.execute(q))
                rows = []
                for r in chunk:
                    key = (r.workload, r.target, r.trace, r.created)
                    if key not in seen:
                        seen.add(key)
                        rows.append(_row_of(r))
                if rows:
                    conn.execute(t.insert(), rows)
                    added += len(rows)
        return added

    # lifetime

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Database({self.url!r})"


@contextlib.contextmanager
def _opened(path_or_file, mode: str):
    if isinstance(path_or_file, (str, os.PathLike)):
        path = os.path.expanduser(os.fspath(path_or_file))
        try:
            f = open(path, mode, encoding="utf-8")
        except OSError as e:
            raise TuneError(f"cannot {'read' if mode == 'r' else 'write'} tuning records file {path!r}: {e}") from None
        with f:
            yield f
    elif not isinstance(path_or_file, io.TextIOBase) and (
            isinstance(path_or_file, (io.RawIOBase, io.BufferedIOBase)) or "b" in str(getattr(path_or_file, "mode", ""))):
        wrapped = io.TextIOWrapper(path_or_file, encoding="utf-8", newline="\n", write_through=True)
        try:
            yield wrapped
        finally:
            wrapped.detach()  # leave the caller's file open
    else:
        yield path_or_file


def open_database(where: str | os.PathLike) -> Database:
    """Open (creating it, and its tables, when missing) a tuning records database.

    ``where`` is an SQLite file path (``"tuning.db"``, ``"~/ember/tuning.db"``), an
    ``sqlite:///...`` URL or a PostgreSQL URL (``postgresql://user:password@host:port/db``, run
    through psycopg 3; ``postgresql+psycopg://`` too). A URL that cannot be read or a server that
    cannot be reached raises :class:`~ember.errors.TuneError` with the URL (password masked) and
    what to check.
    """
    return Database(where)
