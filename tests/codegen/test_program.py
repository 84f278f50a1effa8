"""The native program runner (ember.codegen.llvm.program) on toy kernels: call order, slots,
size arguments, the first failing call's index, an arity it was not built for."""
import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from ember.codegen.llvm import types as T
from ember.codegen.llvm.program import RUNNER_SYMBOL, add_program_runner


@pytest.fixture(scope="module")
def jit():
    """The runner (arities: 1 pointer, 2 pointers, 1 pointer and 2 sizes) and three kernels:
    ``bump(a)`` adds 1 to a[0] and returns the old value truncated (nonzero: a failure);
    ``double(a, b)`` sets b[0] = 2 a[0]; ``axpb(a, x, y)`` sets a[0] = a[0] * x + y."""
    m = ir.Module("t")
    m.triple = llvm.get_process_triple()
    add_program_runner(m, [(1, 0), (2, 0), (1, 2)])
    for name, n, sizes in (("bump", 1, 0), ("double", 2, 0), ("axpb", 1, 2)):
        f = ir.Function(m, ir.FunctionType(T.I32, [T.PTR] * n + [T.I64] * sizes), name)
        b = ir.IRBuilder(f.append_basic_block())
        v = b.load(f.args[0], typ=T.F64)
        if sizes:
            x, y = (b.sitofp(f.args[k], T.F64) for k in (1, 2))
            b.store(b.fadd(b.fmul(v, x), y), f.args[0])
            b.ret(ir.Constant(T.I32, 0))
        elif n == 1:
            b.store(b.fadd(v, ir.Constant(T.F64, 1.0)), f.args[0])
            b.ret(b.fptosi(v, T.I32))
        else:
            b.store(b.fmul(v, ir.Constant(T.F64, 2.0)), f.args[1])
            b.ret(ir.Constant(T.I32, 0))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llvm.parse_assembly(str(m))
    mod.verify()
    ee = llvm.create_mcjit_compiler(mod, llvm.Target.from_default_triple().create_target_machine())
    ee.finalize_object()
    run = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        ee.get_function_address(RUNNER_SYMBOL))
    fns = (ctypes.c_void_p * 3)(*[ee.get_function_address(k) for k in ("bump", "double", "axpb")])
    return ee, run, fns


def _run(jit, words, *arrays):
    _, run, fns = jit
    slots = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    prog = np.array(words, np.int64)
    return run(prog.ctypes.data, ctypes.addressof(slots), ctypes.addressof(fns))


def test_calls_run_in_order_on_their_slots(jit):
    a, b = np.array([0.25]), np.zeros(1)
    # double(a -> b); bump(b); double(b -> a): [fn, pointers, sizes, slots...]
    assert _run(jit, [3, 1, 2, 0, 0, 1, 0, 1, 0, 1, 1, 2, 0, 1, 0], a, b) == 0
    assert b[0] == 1.5 and a[0] == 3.0
    assert _run(jit, [0], a, b) == 0 and a[0] == 3.0  # an empty program


def test_sizes_follow_the_pointers(jit):
    a, b = np.array([2.0]), np.zeros(1)
    # axpb(b, 5, -3) after double(a -> b): b = 4 * 5 - 3
    assert _run(jit, [2, 1, 2, 0, 0, 1, 2, 1, 2, 1, 5, -3], a, b) == 0
    assert b[0] == 17.0


def test_the_first_failing_call_is_reported_and_the_rest_not_run(jit):
    a, b = np.array([0.5]), np.zeros(1)
    # bump(a): 0 -> ok (a = 1.5); bump(a): 1 -> fails; double(a -> b) never runs
    assert _run(jit, [3, 0, 1, 0, 0, 0, 1, 0, 0, 1, 2, 0, 0, 1], a, b) == 2
    assert a[0] == 2.5 and b[0] == 0.0


def test_an_arity_the_runner_was_not_built_for(jit):
    a = np.zeros(1)
    assert _run(jit, [1, 0, 3, 0, 0, 0, 0], a) == -1
    assert _run(jit, [1, 2, 1, 1, 0, 7], a) == -1  # a pointer and one size: not built
