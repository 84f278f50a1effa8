"""The native program runner every kernel library carries: ``__ember_run_program``.

An executable's program is a list of kernel calls over *slots* (inputs, constants, arena
ranges, outputs). Calling each kernel from Python costs a few microseconds of argument
marshalling per call; this function runs the whole list natively instead::

    int32 __ember_run_program(const int64 *prog, void *const *slots, void *const *fns)

``prog`` is ``[ncalls, (fn, nptr, nscalar, slot_0 .. slot_{nptr-1}, size_0 .. size_{nscalar-1})
x ncalls]``: for each call it loads ``fns[fn]`` and calls it with the pointers ``slots[slot_k]``
followed by the int64 sizes (a kernel over symbolic shapes takes them; the runtime writes the
values of one run's shapes into its words). It returns 0, or the 1-based index of the first
call whose kernel reported a failure (a nonzero status). The runner handles the arities
``arities`` lists (a switch on ``nptr * 64 + nscalar``; another arity returns ``-1``). It names
no kernel, so it is the same code for any library with the same arities, and the runtime needs
only ctypes to use it.
"""
from __future__ import annotations

from llvmlite import ir

from ...runtime.executable import RUNNER_MAX_SIZES, RUNNER_SYMBOL  # (what the runtime looks up and expects)
from . import types as T

MAX_SCALARS = RUNNER_MAX_SIZES


def add_program_runner(module: ir.Module, arities) -> ir.Function:
    """Define :data:`RUNNER_SYMBOL` in ``module`` for kernels of the given (pointer, size)
    arities."""
    fn = ir.Function(module, ir.FunctionType(T.I32, [T.PTR, T.PTR, T.PTR]), RUNNER_SYMBOL)
    fn.attributes.add("nounwind")
    prog, slots, fns = fn.args
    prog.name, slots.name, fns.name = "prog", "slots", "fns"
    entry, head, body, nxt, done, bad = (fn.append_basic_block(n) for n in
                                         ("entry", "head", "body", "next", "done", "bad"))
    b = ir.IRBuilder(entry)

    def word(pos):
        return b.load(b.gep(prog, [pos], source_etype=T.I64), typ=T.I64)

    def at(pos, k):
        return b.add(pos, ir.Constant(T.I64, k))

    ncalls = word(ir.Constant(T.I64, 0))
    b.branch(head)

    b.position_at_end(head)
    i = b.phi(T.I64, "i")
    pos = b.phi(T.I64, "pos")
    i.add_incoming(ir.Constant(T.I64, 0), entry)
    pos.add_incoming(ir.Constant(T.I64, 1), entry)
    b.cbranch(b.icmp_signed("<", i, ncalls), body, done)

    b.position_at_end(body)
    kernel = b.gep(fns, [word(pos)], source_etype=T.PTR)  # where the kernel's address is
    key = b.add(b.mul(word(at(pos, 1)), ir.Constant(T.I64, MAX_SCALARS)), word(at(pos, 2)))
    next_i = b.add(i, ir.Constant(T.I64, 1))
    switch = b.switch(key, bad)
    incoming = []
    for n, m in sorted(set(arities)):
        if m >= MAX_SCALARS:
            continue
        case = fn.append_basic_block(f"args{n}_{m}")
        switch.add_case(ir.Constant(T.I64, n * MAX_SCALARS + m), case)
        b.position_at_end(case)
        args = [b.load(b.gep(slots, [word(at(pos, 3 + k))], source_etype=T.PTR), typ=T.PTR) for k in range(n)]
        args += [word(at(pos, 3 + n + k)) for k in range(m)]
        status = _call(b, kernel, args, n, m)
        incoming.append((at(pos, 3 + n + m), case))
        failed = fn.append_basic_block(f"failed{n}_{m}")
        b.cbranch(b.icmp_signed("!=", status, ir.Constant(T.I32, 0)), failed, nxt)
        b.position_at_end(failed)
        b.ret(b.trunc(next_i, T.I32))

    b.position_at_end(nxt)
    if incoming:
        i_next = b.phi(T.I64, "i.next")
        pos_next = b.phi(T.I64, "pos.next")
        for p, blk in incoming:
            i_next.add_incoming(next_i, blk)
            pos_next.add_incoming(p, blk)
        i.add_incoming(i_next, nxt)
        pos.add_incoming(pos_next, nxt)
        b.branch(head)
    else:  # no arity the runner handles: every call goes to "bad"
        b.unreachable()

    b.position_at_end(done)
    b.ret(ir.Constant(T.I32, 0))
    b.position_at_end(bad)
    b.ret(ir.Constant(T.I32, -1))
    return fn


class _Callee(ir.instructions.LoadInstr):
    """A function pointer loaded for one indirect call: it carries that call's type, which
    llvmlite reads off the callee (an opaque pointer has none)."""

    def __init__(self, parent, ptr, ftype: ir.FunctionType):
        super().__init__(parent, ptr, typ=T.PTR)
        self._ftype = ftype

    @property
    def function_type(self) -> ir.FunctionType:
        return self._ftype


def _call(b: ir.IRBuilder, address: ir.Value, args: list, n: int, m: int) -> ir.Value:
    """Call the kernel whose address is stored at ``address`` as ``int32 (ptr x n, i64 x m)``."""
    callee = _Callee(b.block, address, ir.FunctionType(T.I32, [T.PTR] * n + [T.I64] * m))
    b._insert(callee)
    return b.call(callee, args)


__all__ = ["RUNNER_SYMBOL", "add_program_runner"]
