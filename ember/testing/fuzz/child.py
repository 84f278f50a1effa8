"""Running one input in a child process: forked from a :class:`Zygote` that imported Ember once,
under a memory limit and a timeout; its :class:`Result` is one of :data:`OUTCOMES`."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import traceback
from typing import Optional

import numpy as np

from .cases import KINDS, Corpus
from .seeds import seed_models


OUTCOMES = ("ok", "ember_error", "other_exception", "crash", "hang")
FAILURES = ("other_exception", "crash", "hang")
MAX_RUN_ELEMENTS = 1 << 22  # of the inputs, and of the outputs: larger models compile but do not run
MAX_RUN_ARENA_BYTES = 1 << 28  # nor do those with more intermediates
_PRELOAD = ["numpy", "onnx", "ember", "ember.compiler.compile", "ember.frontend.onnx.importer",
            "ember.graph.ops.compute", "ember.runtime.load"]


@dataclasses.dataclass
class Result:
    outcome: str
    detail: str = ""  # the error message, the signal, the phase that hung
    traceback: str = ""
    phase: str = ""  # compile/load/run: how far the child got
    seconds: float = 0.0
    ran: bool = False
    log: str = ""  # the child's stdout and stderr (faulthandler's stacks on a crash or hang)

    def signature(self) -> str:
        """What groups results that are likely the same bug."""
        if self.outcome == "other_exception":
            frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', self.traceback)
            ours = [f for f in frames if "/ember/" in f[0] and "/ember/testing/" not in f[0]] or frames
            where = ""
            if ours:
                f = ours[-1]
                where = f" at {f[0].split('/ember/')[-1]}:{f[1]} ({f[2]})"
            return f"{self.detail.split(':')[0]}{where}"
        if self.outcome == "crash":
            return f"crash {self.detail.split(' ')[0]} in {self.phase}"
        if self.outcome == "hang":
            return f"hang in {self.phase}"
        return self.outcome


def _small(exe) -> bool:
    """Whether a run of ``exe`` is quick enough to do: outputs and intermediates of bounded size
    (a mutated model may be valid and just big; a slow run is not a hang)."""
    try:
        out = sum(int(np.prod(o.shape, dtype=object)) for o in exe.output_info)
        arena = int(exe.program.get("arena_bytes", 0))
    except (TypeError, ValueError, AttributeError):
        return True  # let the run find out
    return out <= MAX_RUN_ELEMENTS and arena <= MAX_RUN_ARENA_BYTES


def _random_inputs(infos, rng: np.random.Generator) -> Optional[list]:
    """Arrays for ``[(name, shape, dtype)]``; None when a shape is symbolic or too large."""
    from ember.runtime.ndarray import numpy_dtype

    total = 0
    for _, shape, dtype in infos:
        if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
            return None
        total += int(np.prod(shape, dtype=object)) if shape else 1
        if total > MAX_RUN_ELEMENTS:
            return None
    arrays = []
    for _, shape, dtype in infos:
        dt = numpy_dtype(dtype)
        if dt.kind == "f" or dt.name == "bfloat16":
            a = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            a = rng.random(shape) < 0.5
        elif dt.kind in "iu":  # small indices, now and then some far out of range
            info = np.iinfo(dt)
            a = rng.integers(0, 3, size=shape).astype(dt)
            if a.size and rng.random() < 0.3:
                v = [int(info.max), int(info.min), 1000, -1000][int(rng.integers(4))]
                a.reshape(-1)[rng.integers(0, a.size)] = min(max(v, int(info.min)), int(info.max))
        else:
            a = np.zeros(shape, dt)
        arrays.append(a)
    return arrays


# -- the child: one case, in a process forked from the zygote -------------------------------------

def _send(fd: int, *msg) -> None:
    os.write(fd, (json.dumps(msg) + "\n").encode("utf-8"))


def _child_case(fd: int, req: dict) -> None:
    """Compile (or load) ``req["path"]``, then run it once; writes ``["phase", name]`` lines and
    one ``["result", outcome, detail, traceback, ran]`` line to ``fd``."""
    import faulthandler
    import resource

    log = open(req["log"], "w", buffering=1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    faulthandler.enable(file=log)
    faulthandler.dump_traceback_later(max(0.5, req["timeout"] - 1.0), file=log)  # a hang's stack, before the kill
    os.environ.update(req["env"])
    if req.get("memory_mb"):
        lim = int(req["memory_mb"]) << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    ran = False
    try:
        import ember

        if req["kind"] == "selftest":  # each outcome on demand, for the runner's own tests
            action = req["action"]
            if action == "segfault":
                import ctypes

                ctypes.string_at(0)
            elif action == "hang":
                time.sleep(3600)
            elif action == "exit":
                os._exit(3)
            elif action == "other_exception":
                raise ValueError("self test")
            elif action == "ember_error":
                raise ember.errors.ModelError("self test")
            _send(fd, "result", "ok", "", "", False)
            return
        if req["kind"] == "build":  # compile and export the seed models
            for src, dst in req["items"]:
                ember.compile(src).export(dst)
            _send(fd, "result", "ok", "", "", False)
            return
        _send(fd, "phase", "compile" if req["kind"] == "onnx" else "load")
        # the compile's default memory limit counts the room under this child's rlimit
        exe = ember.compile(req["path"]) if req["kind"] == "onnx" else ember.load(req["path"])
        arrays = _random_inputs(exe.input_info, np.random.default_rng(req["seed"])) if _small(exe) else None
        if arrays is not None:
            _send(fd, "phase", "run")
            exe.run(*arrays)
            ran = True
        _send(fd, "result", "ok", "" if ran else "not run (symbolic shapes or too large)", "", ran)
    except BaseException as e:  # noqa: B036 - every exception is an outcome here
        from ember.errors import EmberError

        outcome = "ember_error" if isinstance(e, EmberError) else "other_exception"
        detail = f"{type(e).__name__}: {e}"[:4000]
        _send(fd, "result", outcome, detail, traceback.format_exc()[-20000:], ran)
    finally:
        faulthandler.cancel_dump_traceback_later()


# -- the zygote: a process that imported Ember once and forks a child per case ---------------------

def _wait(pid: int, seconds: float):
    """The child's wait status, or None if it is still running after ``seconds``."""
    end = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= end:
            return None
        time.sleep(0.01)


