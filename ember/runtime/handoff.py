"""The hand-off between a caller and a lane in native code: no GIL on either side of it.

A run handed to a lane (:mod:`ember.runtime.lanes`) through Python locks costs two thread
wake-ups *and* the GIL passing between the two threads twice; on a shared 2-core VM that was
40-100 us a run, against ~20 us for ONNX Runtime's whole run of a small model. Here both sides
wait in native code called through ctypes (which releases the GIL): the caller posts a job in
a shared block and waits for it to be done; the lane runs a native job (the library's program
runner on its words, pointers and kernel table) without ever taking the GIL, and returns to
Python only for a Python job (a run with control steps, a profile), which it finishes with
:func:`finish`.

Each side waits by spinning for a bounded time, then sleeping on a futex (Linux). The lane
spins a little after each job, to catch a caller that runs again at once; the caller does not
spin while a run executes: on 2 cores it would take a core from the run's own team. A spin
yields the core at each turn (``sched_yield``) rather than pausing: after the process had been
idle, the scheduler woke the lane on the caller's core, where a pausing spin kept the caller
off its core for the whole spin, every run (a tiny model's hand-off: 120 us, against 7 us
when the two threads sat on two cores; yielding, 13-23 us either way). The block is one job
slot: a lane serves one caller at a time (the lane pool hands it out).

The functions are compiled into every kernel library Ember links (:func:`object_ir`, the
library's own object), and a process takes them from the first library it loads
(:func:`offer`): no LLVM in the process, and a run from a warm cache or an export hands off as
fast as one just compiled (a one-op model: 65 -> 12 us a run when the compile found its library
in the cache and so never imported llvmlite, whose JIT was the only source before). Where no
library offers them, a process that compiles JIT-compiles them (:func:`functions`); elsewhere
lanes use locks.
"""
from __future__ import annotations

import ctypes
import platform
import sys
import threading
from typing import Optional

# the block, in bytes: the state word on a cache line of its own, the rest on the next
STATE, LANE_SLEEPS, CALLER_SLEEPS = 0, 64, 68
RUNNER, WORDS, PTRS, FNS, RC, LANE_SPIN, CALLER_SPIN = 72, 80, 88, 96, 104, 112, 120
BLOCK_BYTES = 128

# states: the lane waits while DONE, the caller while its job's kind
NATIVE_JOB, PYTHON_JOB, DONE = 1, 2, 3

_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}

