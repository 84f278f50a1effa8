"""Where the cores are: the round-trip time of a cache line between two of this process's cores.

On a shared VM the hypervisor moves the virtual CPUs between physical cores. The 2-core VM
Ember is developed on has two placements that it switches between for seconds to minutes at
a time: both vCPUs on one CCX (sharing an L3: a cache line goes from one core to the other
and back in ~60-80 ns) or on two (~330-370 ns), and every multi-threaded model runs ~30%
slower in the second (EfficientNet-B0: 7.0 vs 9.1 ms, ONNX Runtime alike), while one core's
FMA throughput and memory bandwidth do not move. A benchmark round that lands in the other
placement measures the machine, not the runtime; :func:`core_round_trip_ns` lets the
benchmark (:mod:`ember.bench.isolated`) and the tuner (:mod:`ember.tune.in_model`) see which
placement each measurement ran in and compare like with like.

The probe is a native ping-pong (LLVM IR, JIT-compiled with llvmlite): two threads, pinned to
two cores, pass one cache line back and forth with release stores and acquire loads. Each
wait gives up after a bounded number of spins, so a missing peer can never hang it.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Optional, Sequence

_IR = r"""
define i64 @ember_ping_pong(i32* %flag, i64 %n, i32 %side, i64 %limit) {
entry:
  %is0 = icmp eq i32 %side, 0
  %mine = select i1 %is0, i32 0, i32 1    ; the value that says "my turn"
  %theirs = select i1 %is0, i32 1, i32 0  ; what I hand over
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %done]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %wait, label %exit
wait:
  %spins = phi i64 [0, %loop], [%spins1, %spin]
  %v = load atomic i32, i32* %flag acquire, align 64
  %turn = icmp eq i32 %v, %mine
  br i1 %turn, label %done, label %spin
spin:
  %spins1 = add i64 %spins, 1
  %over = icmp sgt i64 %spins1, %limit
  br i1 %over, label %fail, label %wait
done:
  store atomic i32 %theirs, i32* %flag release, align 64
  %i1 = add i64 %i, 1
  br label %loop
exit:
  ret i64 %n
fail:
  ret i64 -1
}
"""

_FN = None
_LOCK = threading.Lock()


def _function():
    """The JIT-compiled probe (compiled once per process)."""
    global _FN
    with _LOCK:
        if _FN is None:
            from .jit import jit_engine

            engine = jit_engine(_IR)
            addr = engine.get_function_address("ember_ping_pong")
            proto = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32,
                                     ctypes.c_int64)
            _FN = (engine, proto(addr))  # the engine owns the code: keep it alive with the function
        return _FN[1]


def core_round_trip_ns(cores: Optional[Sequence[int]] = None, trips: int = 20000,
                       repeat: int = 3) -> Optional[float]:
    """Nanoseconds for a cache line to go from one core to another and back (the least of
    ``repeat`` measurements of ``trips`` round trips), between ``cores`` (default: the first
    two this process may run on). None where there are not two cores to use or a thread
    never answered (each wait gives up after ~10^8 spins)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pair = list(cores) if cores is not None else allowed[:2]
    if len(pair) < 2:
        return None
    fn = _function()
    # one cache line of its own: the flag must not share a line with anything else
    buf = (ctypes.c_int32 * 32)()
    flag = ctypes.addressof(buf) + (-ctypes.addressof(buf)) % 64
    if flag + 4 > ctypes.addressof(buf) + ctypes.sizeof(buf):
        return None
    limit = 100_000_000
    warm = 1000
    best = float("inf")
    for _ in range(repeat):
        ctypes.c_int32.from_address(flag).value = 1  # side 1 waits for 1: it starts
        result = {}

        def side(which: int) -> None:
            try:
                if hasattr(os, "sched_setaffinity"):
                    os.sched_setaffinity(0, {pair[which]})  # (0: the calling thread, on Linux)
            except OSError:
                pass
            if which == 1:
                result[1] = fn(flag, warm + trips, 1, limit)
                return
            # side 0 answers the warm-up first, then times its share of the round trips
            if fn(flag, warm, 0, limit) < 0:
                result[0] = None
                return
            t = time.perf_counter()
            ok = fn(flag, trips, 0, limit)
            result[0] = (time.perf_counter() - t) if ok >= 0 else None

        threads = [threading.Thread(target=side, args=(w,), daemon=True) for w in (1, 0)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if result.get(0) is None or result.get(1, -1) < 0:
            return None
        best = min(best, result[0] / trips * 1e9)
    return best


def placements(round_trips: Sequence[Optional[float]]) -> list:
    """Each measurement's placement, ``"near"`` or ``"far"``: far where its round trip is more
    than twice the least of them all (one machine's two placements differ ~5x; noise within
    one, far less). None where a round trip is unknown."""
    known = [r for r in round_trips if r is not None]
    if not known:
        return [None] * len(round_trips)
    least = min(known)
    return [None if r is None else ("far" if r > 2 * least else "near") for r in round_trips]


def group_placements(groups: Sequence[Sequence[Optional[float]]], also: Sequence[Optional[float]] = ()) -> list:
    """Each group's placement (a group: the round trips measured around one measurement, before
    and after), where all of them agree; None where the cores moved during it or one is unknown.
    ``also``: round trips measured elsewhere that count toward the least (one taken earlier)."""
    where = placements(list(also) + [t for g in groups for t in g])[len(also):]
    out, k = [], 0
    for g in groups:
        seen = set(where[k:k + len(g)])
        k += len(g)
        out.append(seen.pop() if len(seen) == 1 else None)
    return out


def describe(round_trips: Sequence[Optional[float]]) -> str:
    """``"core round trip 58-372 ns"`` for a report."""
    known = [r for r in round_trips if r is not None]
    if not known:
        return "core round trip unknown"
    lo, hi = min(known), max(known)
    return f"core round trip {lo:.0f} ns" if hi < 1.05 * lo else f"core round trip {lo:.0f}-{hi:.0f} ns"


__all__ = ["core_round_trip_ns", "describe", "group_placements", "placements"]