def _kill_group(pid: int) -> int:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass
    return os.waitpid(pid, 0)[1]


def _fork_case(req: dict) -> dict:
    """Run ``req`` in a forked child with its timeout; the result as a dict (see :class:`Result`)."""
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            os.close(r)
            os.setpgid(0, 0)  # its own process group: a hang's helpers die with it
            _child_case(w, req)
        except BaseException:  # noqa: B036
            code = 70
        os._exit(code)
    os.close(w)
    timeout = req["timeout"]
    deadline = t0 + timeout
    phase, result, buf, eof = "start", None, b"", False
    while result is None and not eof:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([r], [], [], left)[0]:
            break
        chunk = os.read(r, 1 << 16)
        eof = not chunk
        buf += chunk
        while b"\n" in buf and result is None:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg[0] == "phase":
                phase = msg[1]
            else:
                result = msg
    out = {"phase": phase, "ran": False, "detail": "", "traceback": ""}
    if result is not None:
        status = _wait(pid, max(5.0, deadline - time.monotonic()))
        if status is None:  # did its work but does not exit
            _kill_group(pid)
            out.update(outcome="hang", detail="did not exit after its result", phase="exit")
        else:
            out.update(outcome=result[1], detail=result[2], traceback=result[3], ran=result[4])
    else:
        status = _wait(pid, 5.0 if eof else 0.0)
        if status is None:  # no result by the deadline (or a closed pipe and no exit)
            time.sleep(0.5)  # let faulthandler finish its dump
            status = _kill_group(pid)
            out.update(outcome="hang", detail=f"no result after {timeout:g} s")
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            out.update(outcome="crash", detail=f"{name} (signal {sig})")
        else:
            out.update(outcome="crash", detail=f"exit {os.WEXITSTATUS(status)} without a result")
    os.close(r)
    try:  # anything the child's process group left behind
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    out["seconds"] = time.monotonic() - t0
    return out


