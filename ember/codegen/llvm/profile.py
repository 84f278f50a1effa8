"""Code for the loop-profiling calls: ``cycle_counter()`` and ``profile_record(site, start, end)``.

A kernel instrumented by ``ember.loop.passes.instrument_loops`` carries the attrs
``profile_sites``, ``profile_records`` and ``profile_threads``. Its counters are one
zero-initialized, exported global (so ctypes can read and reset it from the loaded library)::

    int64_t __ember_prof_<kernel>[threads][sites][stride];
    // cell [t][s]: [0] executions, [1] total cycles, [2 .. 2 + records) first durations

``stride`` is ``2 + records`` rounded up to whole 64-byte lines and the global is 64-byte
aligned, so two threads (or two sites) never write the same cache line.

Per-thread scheme: the slot of a thread is ``omp_get_thread_num()`` (read once per function, in
its entry block: a kernel's body, or the outlined body of a parallel loop, runs on one thread).
Threads numbered ``threads - 1`` and above share the last slot and update it with atomic adds
(the execution count's fetch-add also hands out record indices), so nothing is lost or torn when
OMP_NUM_THREADS exceeds the bound; every other thread owns its slot and uses plain loads and
stores. A library holding instrumented kernels also exports ``int64_t __ember_cycle_counter()``
so the profiler can measure the counter's rate.
"""
from __future__ import annotations

import dataclasses

from llvmlite import ir

from ...errors import CompileError
from ...loop.expr import IntImm
from ...loop.intrinsics import EFFECTS
from . import types as T
from .intrinsics import declare

COUNTERS_PREFIX = "__ember_prof_"
CYCLE_FUNCTION = "__ember_cycle_counter"
HEADER = 2  # int64s before a cell's records: execution count, total cycles
LINE = 8    # int64s per 64-byte cache line


@dataclasses.dataclass(frozen=True)
class Layout:
    """Shape of one kernel's counters (what the runtime needs to read them)."""

    symbol: str
    threads: int
    sites: int
    records: int

    @property
    def stride(self) -> int:
        """int64s per (thread, site) cell: header and records padded to whole cache lines."""
        return -(-(HEADER + self.records) // LINE) * LINE

    def as_json(self) -> dict:
        return {"symbol": self.symbol, "threads": self.threads, "sites": self.sites,
                "records": self.records, "stride": self.stride, "header": HEADER}


def layout_of(func) -> Layout | None:
    """The counters' layout of an instrumented PrimFunc (None when it is not instrumented)."""
    sites = func.attr("profile_sites")
    if not sites:
        return None
    threads, records = func.attr("profile_threads", 64), func.attr("profile_records", 256)
    if threads < 1 or records < 0:
        raise CompileError(f"kernel {func.name!r}: profile_threads must be >= 1 and "
                           f"profile_records >= 0, got {threads} and {records}")
    return Layout(COUNTERS_PREFIX + func.name, int(threads), int(sites), int(records))


def declare_counters(module: ir.Module, layout: Layout) -> ir.GlobalVariable:
    """The zero-initialized counters global (external, so the library exports it)."""
    ty = ir.ArrayType(ir.ArrayType(ir.ArrayType(T.I64, layout.stride), layout.sites), layout.threads)
    g = ir.GlobalVariable(module, ty, layout.symbol)
    g.initializer = ir.Constant(ty, None)  # zeroinitializer: lands in .bss, pages touched lazily
    g.align = 64
    g.type = T.PTR  # llvmlite types globals as typed pointers; we address with opaque ones
    return g


def read_counter(b: ir.IRBuilder) -> ir.Value:
    """The raw cycle counter as i64. LLVM's readcyclecounter is rdtsc on x86; on AArch64 it reads
    PMCCNTR_EL0, which Linux does not let user space read, so there it is the virtual counter."""
    if b.module.triple.startswith(("aarch64", "arm64")):
        asm = ir.InlineAsm(ir.FunctionType(T.I64, []), "mrs $0, cntvct_el0", "=r", side_effect=True)
        return b.call(asm, [])
    return b.call(declare(b.module, "llvm.readcyclecounter", T.I64, []), [])


def add_cycle_function(module: ir.Module) -> None:
    """``int64_t __ember_cycle_counter(void)``: the counter, callable through ctypes."""
    if CYCLE_FUNCTION in module.globals:
        return
    fn = ir.Function(module, ir.FunctionType(T.I64, []), CYCLE_FUNCTION)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(read_counter(b))


def _thread_slot(e) -> tuple[ir.Value, ir.Value]:
    """(slot, shared) of the emitter's thread, computed once in its function's entry block."""
    if e.profile_slot is None:
        eb, last = e._entry_builder, ir.Constant(T.I64, e.profile.threads - 1)
        tid = eb.sext(eb.call(declare(e.module, "omp_get_thread_num", T.I32, []), []), T.I64)
        shared = eb.icmp_signed(">=", tid, last)
        e.profile_slot = (eb.select(shared, last, tid), shared)
    return e.profile_slot


def emit_effect(e, node) -> ir.Value:
    """Code of an effect call (``node.name`` in ``EFFECTS``) in the emitter ``e``."""
    b = e.builder
    if node.name == "cycle_counter":
        return read_counter(b)
    assert node.name == EFFECTS[1]
    lay = e.profile
    if lay is None:
        raise CompileError(f"kernel {e.func_name!r}: profile_record in a kernel without profile "
                           f"counters (instrument it with ember.loop.passes.instrument_loops)")
    k = node.args[0]
    if not (isinstance(k, IntImm) and 0 <= k.value < lay.sites):
        # a constant in range: the site indexes the counters without a bounds check
        raise CompileError(f"kernel {e.func_name!r}: profile_record site {node.args[0]!r} is not "
                           f"a constant in [0, {lay.sites})")
    site, start, end = (e.expr(a) for a in node.args)
    g = e.module.globals[lay.symbol]
    slot, shared = _thread_slot(e)
    zero = ir.Constant(T.I32, 0)
    cell = b.gep(g, [zero, slot, site, ir.Constant(T.I64, 0)], inbounds=True, source_etype=g.value_type)
    cyc = b.gep(cell, [ir.Constant(T.I64, 1)], inbounds=True, source_etype=T.I64)
    took = b.sub(end, start)
    one = ir.Constant(T.I64, 1)
    with b.if_else(shared, likely=False) as (then, otherwise):
        with then:  # the last slot is shared by every thread past the bound
            n_shared = b.atomic_rmw("add", cell, one, "monotonic")
            b.atomic_rmw("add", cyc, took, "monotonic")
            from_shared = b.block
        with otherwise:
            n_own = b.load(cell, typ=T.I64)
            b.store(b.add(n_own, one), cell)
            b.store(b.add(b.load(cyc, typ=T.I64), took), cyc)
            from_own = b.block
    n = b.phi(T.I64)
    n.add_incoming(n_shared, from_shared)
    n.add_incoming(n_own, from_own)
    if lay.records:
        # only the first `records` executions keep their duration; the count keeps them all
        with b.if_then(b.icmp_unsigned("<", n, ir.Constant(T.I64, lay.records))):
            rec = b.gep(cell, [b.add(n, ir.Constant(T.I64, HEADER))], inbounds=True, source_etype=T.I64)
            b.store(took, rec)
    return ir.Constant(T.I32, 0)
