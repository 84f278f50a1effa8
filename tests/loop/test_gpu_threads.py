"""GPU kernels in the loop IR (issue 49, item 2): loops bound to blocks and threads, shared
memory, barriers; their text form, the schedule primitive, the checks, and their execution on
the CPU (blocks and threads as loops, split at barriers) against numpy."""
import numpy as np
import pytest

import ember
import ember.runtime as rt
from ember.errors import LoweringError, ScheduleError
from ember.loop import compute as te
from ember.loop import parse
from ember.loop.lower import lower
from ember.loop.passes.threads_on_cpu import threads_on_cpu
from ember.loop.passes.verify_threads import verify_threads
from ember.loop.schedule import Schedule, Trace

# C = A @ B in 16x16 tiles: each block stages a tile of A and of B in shared memory, its
# 16x16 threads each accumulate one element in a register of their own
TILED_MATMUL = '''
def mm(A: Buffer((64, 64), "float32"), B: Buffer((64, 64), "float32"), C: Buffer((64, 64), "float32")):
    for by in block_y(4):
        for bx in block_x(4):
            with allocate("As", (16, 16), "float32", scope="shared") as As:
                with allocate("Bs", (16, 16), "float32", scope="shared") as Bs:
                    for ty in thread_y(16):
                        for tx in thread_x(16):
                            with allocate("acc", (1,), "float32", scope="local") as acc:
                                acc[0] = 0.0
                                for ko in serial(4):
                                    As[ty, tx] = A[by * 16 + ty, ko * 16 + tx]
                                    Bs[ty, tx] = B[ko * 16 + ty, bx * 16 + tx]
                                    barrier()
                                    for ki in serial(16):
                                        acc[0] = acc[0] + As[ty, ki] * Bs[ki, tx]
                                    barrier()
                                C[by * 16 + ty, bx * 16 + tx] = acc[0]
'''

# each block reverses a row through shared memory: right only if every thread's write lands
# before any thread reads (the barrier)
REVERSE = '''
def rev(a: Buffer((8, 64), "float32"), b: Buffer((8, 64), "float32")):
    for bx in block_x(8):
        with allocate("t", (64,), "float32", scope="shared") as t:
            for tx in thread_x(64):
                t[tx] = a[bx, tx] * 2.0
                barrier()
                b[bx, tx] = t[63 - tx]
'''


def test_thread_loops_shared_buffers_and_barriers_print_and_parse():
    for text in (TILED_MATMUL, REVERSE):
        f = parse(text)
        assert parse(f.script()) == f and parse(f.script()).script() == f.script()
    assert "barrier()" in parse(REVERSE).script() and 'scope="shared"' in parse(REVERSE).script()


def test_bind_is_a_schedule_primitive_that_replays():
    a = te.placeholder((256, 64), "float32", "a")
    b = te.compute((256, 64), lambda i, j: a[i, j] * 2.0, "b")
    s = Schedule(b)
    i, j = s[b].leaf
    s[b].bind(i, "block_x")
    s[b].bind(j, "thread_x")
    f = lower(s, [a, b], "k")
    assert "for i in block_x(256):" in f.script() and "for j in thread_x(64):" in f.script()
    assert verify_threads(f) == {"grid": {"block_x": f.body.extent}, "block": {"thread_x": f.body.body.extent}}
    again = Schedule(b)
    Trace.from_json(s.trace.to_json()).apply(again)
    assert lower(again, [a, b], "k") == f
    with pytest.raises(ScheduleError, match="already bound to thread_x"):
        s2 = Schedule(b)
        x, y = s2[b].leaf
        s2[b].bind(x, "thread_x")
        s2[b].bind(y, "thread_x")
    r = te.reduce_axis(64, "r")
    c = te.compute((256,), lambda i: te.sum(a[i, r], axis=r), "c")
    with pytest.raises(ScheduleError, match="reduction loop"):
        Schedule(c)[c].bind(r, "thread_x")
    with pytest.raises(ScheduleError, match="choose one of"):
        Schedule(b)[b].bind(i, "warp_x")


def test_the_checks_pass_a_kernel_that_keeps_to_the_limits():
    shape = verify_threads(parse(TILED_MATMUL), max_threads=1024, max_shared_bytes=48 * 1024)
    assert {k: v.value for k, v in shape["block"].items()} == {"thread_y": 16, "thread_x": 16}
    assert {k: v.value for k, v in shape["grid"].items()} == {"block_y": 4, "block_x": 4}


@pytest.mark.parametrize("change,match", [
    (lambda t: t, "256 threads a block, over the limit of 128"),
    (lambda t: t.replace('(16, 16), "float32", scope="shared") as Bs', '(64, 64), "float32", scope="shared") as Bs'),
     "over the limit of 16384"),
    (lambda t: t.replace("                                    barrier()\n                                    for ki",
                         "                                    if tx < 8:\n                                        barrier()\n"
                         "                                    for ki"), "depends on a thread index"),
    (lambda t: t.replace("for ko in serial(4):", "for ko in serial(tx + 1):"), "trip count depends on a thread index"),
    (lambda t: t.replace("for by in block_y(4):", "for by in serial(4):"), "encloses the grid"),
    (lambda t: t.replace("for ko in serial(4):", "for ko in parallel(4):"), "is parallel"),
])
def test_the_checks_name_what_a_gpu_cannot_run(change, match):
    f = parse(change(TILED_MATMUL))
    with pytest.raises(LoweringError, match=match) as e:
        verify_threads(f, max_threads=128 if "threads a block" in match else 1024, max_shared_bytes=16384)
    assert "kernel 'mm'" in str(e.value)


def test_barriers_outside_the_threads_and_shared_memory_inside_them_are_refused():
    outside = REVERSE.replace("            for tx in thread_x(64):\n                t[tx] = a[bx, tx] * 2.0\n"
                              "                barrier()\n",
                              "            barrier()\n            for tx in thread_x(64):\n                t[tx] = a[bx, tx] * 2.0\n")
    with pytest.raises(LoweringError, match="outside the thread_"):
        verify_threads(parse(outside))
    inside = '''
def k(a: Buffer((64,), "float32")):
    for bx in block_x(1):
        for tx in thread_x(64):
            with allocate("t", (64,), "float32", scope="shared") as t:
                t[tx] = 1.0
                a[tx] = t[tx]
'''
    with pytest.raises(LoweringError, match="allocated inside a thread loop"):
        verify_threads(parse(inside))


def test_a_gpu_kernel_runs_on_the_cpu_thread_by_thread_between_barriers():
    rng = np.random.default_rng(0)
    f = parse(TILED_MATMUL)
    cpu = threads_on_cpu(f)
    assert "barrier()" not in cpu.script() and "thread_" not in cpu.script()
    A, B = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    C = rt.empty((64, 64), "float32")
    ember.build(cpu)["mm"](rt.array(A), rt.array(B), C)
    np.testing.assert_allclose(C.numpy(), A @ B, rtol=1e-4, atol=1e-4)

    a = rng.standard_normal((8, 64)).astype(np.float32)
    b = rt.empty((8, 64), "float32")
    ember.build(threads_on_cpu(parse(REVERSE)))["rev"](rt.array(a), b)
    np.testing.assert_array_equal(b.numpy(), (a * 2)[:, ::-1])
    # without the barrier each thread would read slots no thread has written yet
    racy = threads_on_cpu(parse(REVERSE.replace("                barrier()\n", "")))
    ember.build(racy)["rev"](rt.array(a), b)
    assert not np.array_equal(b.numpy(), (a * 2)[:, ::-1])
