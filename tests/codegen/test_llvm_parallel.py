"""Parallel loops (``ember.codegen.llvm.parallel``): every iteration runs exactly once for any
extent and team size, and a thread that finishes its share takes over what is left of a slower
thread's."""

import numpy as np
import pytest

from ember.codegen.llvm import build
from ember.loop import LT, Buffer, For, IfThenElse, PrimFunc, Store, Var
from ember.loop.expr import const
from ember.loop.passes import instrument_loops
from ember.runtime.loop_counters import LoopCounters


@pytest.fixture(scope="module")
def increment():
    """``Y[i] += 1`` over a parallel ``i`` of extent ``n``: an iteration run twice shows."""
    n, i = Var("n"), Var("i")
    Y = Buffer("Y", (n,), align=4)
    body = For(i, const(0), n, "parallel", Store(Y, Y[(i,)] + 1.0, (i,)))
    return build([PrimFunc("inc", (Y,), body)], name="inc")["inc"]  # (n: Y's length)


@pytest.mark.parametrize("threads", [1, 2, 3, 5, 64, 65])
def test_every_iteration_runs_once(increment, omp_threads, threads):
    omp_threads(threads)
    # (below SERIAL_WORK updates the calling thread runs the loop alone; above it, the team)
    for n in (0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 1000, 4099, 16383, 16384, 16385, 40001):
        y = np.zeros(n, "float32")
        increment(y)
        assert (y == 1).all(), (threads, n, np.flatnonzero(y != 1)[:10])


def test_a_finished_thread_takes_over_a_slow_threads_pieces(omp_threads):
    """64 iterations on 2 threads, the first 16 (thread 0's share is 32) slow: thread 1 finishes
    its light share at once and runs some of the slow ones; with a static split thread 0 would
    run all 16."""
    i, k1, k2 = Var("i"), Var("k1"), Var("k2")
    Y = Buffer("Y", (64,), align=4)
    slow = For(k1, const(0), const(400), "serial",
               For(k2, const(0), const(1000), "serial", Store(Y, Y[(i,)] * 0.5 + 1.0, (i,))))
    body = For(i, const(0), const(64), "parallel",
               IfThenElse(LT(i, const(16)), slow, Store(Y, Y[(i,)] + 1.0, (i,))))
    g, _ = instrument_loops(PrimFunc("uneven", (Y,), body), 2, max_threads=4)
    mod = build([g], name="uneven")
    omp_threads(2)
    y = np.zeros(64, "float32")
    mod["uneven"](y)
    np.testing.assert_allclose(y[:16], 2.0, rtol=1e-6)  # (x -> x/2 + 1 converges to 2)
    assert (y[16:] == 1).all()
    slow_runs = LoopCounters(mod, "uneven").counts()[:, 2]  # entries of the slow loop, per thread
    assert slow_runs.sum() == 16
    assert slow_runs[1] > 0, slow_runs.tolist()


def test_little_work_runs_on_the_calling_thread_and_much_on_the_team(omp_threads):
    """A parallel loop whose whole work is below ``SERIAL_WORK`` element updates is not worth
    waking the team for: one thread runs it; a larger one is shared."""
    from ember.codegen.llvm.parallel import SERIAL_WORK, static_work

    n, i, k = Var("n"), Var("i"), Var("k")
    Y = Buffer("Y", (n, 16), align=4)
    inner = For(k, const(0), const(16), "serial", Store(Y, Y[(i, k)] + 1.0, (i, k)))
    assert static_work(inner) == 16 and static_work(For(k, const(0), n, "serial", inner)) is None
    g, _ = instrument_loops(PrimFunc("rows", (Y,), For(i, const(0), n, "parallel", inner)), 2, max_threads=4)
    mod = build([g], name="rows")
    omp_threads(2)
    # (the instrumentation adds its counters' updates to the work: well below and well above)
    # (and a shared loop long enough, milliseconds, that the second thread surely takes a piece)
    for rows, shared in ((8, False), (SERIAL_WORK // 64, False), (1 << 18, True)):
        counters = LoopCounters(mod, "rows")
        counters.reset()
        y = np.zeros((rows, 16), "float32")
        mod["rows"](y)
        assert (y == 1).all()
        per_thread = counters.counts()[:, 2]  # entries of the inner loop, per thread
        assert per_thread.sum() == rows
        assert (per_thread[1] > 0) == shared, (rows, per_thread.tolist())