_IR = r"""
declare i64 @syscall(i64, ...)
declare i32 @clock_gettime(i32, [2 x i64]*)
declare i32 @sched_yield()

define internal i64 @now_ns() {{
  %ts = alloca [2 x i64]
  call i32 @clock_gettime(i32 1, [2 x i64]* %ts)
  %ps = getelementptr [2 x i64], [2 x i64]* %ts, i64 0, i64 0
  %pn = getelementptr [2 x i64], [2 x i64]* %ts, i64 0, i64 1
  %s = load i64, i64* %ps
  %n = load i64, i64* %pn
  %sn = mul i64 %s, 1000000000
  %t = add i64 %sn, %n
  ret i64 %t
}}

; (syscall's arguments are all passed as 64-bit words: a variadic callee reads whole registers)
; wait while *state == from: spin until spin_ns have passed, then sleep on the futex
; (announced in *sleeps first, so a poster that sees no sleeper may skip the wake)
define internal i32 @await(i32* %state, i32* %sleeps, i32 %from, i64 %spin_ns) {{
entry:
  %t0 = call i64 @now_ns()
  %deadline = add i64 %t0, %spin_ns
  br label %spin
spin:
  %k = phi i64 [0, %entry], [%k1, %relax], [%k1, %clock]
  %v = load atomic i32, i32* %state acquire, align 4
  %moved = icmp ne i32 %v, %from
  br i1 %moved, label %out, label %relax
relax:
  call i32 @sched_yield()
  %k1 = add i64 %k, 1
  %every = and i64 %k1, 7
  %check = icmp eq i64 %every, 0
  br i1 %check, label %clock, label %spin
clock:
  %t = call i64 @now_ns()
  %late = icmp sgt i64 %t, %deadline
  br i1 %late, label %sleep, label %spin
sleep:
  store atomic i32 1, i32* %sleeps seq_cst, align 4
  %w = load atomic i32, i32* %state seq_cst, align 4
  %moved2 = icmp ne i32 %w, %from
  br i1 %moved2, label %woke, label %futex
futex:
  %fe = zext i32 %from to i64
  call i64 (i64, ...) @syscall(i64 {sys_futex}, i32* %state, i64 {futex_wait}, i64 %fe, i8* null, i8* null, i64 0)
  %w2 = load atomic i32, i32* %state seq_cst, align 4
  %moved3 = icmp ne i32 %w2, %from
  br i1 %moved3, label %woke, label %futex
woke:
  %r = phi i32 [%w, %sleep], [%w2, %futex]
  store atomic i32 0, i32* %sleeps seq_cst, align 4
  ret i32 %r
out:
  ret i32 %v
}}

define internal void @post(i32* %state, i32* %sleeps, i32 %value) {{
  store atomic i32 %value, i32* %state seq_cst, align 4
  %s = load atomic i32, i32* %sleeps seq_cst, align 4
  %asleep = icmp ne i32 %s, 0
  br i1 %asleep, label %wake, label %done
wake:
  call i64 (i64, ...) @syscall(i64 {sys_futex}, i32* %state, i64 {futex_wake}, i64 2147483647, i8* null, i8* null, i64 0)
  br label %done
done:
  ret void
}}

define internal i64* @field(i8* %b, i64 %off) {{
  %p = getelementptr i8, i8* %b, i64 %off
  %q = bitcast i8* %p to i64*
  ret i64* %q
}}

define internal i32* @word(i8* %b, i64 %off) {{
  %p = getelementptr i8, i8* %b, i64 %off
  %q = bitcast i8* %p to i32*
  ret i32* %q
}}

; the lane: run native jobs until a Python job comes; return its kind
define i32 @ember_lane_serve(i8* %b) {{
entry:
  %state = call i32* @word(i8* %b, i64 {STATE})
  %lane_sleeps = call i32* @word(i8* %b, i64 {LANE_SLEEPS})
  %caller_sleeps = call i32* @word(i8* %b, i64 {CALLER_SLEEPS})
  %pspin = call i64* @field(i8* %b, i64 {LANE_SPIN})
  %spin_ns = load i64, i64* %pspin
  br label %wait
wait:
  %v = call i32 @await(i32* %state, i32* %lane_sleeps, i32 {DONE}, i64 %spin_ns)
  %native = icmp eq i32 %v, {NATIVE_JOB}
  br i1 %native, label %run, label %back
run:
  %pr = call i64* @field(i8* %b, i64 {RUNNER})
  %pw = call i64* @field(i8* %b, i64 {WORDS})
  %pp = call i64* @field(i8* %b, i64 {PTRS})
  %pf = call i64* @field(i8* %b, i64 {FNS})
  %r = load i64, i64* %pr
  %w = load i64, i64* %pw
  %p = load i64, i64* %pp
  %f = load i64, i64* %pf
  %fn = inttoptr i64 %r to i32 (i8*, i8*, i8*)*
  %wa = inttoptr i64 %w to i8*
  %pa = inttoptr i64 %p to i8*
  %fa = inttoptr i64 %f to i8*
  %rc = call i32 %fn(i8* %wa, i8* %pa, i8* %fa)
  %prc = call i32* @word(i8* %b, i64 {RC})
  store i32 %rc, i32* %prc
  call void @post(i32* %state, i32* %caller_sleeps, i32 {DONE})
  br label %wait
back:
  ret i32 %v
}}

; the caller: post a job of ``kind`` and wait until the lane is done; its status
define i32 @ember_lane_call(i8* %b, i32 %kind, i64 %runner, i64 %words, i64 %ptrs, i64 %fns) {{
  %state = call i32* @word(i8* %b, i64 {STATE})
  %lane_sleeps = call i32* @word(i8* %b, i64 {LANE_SLEEPS})
  %caller_sleeps = call i32* @word(i8* %b, i64 {CALLER_SLEEPS})
  %pr = call i64* @field(i8* %b, i64 {RUNNER})
  %pw = call i64* @field(i8* %b, i64 {WORDS})
  %pp = call i64* @field(i8* %b, i64 {PTRS})
  %pf = call i64* @field(i8* %b, i64 {FNS})
  store i64 %runner, i64* %pr
  store i64 %words, i64* %pw
  store i64 %ptrs, i64* %pp
  store i64 %fns, i64* %pf
  %pspin = call i64* @field(i8* %b, i64 {CALLER_SPIN})
  %spin_ns = load i64, i64* %pspin
  call void @post(i32* %state, i32* %lane_sleeps, i32 %kind)
  %v = call i32 @await(i32* %state, i32* %caller_sleeps, i32 %kind, i64 %spin_ns)
  %prc = call i32* @word(i8* %b, i64 {RC})
  %rc = load i32, i32* %prc
  ret i32 %rc
}}

; the lane, after a Python job: done
define void @ember_lane_finish(i8* %b) {{
  %state = call i32* @word(i8* %b, i64 {STATE})
  %caller_sleeps = call i32* @word(i8* %b, i64 {CALLER_SLEEPS})
  call void @post(i32* %state, i32* %caller_sleeps, i32 {DONE})
  ret void
}}
"""