def _zygote_main() -> None:
    """Read one JSON request a line on stdin, answer one JSON line on stdout."""
    proto_out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints must not corrupt the protocol
    for name in _PRELOAD:
        __import__(name)
    for line in sys.stdin:
        req = json.loads(line)
        proto_out.write(json.dumps(_fork_case(req)) + "\n")


class Zygote:
    """A clean process (no OpenMP threads, no kernels loaded) that imported Ember once and forks
    one child per case, so a case costs a fork, not an interpreter start. One per worker."""

    def __init__(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                   OPENBLAS_NUM_THREADS="1")  # numpy's BLAS threads would start before the forks
        self.proc = subprocess.Popen([sys.executable, "-c", "from ember.testing.fuzz.child import _zygote_main; _zygote_main()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, bufsize=1)

    def request(self, req: dict) -> Result:
        """Run one request; a zygote that dies (it should not) is a crash of the case."""
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            ready = select.select([self.proc.stdout], [], [], req["timeout"] + 60)[0]
            line = self.proc.stdout.readline() if ready else ""
        except (OSError, ValueError):
            line = ""
        if not line:
            self.close()
            self.__init__()
            return Result("crash", "the fork server died or did not answer", phase="zygote")
        d = json.loads(line)
        return Result(d["outcome"], d["detail"], d["traceback"], d["phase"], d["seconds"], d["ran"])

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _read(path: str, limit: int = 20000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-limit:].decode("utf-8", "replace")
    except OSError:
        return ""


def run_input(kind: str, path: str, seed: int = 0, *, timeout: float = 30.0, cache_dir: Optional[str] = None,
              memory_mb: int = 4096, zygote: Optional[Zygote] = None) -> Result:
    """Compile (``kind="onnx"``) or load (``"export"``) the file at ``path`` in a child process and
    run it once; the :class:`Result`. ``cache_dir`` becomes the child's ``EMBER_CACHE_DIR``."""
    own = zygote is None
    z = Zygote() if own else zygote
    env = {"EMBER_COMPILE_JOBS": "1", **({"EMBER_CACHE_DIR": cache_dir} if cache_dir else {})}
    log = path + ".log"
    try:
        res = z.request({"kind": kind, "path": os.path.abspath(path), "seed": int(seed), "env": env,
                         "memory_mb": memory_mb, "timeout": float(timeout), "log": log})
    finally:
        if own:
            z.close()
    if res.outcome in FAILURES:
        res.log = _read(log)
    try:
        os.unlink(log)
    except OSError:
        pass
    return res


def build_corpus(workdir: str, kinds=KINDS, seed: int = 0, cache_dir: Optional[str] = None,
                 timeout: float = 300.0, zygote: Optional[Zygote] = None) -> Corpus:
    """The seed models, and when ``"export"`` is in ``kinds`` their exports (compiled in a
    child process, so this process never loads a kernel)."""
    models = seed_models(seed)
    exports = {}
    if "export" in kinds:
        os.makedirs(workdir, exist_ok=True)
        items = []
        for name, data in models.items():
            src = os.path.join(workdir, f"seed-{name}.onnx")
            with open(src, "wb") as f:
                f.write(data)
            items.append((src, os.path.join(workdir, f"seed-{name}.so")))
        own = zygote is None
        z = Zygote() if own else zygote
        env = {"EMBER_COMPILE_JOBS": "1", **({"EMBER_CACHE_DIR": cache_dir} if cache_dir else {})}
        log = os.path.join(workdir, "build.log")
        try:
            res = z.request({"kind": "build", "items": items, "env": env, "memory_mb": 0, "timeout": timeout,
                             "log": log})
        finally:
            if own:
                z.close()
        if res.outcome != "ok":
            raise RuntimeError(f"building the seed exports failed ({res.outcome}: {res.detail})\n"
                               f"{res.traceback}{_read(log)}")
        for (_, dst), name in zip(items, models):
            with open(dst, "rb") as f:
                exports[name] = f.read()
    return Corpus(models, exports)
