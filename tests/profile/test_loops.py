"""profile_loops on small ONNX models: counts cover exactly the timed runs, outputs unchanged."""
import csv
import io
import json

import numpy as np
import pytest

import ember
from ember.errors import ProfileError
from ember.profile import LoopProfile, build_instrumented, profile_loops
from ember.runtime.executable import Executable

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def conv_relu_model():
    """conv+relu, then a second conv: two kernels, one of them called once per run."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 3, 3, 3)).astype("float32")
    w2 = rng.standard_normal((4, 8, 1, 1)).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 10, 10])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def exe():
    return ember.compile(conv_relu_model())


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(1).standard_normal((1, 3, 10, 10)).astype("float32")


@pytest.fixture(scope="module")
def prof(exe, x):
    return profile_loops(exe, [x], depth=2, warmup=2, repeat=3)


def test_rows_cover_every_kernel_and_only_the_timed_runs(exe, prof):
    assert isinstance(prof, LoopProfile)
    names = [k[2] for k in exe.kernel_sources]
    # (two kernels, and a layout change back from channel blocks where a vector holds 8 filters)
    assert sorted(prof.kernels()) == sorted(names) and len(names) in (2, 3)
    per_run = {n: sum(1 for k, _ in exe.kernel_calls if k == n) for n in names}
    for n in names:
        rows = prof.rows_of(n)
        body = rows[0]
        assert (body.loop, body.depth, body.kind, body.percent) == (0, 0, "body", 100.0)
        assert body.calls == 3 * per_run[n]  # warm-up runs (the cold call) are not counted
        assert len(rows) > 1 and max(r.depth for r in rows) <= 2
        for r in rows:
            assert 0 <= r.records <= r.calls and r.median_cycles >= 0
            assert r.records == len(prof.records[(n, r.loop)])
            assert 1 <= r.threads or r.calls == 0
            assert r.cycles >= r.max_thread_cycles >= 0
            # a share of the kernel, also for loops that run on every thread of a parallel loop
            assert 0 <= r.percent <= 101, (r, prof.table(kernel=n))
        for r in rows[1:]:
            assert r.header.startswith(f"for {r.var} in {r.kind}(")
    assert np.isfinite(prof.overhead) and prof.cycles_per_second > 0
    assert prof.plain_seconds > 0 and prof.instrumented_seconds > 0


def test_instrumented_executable_gives_identical_outputs(exe, x):
    inst, sites, _ = build_instrumented(exe, depth=2)
    (a,), (b,) = exe.run(x), inst.run(x)
    assert a.tobytes() == b.tobytes()
    assert set(sites) == {k[2] for k in exe.kernel_sources}


def test_reports(prof):
    k = prof.kernels()[0]
    src = prof.kernel_source(k)
    lines = src.splitlines()
    for r in prof.rows_of(k):
        (line,) = [t for t in lines if t.endswith(f"# [L{r.loop}]")]
        assert (r.header in line) if r.loop else line.startswith(f"def {k}(")
    table = prof.table()
    assert all(f"kernel {n}" in table for n in prof.kernels())
    one = prof.table(kernel=k)
    assert f"kernel {k}" in one and len(one.splitlines()) == 3 + len(prof.rows_of(k))
    assert len(prof.table(top=1).splitlines()) == 3 + len(prof.rows_of(k))
    data = json.loads(json.dumps(prof.to_json()))
    assert len(data["rows"]) == len(prof.rows) and data["depth"] == 2
    parsed = list(csv.DictReader(io.StringIO(prof.to_csv())))
    assert len(parsed) == len(prof.rows) and parsed[0]["kernel"] == prof.rows[0].kernel
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        prof.kernel_source("nope")


def test_depth_zero_times_only_kernel_bodies(exe, x):
    p = profile_loops(exe, [x], depth=0, warmup=1, repeat=2)
    assert {r.loop for r in p.rows} == {0}


def test_executable_without_kernel_sources_is_refused(exe, x):
    loaded_like = Executable(exe.module, exe.program, exe.constants)  # what ember.load gives
    with pytest.raises(ProfileError, match="no kernel sources.*cannot be re-instrumented"):
        profile_loops(loaded_like, [x])
    with pytest.raises(ProfileError, match="repeat >= 1"):
        profile_loops(exe, [x], repeat=0)


@pytest.mark.slow
def test_the_default_depth_profiles_every_kernel_of_resnet50():
    """Depth 1 (the default) on a real model: a row per kernel, its cycles and the overhead's
    two times measured. (What the instrumentation costs is a benchmark's figure, ``python
    bench/overhead.py --loops``: a test that asserted it under 10% failed CI on a loaded machine.)"""
    from ember.bench.models import light_path

    model = ember.compile(light_path("resnet50"))
    image = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    p = profile_loops(model, [image], warmup=2, repeat=10)  # depth 1, the default
    assert p.depth == 1 and len(p.kernels()) == len(model.kernel_sources)
    assert p.plain_seconds > 0 and p.instrumented_seconds > 0 and np.isfinite(p.overhead)
    assert all(r.cycles >= 0 for r in p.rows) and sum(r.cycles for r in p.rows) > 0