_LOCK = threading.Lock()
_FNS: Optional[tuple] = None
_FAILED = False


def _ir(machine: Optional[str] = None) -> Optional[str]:
    machine = (machine or platform.machine()).lower()
    if not sys.platform.startswith("linux") or machine not in _SYS_FUTEX:
        return None
    return _IR.format(
        sys_futex=_SYS_FUTEX[machine], futex_wait=_FUTEX_WAIT_PRIVATE, futex_wake=_FUTEX_WAKE_PRIVATE,
        STATE=STATE, LANE_SLEEPS=LANE_SLEEPS, CALLER_SLEEPS=CALLER_SLEEPS, RUNNER=RUNNER, WORDS=WORDS,
        PTRS=PTRS, FNS=FNS, RC=RC, LANE_SPIN=LANE_SPIN, CALLER_SPIN=CALLER_SPIN,
        NATIVE_JOB=NATIVE_JOB, DONE=DONE)


SYMBOLS = ("ember_lane_serve", "ember_lane_call", "ember_lane_finish")


def object_ir(triple: str) -> Optional[str]:
    """The hand-off's LLVM IR for a library built for ``triple`` (None where there is none)."""
    text = _ir(triple.split("-", 1)[0])
    return None if text is None else f'target triple = "{triple}"\n' + text


def _prototypes(addresses: tuple) -> tuple:
    vp, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    serve, call, finish = addresses
    return (ctypes.CFUNCTYPE(i32, vp)(serve), ctypes.CFUNCTYPE(i32, vp, i32, i64, i64, i64, i64)(call),
            ctypes.CFUNCTYPE(None, vp)(finish))


def offer(lib: ctypes.CDLL) -> None:
    """Take the hand-off from a loaded kernel library that carries it, if none is taken yet (the
    library is kept loaded: a lane's thread waits inside its code)."""
    global _FNS
    if _FNS is not None:
        return
    try:
        addresses = tuple(ctypes.cast(lib[name], ctypes.c_void_p).value for name in SYMBOLS)
    except AttributeError:  # (a library linked before it carried them)
        return
    with _LOCK:
        if _FNS is None:
            _FNS = (lib,) + _prototypes(addresses)


def functions() -> Optional[tuple]:
    """``(serve, call, finish)``: a loaded library's hand-off (:func:`offer`), else the
    JIT-compiled one (compiled once per process), or None where it is not available (not Linux,
    another CPU family, or the JIT failed) or not worth it: in a process that has not imported
    llvmlite, importing it and compiling this would add ~190 ms to the first run; its lanes use
    locks."""
    global _FNS, _FAILED
    with _LOCK:
        if _FNS is None and not _FAILED and "llvmlite.binding" in sys.modules:
            text = _ir()
            try:
                if text is None:
                    raise RuntimeError("no futex hand-off for this platform")
                from .jit import jit_engine

                engine = jit_engine(text)
                # (the engine owns the code: keep it alive)
                _FNS = (engine,) + _prototypes(tuple(engine.get_function_address(n) for n in SYMBOLS))
            except Exception:  # (the lanes fall back to locks)
                _FAILED = True
        return _FNS[1:] if _FNS is not None else None


def available() -> bool:
    return functions() is not None


class Block:
    """One lane's shared job slot (a 64-byte aligned buffer), starting DONE: the lane waits."""

    def __init__(self, lane_spin_ns: int, caller_spin_ns: int):
        self._buf = (ctypes.c_uint8 * (BLOCK_BYTES + 64))()
        base = ctypes.addressof(self._buf)
        self.address = base + (-base) % 64
        ctypes.c_int32.from_address(self.address + STATE).value = DONE
        ctypes.c_int64.from_address(self.address + LANE_SPIN).value = int(lane_spin_ns)
        ctypes.c_int64.from_address(self.address + CALLER_SPIN).value = int(caller_spin_ns)


__all__ = ["Block", "DONE", "NATIVE_JOB", "PYTHON_JOB", "SYMBOLS", "available", "functions", "object_ir", "offer"]
