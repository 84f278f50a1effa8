"""Concurrent runs of one Executable (and of one loaded export) give the serial answers.

A run's intermediates live in an arena; one arena shared by concurrent runs gave every caller
wrong answers. The tests run many threads at once with concurrency allowed (the default lets
one run in at a time on a 2-core machine, which would hide a shared arena).
"""
import threading

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError
from ember.runtime.arenas import ARENAS, KEEP

THREADS = 8
RUNS = 1000


def mobilenet_like(path: str) -> str:
    """Inverted residual blocks (1x1 expand, depthwise 3x3, 1x1 project, residual add) between a
    strided stem and a pooled classifier: every value but the input and output is in the arena."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    inits, nodes = [], []

    def w(name, *shape):
        fan_in = int(np.prod(shape[1:]))
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32), name))
        inits.append(numpy_helper.from_array((rng.standard_normal(shape[0]) * 0.1).astype(np.float32), name + "_b"))
        return [name, name + "_b"]

    def conv(x, out, wname, shape, **attrs):
        nodes.append(helper.make_node("Conv", [x, *w(wname, *shape)], [out], name=out, **attrs))

    conv("x", "stem", "w_stem", (16, 3, 3, 3), pads=[1, 1, 1, 1], strides=[2, 2])
    nodes.append(helper.make_node("Relu", ["stem"], ["h0"], name="relu0"))
    h = "h0"
    for k in range(3):
        conv(h, f"e{k}", f"w_e{k}", (64, 16, 1, 1))
        nodes.append(helper.make_node("Clip", [f"e{k}", "lo", "hi"], [f"e{k}r"], name=f"relu6_e{k}"))
        conv(f"e{k}r", f"d{k}", f"w_d{k}", (64, 1, 3, 3), pads=[1, 1, 1, 1], group=64)
        nodes.append(helper.make_node("Clip", [f"d{k}", "lo", "hi"], [f"d{k}r"], name=f"relu6_d{k}"))
        conv(f"d{k}r", f"p{k}", f"w_p{k}", (16, 64, 1, 1))
        nodes.append(helper.make_node("Add", [h, f"p{k}"], [f"h{k + 1}"], name=f"add{k}"))
        h = f"h{k + 1}"
    inits += [numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["g"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["g"], ["f"], name="flatten"))
    inits.append(numpy_helper.from_array(rng.standard_normal((10, 16)).astype(np.float32), "fc"))
    nodes.append(helper.make_node("Gemm", ["f", "fc"], ["y"], name="fc", transB=1))
    nodes.append(helper.make_node("Softmax", ["y"], ["prob"], name="softmax"))
    g = helper.make_graph(nodes, "mobilenet_like",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                          [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10]),
                           helper.make_tensor_value_info("h3", TensorProto.FLOAT, [1, 16, 16, 16])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    return mobilenet_like(str(tmp_path_factory.mktemp("concurrency") / "mobilenet_like.onnx"))


@pytest.fixture(scope="module")
def exe(model_path):
    return ember.compile(model_path, name="mobilenet_like", wait=True)  # (tier 1 throughout: a tier switch mid-test changes the bits)


@pytest.fixture(scope="module")
def loaded(exe, tmp_path_factory):
    return ember.load(exe.export(str(tmp_path_factory.mktemp("concurrency") / "mobilenet_like.so")))


@pytest.fixture(scope="module")
def cases():
    rng = np.random.default_rng(2)
    return [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(RUNS)]


def serial(exe, cases):
    return [exe.run(x) for x in cases]


def concurrently(exe, cases, threads=THREADS):
    """Run every case once, spread over ``threads`` threads started together; the results in
    case order, and the exceptions raised."""
    results = [None] * len(cases)
    errors = []
    start = threading.Barrier(threads)

    def work(t):
        start.wait()
        try:
            for k in range(t, len(cases), threads):
                results[k] = exe.run(cases[k])
        except BaseException as e:  # reported by the test, never swallowed
            errors.append(e)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return results, errors


def count_wrong(results, expected) -> int:
    return sum(not all(np.array_equal(a, b) for a, b in zip(r, e)) for r, e in zip(results, expected))


def outputs_share_memory(results) -> bool:
    arrays = [a for r in results for a in r]
    bases = {id(a.base if a.base is not None else a) for a in arrays}
    return len(bases) != len(arrays)


@pytest.mark.parametrize("threads_per_run, concurrent", [(1, THREADS), (2, THREADS), (None, None)])
def test_eight_threads_thousand_runs_match_the_serial_runs(exe, cases, threads_per_run, concurrent):
    expected = serial(exe, cases)
    exe.threads_per_run, exe.max_concurrent_runs = threads_per_run, concurrent
    try:
        results, errors = concurrently(exe, cases)
    finally:
        exe.threads_per_run = exe.max_concurrent_runs = None
    assert not errors
    assert count_wrong(results, expected) == 0
    assert not outputs_share_memory(results)


def test_a_loaded_export_runs_concurrently(loaded, exe, cases):
    expected = serial(exe, cases)
    loaded.threads_per_run, loaded.max_concurrent_runs = 1, THREADS
    results, errors = concurrently(loaded, cases)
    assert not errors
    assert count_wrong(results, expected) == 0
    assert loaded.memory_info.arenas <= THREADS


def test_python_calls_run_concurrently(model_path, cases):
    exe = ember.compile(model_path, name="mobilenet_like")
    exe.native = False
    exe.threads_per_run, exe.max_concurrent_runs = 1, THREADS
    few = cases[:200]
    expected = serial(exe, few)
    results, errors = concurrently(exe, few)
    assert not errors
    assert count_wrong(results, expected) == 0


def test_profiling_while_other_threads_run(exe, cases):
    expected = serial(exe, cases[:100])
    exe.max_concurrent_runs = THREADS
    try:
        box = {}
        prof_thread = threading.Thread(target=lambda: box.setdefault("p", exe.profile(cases[0], warmup=1, repeat=5)))
        prof_thread.start()
        results, errors = concurrently(exe, cases[:100], threads=4)
        prof_thread.join()
    finally:
        exe.max_concurrent_runs = None
    assert not errors and count_wrong(results, expected) == 0
    assert len(box["p"].rows) == len(exe.kernel_calls)


def test_the_pool_is_bounded_and_a_steady_state_allocates_no_arena(exe, cases):
    exe.threads_per_run, exe.max_concurrent_runs = 1, 4
    try:
        concurrently(exe, cases[:200], threads=4)
        made, arenas_made = exe._pool.created, ARENAS.made
        concurrently(exe, cases[:200], threads=4)
        info = exe.memory_info
        assert exe._pool.created == made and ARENAS.made == arenas_made  # reused, not made again
        assert info.arenas == 0 and info.peak_arenas >= 4  # runs give their arenas back
        assert 1 <= ARENAS.free <= KEEP
        exe.max_concurrent_runs = 1  # a smaller bound drops the extra run states
        assert len(exe._pool._free) == 1
    finally:
        exe.threads_per_run = exe.max_concurrent_runs = None


def test_memory_info(exe, cases):
    exe.run(cases[0])
    info = exe.memory_info
    assert info.weights == sum(c.nbytes for c in exe.constants) > 0
    assert info.arena_per_run == exe.program["arena_bytes"] > 0
    assert info.intermediates >= info.arena_per_run
    assert info.outputs_per_run == (10 + 16 * 16 * 16) * 4
    assert info.arenas == 0 and info.pool >= info.arena_per_run  # given back to the process's cache
    assert info.peak >= info.weights + info.arena_per_run + info.outputs_per_run
    assert "arena" in str(info) and "weights" in str(info)


def test_run_settings(exe):
    assert exe.threads_per_run >= 1 and exe.max_concurrent_runs >= 1
    exe.threads_per_run = 1
    try:
        assert exe.max_concurrent_runs == max(1, ember.runtime.pool.host_cores())  # one run per core
        exe.max_concurrent_runs = 3
        assert exe.max_concurrent_runs == 3
    finally:
        exe.threads_per_run = exe.max_concurrent_runs = None
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ArgumentError, match="threads_per_run"):
            exe.threads_per_run = bad
        with pytest.raises(ArgumentError, match="max_concurrent_runs"):
            exe.max_concurrent_runs = bad


def test_threads_per_run_is_what_the_parallel_loops_use(exe, cases):
    """One thread per run gives the same answer as all cores (the loops split by the team size)."""
    want = exe.run(cases[0])
    exe.threads_per_run = 1
    try:
        got = exe.run(cases[0])
    finally:
        exe.threads_per_run = None
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_threads_per_run_sets_the_calling_threads_openmp_team():
    import ctypes

    max_threads = ctypes.CDLL("libgomp.so.1").omp_get_max_threads
    seen = {}

    def run(n):
        ember.runtime.lanes.OPENMP.use(n)
        seen[n] = max_threads()

    for n in (1, 3):  # each in a thread of its own: the setting is per thread
        t = threading.Thread(target=run, args=(n,))
        t.start()
        t.join()
    assert seen == {1: 1, 3: 3}


def test_a_loop_profile_sees_one_thread_per_run(exe, cases):
    from ember.profile.loops import profile_loops

    exe.threads_per_run = 1
    try:
        prof = profile_loops(exe, [cases[0]], depth=2, warmup=1, repeat=2)
    finally:
        exe.threads_per_run = None
    assert prof.rows and max(r.threads for r in prof.rows) == 1


def test_an_executable_is_freed_without_the_cycle_collector(model_path, cases):
    """Its memory (constants, pooled arenas) goes with its last reference, not at the next gc."""
    import gc
    import weakref

    exe = ember.compile(model_path, name="mobilenet_like")
    exe.run(cases[0])
    gc.disable()
    try:
        ref = weakref.ref(exe)
        del exe
        assert ref() is None
    finally:
        gc.enable()
