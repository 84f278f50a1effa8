"""A real PostgreSQL server for the tuning-database tests.

``postgres_url`` (session): ``$EMBER_TEST_POSTGRES_URL`` if set; otherwise a throwaway server
started from Debian's binaries (``initdb``, ``pg_ctl``: on PATH, in /usr/lib/postgresql/*/bin or
/usr/local/bin) in a temporary folder, listening on 127.0.0.1 at a free port, stopped and deleted
at the end of the session. As root the server runs as the ``postgres`` system user (PostgreSQL
refuses root). Without the binaries the fixture fails, saying what to install.

``postgres_schema_url`` (per test): the same database with a fresh schema first on the
search path, dropped after the test, so that every test starts from empty tables (and a shared
server given by the environment keeps nothing).

``small_model`` (session): a two-task ONNX model the tuner's tests tune.
"""
from __future__ import annotations

import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
import uuid

import pytest

_INSTALL = ("install Debian's `postgresql` package (`apt-get install postgresql`; the tests start "
            "their own server from its binaries), or set EMBER_TEST_POSTGRES_URL to a PostgreSQL "
            "database the tests may use (postgresql+psycopg://user:password@host:port/database)")
_USER = "ember"        # the server's superuser (trust authentication: the server is private)
_DATABASE = "ember_test"


def _find_bin_dir() -> str | None:
    """The folder holding both initdb and pg_ctl, newest PostgreSQL first."""
    candidates = []
    which = shutil.which("initdb")
    if which:
        candidates.append(os.path.dirname(os.path.realpath(which)))
    def version(path):
        try:
            return float(path.split("/")[-2])
        except ValueError:
            return 0.0
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    candidates += ["/usr/local/bin", "/usr/local/pgsql/bin"]
    for d in candidates:
        if all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl")):
            return os.path.dirname(os.path.realpath(os.path.join(d, "initdb")))
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user() -> tuple[list[str], int | None, int | None]:
    """(command prefix, uid, gid) that run a command as a user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/bin/sh", "postgres"],
                       check=True, capture_output=True)
        pw = pwd.getpwnam("postgres")
    if shutil.which("runuser"):
        return ["runuser", "-u", "postgres", "--"], pw.pw_uid, pw.pw_gid
    if shutil.which("su"):
        return ["su", "postgres", "-s", "/bin/sh", "-c"], pw.pw_uid, pw.pw_gid
    pytest.fail("running as root, and neither runuser nor su is there to run PostgreSQL as the postgres user")


def _run(prefix: list[str], argv: list[str], cwd: str, what: str, log: str | None = None, check: bool = True):
    cmd = prefix + ([shlex.join(argv)] if prefix[:1] == ["su"] else argv)
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if p.returncode != 0 and check:
        tail = ""
        if log and os.path.exists(log):
            with open(log, errors="replace") as f:
                tail = "\nserver log:\n" + "".join(f.readlines()[-20:])
        pytest.fail(f"{what} failed ({shlex.join(cmd)}, exit {p.returncode}):\n{p.stdout}{p.stderr}{tail}")
    return p


def _with_query(url: str, **query) -> str:
    parts = urllib.parse.urlsplit(url)
    q = urllib.parse.parse_qsl(parts.query) + list(query.items())
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(q)))


@pytest.fixture(scope="session")
def postgres_url():
    """The URL of a PostgreSQL database the tests may fill (see the module's docstring)."""
    given = os.environ.get("EMBER_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    bin_dir = _find_bin_dir()
    if bin_dir is None:
        pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH, in "
                    "/usr/lib/postgresql/*/bin or in /usr/local/bin: " + _INSTALL)
    import psycopg

    prefix, uid, gid = _as_server_user()
    root = tempfile.mkdtemp(prefix="ember-pg-")
    if uid is not None:
        os.chown(root, uid, gid)
    data, log = os.path.join(root, "data"), os.path.join(root, "server.log")
    initdb, pg_ctl = os.path.join(bin_dir, "initdb"), os.path.join(bin_dir, "pg_ctl")
    started = False
    try:
        _run(prefix, [initdb, "-D", data, "-U", _USER, "--auth=trust", "--encoding=UTF8", "--no-locale",
                      "--no-sync"], root, "initdb")
        for attempt in range(3):  # a free port can be taken between finding and binding it
            port = _free_port()
            opts = (f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                    "-c full_page_writes=off -c shared_buffers=16MB -c max_connections=40")
            last = attempt == 2
            p = _run(prefix, [pg_ctl, "-D", data, "-l", log, "-w", "-t", "30", "-o", opts, "start"], root,
                     f"starting PostgreSQL ({bin_dir})", log=log, check=last)
            if p.returncode == 0:
                started = True
                break
        with psycopg.connect(host="127.0.0.1", port=port, user=_USER, dbname="postgres", autocommit=True,
                             connect_timeout=10) as conn:
            conn.execute(f"CREATE DATABASE {_DATABASE}")
        yield f"postgresql+psycopg://{_USER}@127.0.0.1:{port}/{_DATABASE}"
    finally:
        if started:
            _run(prefix, [pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], root, "stopping PostgreSQL")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_schema_url(postgres_url):
    """``postgres_url`` with a fresh, empty schema of this test first on the search path."""
    import psycopg

    schema = "ember_test_" + uuid.uuid4().hex[:12]
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield _with_query(postgres_url, options=f"-csearch_path={schema}")
    finally:
        with psycopg.connect(plain, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(scope="session")
def small_model(tmp_path_factory):
    """A 3x3 conv, a ReLU, a 1x1 conv and a residual add (two tasks to tune), as an ONNX file."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 32, 1, 1)).astype(np.float32) * 0.1, "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"]),
             helper.make_node("Add", ["c2", "r1"], ["y"])]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 28, 28])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 28, 28])], [w1, w2])
    path = tmp_path_factory.mktemp("tune") / "small.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)
