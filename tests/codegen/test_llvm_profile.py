"""Instrumented kernels: unchanged results, exact counts, bounded records, per-thread slots."""

import numpy as np
import pytest

from ember.codegen.llvm import build
from ember.driver import lower_kernel
from ember.errors import EmberError
from ember.kernels.conv import conv_nd
from ember.kernels.elementwise import broadcast_binary
from ember.kernels.matmul import matmul
from ember.loop import Buffer, For, PrimFunc, Store, Var
from ember.loop.expr import const
from ember.loop.passes import instrument_loops
from ember.runtime.loop_counters import LoopCounters, cycle_counter, instrumented_kernels


def nest(name, extents, kinds=None):
    """``Y[i0, .., ik] = X[i0, .., ik] * 2 + 1`` over loops of ``extents`` (outermost first)."""
    X, Y = Buffer("X", tuple(extents), align=4), Buffer("Y", tuple(extents), align=4)
    vs = [Var(f"i{k}") for k in range(len(extents))]
    body = Store(Y, X[tuple(vs)] * 2.0 + 1.0, tuple(vs))
    for v, e, k in reversed(list(zip(vs, extents, kinds or ["serial"] * len(extents)))):
        body = For(v, const(0), const(e), k, body)
    return PrimFunc(name, (X, Y), body)


def run_both(plain, inst, name, shapes, out_shape, rng, times=1):
    ins = [rng.standard_normal(s).astype("float32") for s in shapes]
    a, b = np.zeros(out_shape, "float32"), np.zeros(out_shape, "float32")
    for _ in range(times):
        plain[name](*ins, a)
        inst[name](*ins, b)
    return a, b


@pytest.mark.parametrize("case", ["matmul", "conv", "elementwise"])
def test_outputs_are_bit_identical(case):
    if case == "matmul":
        sch, args = matmul(50, 40, 36)  # parallel outer loops, packed panels, tails
        shapes, out = [(50, 36), (36, 40)], (50, 40)
    elif case == "conv":
        sch, args = conv_nd((1, 5, 12, 12), (8, 5, 3, 3), strides=(1, 1), padding=(1, 1, 1, 1))
        shapes, out = [(1, 5, 12, 12), (8, 5, 3, 3)], (1, 8, 12, 12)
    else:
        sch, args = broadcast_binary(lambda a, b: a * b + a, (7, 33), (33,))
        shapes, out = [(7, 33), (33,)], (7, 33)
    f = lower_kernel(sch, args, case)
    g, sites = instrument_loops(f, 2)
    assert len(sites) > 1
    plain, inst = build([f], name=case), build([g], name=case)
    a, b = run_both(plain, inst, case, shapes, out, np.random.default_rng(0), times=2)
    assert a.tobytes() == b.tobytes()
    c = LoopCounters(inst, case)
    assert c.counts().sum(axis=0)[0] == 2  # the body ran twice


def test_counts_are_exact_and_depth_is_respected():
    M, E, R = 7, 5, 3
    g, sites = instrument_loops(nest("nest3", [M, E, 4]), 2, records_per_site=4)
    mod = build([g], name="nest3")
    c = LoopCounters(mod, "nest3")
    x = np.arange(M * E * 4, dtype="float32").reshape(M, E, 4)
    y = np.zeros_like(x)
    for _ in range(R):
        mod["nest3"](x, y)
    np.testing.assert_array_equal(y, x * 2 + 1)
    n = c.counts().sum(axis=0)
    assert n.tolist() == [R, R, M * R]  # 3 sites: the depth-3 loop is not one
    assert [len(c.records(s)) for s in range(3)] == [R, R, 4]
    assert (c.cycles().sum(axis=0) >= 0).all()
    assert c.records(2).sum() <= c.cycles().sum(axis=0)[2]  # kept durations are part of the total
    c.reset()
    assert c.counts().sum() == 0 and c.cycles().sum() == 0 and len(c.records(1)) == 0


def test_record_buffer_is_bounded_under_a_long_loop():
    g, _ = instrument_loops(nest("long", [100000, 2]), 2, records_per_site=16)
    mod = build([g], name="long")
    c = LoopCounters(mod, "long")
    x = np.ones((100000, 2), "float32")
    y = np.zeros_like(x)
    mod["long"](x, y)
    assert c.counts().sum(axis=0).tolist() == [1, 1, 100000]
    assert len(c.records(2)) == 16
    meta = next(k for k in mod.metadata["kernels"] if k["name"] == "long")["profile"]
    assert meta["records"] == 16 and meta["stride"] % 8 == 0
    # nothing is written past the kept records: the padding of every cell stays zero
    assert not c._cells[:, :, 2 + 16:].any()
    assert (y == 3).all()


@pytest.mark.parametrize("max_threads", [64, 2, 1])
def test_parallel_loops_count_per_thread(omp_threads, max_threads):
    """Four threads run 64 iterations (each its share of 16, and what is left of the others'
    when it finishes first); with fewer slots than threads the last slot is shared and updated
    atomically, so the counts stay exact."""
    R, P, E = 3, 64, 6
    f = nest(f"par{max_threads}", [P, E, 8], kinds=["parallel", "serial", "serial"])
    g, _ = instrument_loops(f, 2, records_per_site=20, max_threads=max_threads)
    plain, inst = build([f], name="p"), build([g], name="i")
    omp_threads(4)
    a, b = run_both(plain, inst, f.name, [(P, E, 8)], (P, E, 8), np.random.default_rng(1), times=R)
    assert a.tobytes() == b.tobytes()
    c = LoopCounters(inst, f.name)
    n = c.counts()
    assert n.shape == (max_threads, 3)
    assert n.sum(axis=0).tolist() == [R, R, P * R]  # body and parallel loop: the calling thread
    per_slot = n[:, 2]
    assert per_slot.sum() == P * R and not per_slot[4:].any()  # (threads 0-3 only)
    assert len(c.records(2)) == sum(min(int(k), 20) for k in per_slot)
    assert c.cycles()[:, 2].sum() > 0


def test_metadata_and_cycle_counter():
    g, _ = instrument_loops(nest("m", [4]), 1, records_per_site=3, max_threads=8)
    f = nest("plain_kernel", [4])
    mod = build([g, f], name="mixed")
    assert instrumented_kernels(mod) == ["m"]
    p = next(k for k in mod.metadata["kernels"] if k["name"] == "m")["profile"]
    assert (p["symbol"], p["threads"], p["sites"], p["records"], p["stride"]) == ("__ember_prof_m", 8, 2, 3, 8)
    t0 = cycle_counter(mod)
    assert cycle_counter(mod) >= t0
    with pytest.raises(EmberError, match="no loop-profile counters in kernel 'plain_kernel'"):
        LoopCounters(mod, "plain_kernel")
    with pytest.raises(EmberError, match="no kernel 'nope'"):
        LoopCounters(mod, "nope")
    with pytest.raises(EmberError, match="no instrumented kernels"):
        cycle_counter(build([f], name="plain"))
