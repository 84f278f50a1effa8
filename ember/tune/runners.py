"""Where measurements run: child processes of this machine, or the workers of a Dask cluster.

Both take a batch (a task's builder and candidate decisions) and return a future of
``(host, start, end, results)``. On every machine a lock keeps measurements one at a time:
two candidates timed together on the same cores would each see the other's load. On Dask
that lock is a cluster-wide ``distributed.Lock`` named after the worker's host, so a
LocalCluster of several workers -- or several workers per machine of a real cluster -- still
measures one candidate per machine at a time, while the search runs on the client.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import os
import socket
import threading
import time

from .measure import Measurer

__all__ = ["DaskRunner", "LocalRunner", "make_runner"]


def _measure(builder, target_spec: str, candidates: list, timeout: float, repeat: int, lock=None,
             place=None) -> tuple:
    host = socket.gethostname()
    if lock is None:
        from distributed import Lock

        lock = Lock(f"ember-measure-{host}")
    with lock:
        t0 = time.time()
        results = Measurer(timeout=timeout, repeat=repeat).measure(builder, target_spec, candidates, place)
        return host, t0, time.time(), results


class LocalRunner:
    """Measurements in child processes of this machine, one batch at a time."""

    def __init__(self, timeout: float = 30.0, repeat: int = 7):
        self.timeout, self.repeat = timeout, repeat
        self._pool = concurrent.futures.ThreadPoolExecutor(1)
        self._lock = threading.Lock()
        self.workers = 1
        self.where = "this machine"

    def submit(self, builder, target_spec: str, candidates: list, place=None):
        """A future of ``(host, start, end, results)``; ``place``: time them in the model
        (:mod:`ember.tune.in_place`)."""
        return self._pool.submit(_measure, builder, target_spec, candidates, self.timeout, self.repeat, self._lock,
                                 place)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


# What a Dask nanny sets to 1 in *its own* process's environment before it spawns a worker
# (``distributed.nanny.pre-spawn-environ``) and never restores: with a LocalCluster the nanny is
# this process, and Ember's runs take their default team size from OMP_NUM_THREADS -- after a
# tuning run every model in the process ran on one thread (EfficientNet-B0: 13.7 ms, not 7.2).
# The measurements set the team size of their own children (``measure.py``), so the workers do
# not need these either.
_NANNY_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@contextlib.contextmanager
def _environment_kept():
    """Start a LocalCluster inside: its nannies never set the team-size variables, and whatever
    else they set here for their first workers (``MALLOC_TRIM_THRESHOLD_``, which every later
    child of this process would inherit) is undone."""
    import dask

    before = dict(os.environ)
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": None for k in _NANNY_ENV}):
            yield
    finally:
        for k in [k for k in os.environ if k not in before]:
            del os.environ[k]
        for k, v in before.items():
            if os.environ.get(k) != v:
                os.environ[k] = v


class DaskRunner:
    """Measurements on the workers of a Dask cluster: ``address`` (``tcp://host:8786``), or a
    LocalCluster of ``n_workers`` started here."""

    def __init__(self, address: str | None = None, n_workers: int = 1, timeout: float = 30.0, repeat: int = 7):
        from distributed import Client, LocalCluster

        from ..errors import TuneError

        self.timeout, self.repeat = timeout, repeat
        self._cluster = None
        try:
            if address:
                self.client = Client(address, timeout=20)
                self.where = address
            else:
                with _environment_kept():
                    self._cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                                 dashboard_address=None, silence_logs=40)
                self.client = Client(self._cluster)
                self.where = f"a local Dask cluster of {n_workers} worker(s)"
        except RuntimeError as e:
            raise TuneError(f"the local Dask cluster did not start ({e}); its workers are new processes that "
                            f"import your script's main module: call ember.tune.tune() under "
                            f"`if __name__ == '__main__':`, or pass cluster='none'") from e
        except (OSError, TimeoutError) as e:
            raise TuneError(f"cannot reach the Dask scheduler at {address}: {e}; start one with "
                            f"`dask scheduler` and `dask worker {address}` on each machine, or leave "
                            f"--cluster out to measure here") from e
        self.workers = max(1, len(self.client.scheduler_info().get("workers", {})) or n_workers)

    def submit(self, builder, target_spec: str, candidates: list, place=None):
        """As :meth:`LocalRunner.submit`; a worker without ``place``'s library times alone."""
        return self.client.submit(_measure, builder, target_spec, candidates, self.timeout, self.repeat,
                                  None, place, pure=False)

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def make_runner(cluster: str | None, timeout: float = 30.0, repeat: int = 7, workers: int = 1):
    """``None``/``"local"``: a LocalCluster of ``workers``; ``"none"``: child processes here
    without Dask; an address: that cluster."""
    if cluster == "none":
        return LocalRunner(timeout, repeat)
    if cluster in (None, "local"):
        return DaskRunner(None, workers, timeout, repeat)
    return DaskRunner(cluster, workers, timeout, repeat)
