"""Reading the loop-profile counters of instrumented kernels (ctypes and numpy only).

A kernel built from ``ember.loop.passes.instrument_loops`` output has an exported global of
int64 cells ``[threads][sites][stride]``; cell ``[t][s]`` holds the executions of site ``s``
on thread slot ``t``, their total cycles, then the first ``records`` durations. The kernel's
metadata entry says where (``"profile"``: symbol, threads, sites, records, stride, header);
see ``ember.codegen.llvm.profile`` for how the code fills them.

    c = LoopCounters(module, "mm")
    c.reset(); module["mm"](a, b, out)
    c.counts().sum(axis=0), c.cycles().sum(axis=0), c.records(2)
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import EmberError

CYCLE_FUNCTION = "__ember_cycle_counter"


def instrumented_kernels(module) -> list[str]:
    """Names of the kernels in ``module`` that carry loop-profile counters."""
    return [k["name"] for k in module.metadata["kernels"] if "profile" in k]


class LoopCounters:
    """Live view of one instrumented kernel's counters in a loaded :class:`Module`.

    Reads copy the counters; :meth:`reset` zeroes them (do not call it while the kernel runs).
    """

    def __init__(self, module, kernel: str):
        entry = next((k for k in module.metadata["kernels"] if k["name"] == kernel), None)
        if entry is None or "profile" not in entry:
            what = "no kernel" if entry is None else "no loop-profile counters in kernel"
            raise EmberError(f"{what} {kernel!r} in {module.path}; instrumented kernels: "
                             f"{', '.join(instrumented_kernels(module)) or '(none)'}")
        p = entry["profile"]
        self.kernel = kernel
        self.module = module  # keeps the library, hence the counters' memory, loaded
        self.threads, self.sites, self.records_per_site = p["threads"], p["sites"], p["records"]
        self._header = p["header"]
        n = p["threads"] * p["sites"] * p["stride"]
        try:
            raw = (ctypes.c_int64 * n).in_dll(module._lib, p["symbol"])
        except ValueError:
            raise EmberError(f"{module.path}: the counters symbol {p['symbol']!r} of kernel "
                             f"{kernel!r} is missing") from None
        self._cells = np.ctypeslib.as_array(raw).reshape(p["threads"], p["sites"], p["stride"])

    def reset(self) -> None:
        """Zero every count, total and record."""
        self._cells[...] = 0

    def counts(self) -> np.ndarray:
        """Executions per ``[thread slot, site]`` (int64)."""
        return self._cells[:, :, 0].copy()

    def cycles(self) -> np.ndarray:
        """Total cycles per ``[thread slot, site]`` (int64)."""
        return self._cells[:, :, 1].copy()

    def records(self, site: int) -> np.ndarray:
        """The kept durations of ``site`` in cycles: each thread slot's first ones, slot order."""
        if not 0 <= site < self.sites:
            raise EmberError(f"kernel {self.kernel!r} has sites 0..{self.sites - 1}, not {site}")
        cells = self._cells[:, site]
        kept = np.minimum(cells[:, 0], self.records_per_site)
        h = self._header
        return np.concatenate([cells[t, h:h + kept[t]] for t in range(self.threads)])


def cycle_counter(module) -> int:
    """The cycle counter now, read by the instrumented library's own code (same counter, same
    core type as the kernels use)."""
    try:
        fn = getattr(module._lib, CYCLE_FUNCTION)
    except AttributeError:
        raise EmberError(f"{module.path} has no instrumented kernels (no {CYCLE_FUNCTION})") from None
    fn.restype, fn.argtypes = ctypes.c_int64, []
    return int(fn())


__all__ = ["LoopCounters", "cycle_counter", "instrumented_kernels"]
