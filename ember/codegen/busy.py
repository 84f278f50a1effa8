"""Model runs in flight, which a background build makes room for (no heavy imports: the
tiered executable marks its runs here on every call)."""
from __future__ import annotations

import contextlib
import threading

_RUNS = [0]  # (a list: one cell shared by every thread)
_LOCK = threading.Lock()


@contextlib.contextmanager
def model_running():
    """Mark a model run in flight: a background build's last worker waits for it to end before
    its next job (the run has the core)."""
    with _LOCK:
        _RUNS[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _RUNS[0] -= 1


def runs_in_flight() -> int:
    return _RUNS[0]


__all__ = ["model_running", "runs_in_flight"]
