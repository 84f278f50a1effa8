"""Lanes: a finished run leaves nothing of itself behind on the lane that ran it; native and
Python jobs share one lane, through the native hand-off (spinning or asleep) or the locks it
falls back to, and many callers at once neither hang nor mix their answers."""
import gc
import threading
import weakref

import numpy as np
import pytest

import ember
from ember.runtime import executable, handoff
from ember.runtime.lanes import Lanes


class Payload:  # stands for a run's executable and arrays
    pass


def test_a_lane_does_not_keep_the_last_runs_closure_or_result():
    lanes = Lanes()
    held, result = Payload(), Payload()
    ref_held, ref_result = weakref.ref(held), weakref.ref(result)
    got = lanes.execute(1, lambda: (held, result)[1])
    assert got is result
    del held, result, got
    gc.collect()
    assert ref_held() is None and ref_result() is None


def test_an_exception_is_handed_back_and_not_kept():
    lanes = Lanes()
    held = Payload()
    ref = weakref.ref(held)

    def fail():
        raise ValueError(repr(held))

    try:
        lanes.execute(1, fail)
    except ValueError:
        pass
    else:
        raise AssertionError("the lane's exception was not raised")
    del held, fail
    gc.collect()
    assert ref() is None


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from tests.runtime.test_concurrency import mobilenet_like

    exe = ember.compile(mobilenet_like(str(tmp_path_factory.mktemp("lanes") / "m.onnx")), wait=True)
    assert exe.native  # (runs are native jobs)
    return exe


def _lanes(native: bool, spin_ns: int, monkeypatch) -> Lanes:
    if not native:
        monkeypatch.setattr(handoff, "functions", lambda: None)
    lanes = Lanes(lane_spin_ns=spin_ns)
    monkeypatch.setattr(executable, "LANES", lanes)
    return lanes


@pytest.mark.parametrize("native,spin_ns", [(True, 0), (True, 10_000_000), (False, 0)],
                         ids=["native-asleep", "native-spinning", "locks"])
def test_native_and_python_jobs_share_a_lane(model, native, spin_ns, monkeypatch):
    if native and not handoff.available():
        pytest.skip("no native hand-off on this platform")
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    want = [np.array(y) for y in model.run(x)]
    lanes = _lanes(native, spin_ns, monkeypatch)
    for _ in range(3):
        got = model.run(x)  # a native job
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        me = threading.get_ident()
        assert lanes.execute(2, threading.get_ident) != me  # a Python job, on the lane
        model.profile(x, warmup=0, repeat=1)  # a Python job that calls kernels one by one
    assert lanes.lanes_made == 1  # one lane served them all: one team of threads


@pytest.mark.parametrize("spin_ns", [0, 10_000_000], ids=["asleep", "spinning"])
def test_many_callers_through_the_native_hand_off(model, spin_ns, monkeypatch):
    if not handoff.available():
        pytest.skip("no native hand-off on this platform")
    lanes = _lanes(True, spin_ns, monkeypatch)
    model.max_concurrent_runs = 2
    try:
        xs = [np.random.default_rng(k).standard_normal((1, 3, 32, 32)).astype(np.float32) for k in range(4)]
        want = [model.run(x)[0] for x in xs]
        bad = []

        def client(k):
            for _ in range(50):
                if not np.array_equal(model.run(xs[k])[0], want[k]):
                    bad.append(k)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a caller never got its run back"
        assert not bad
        assert lanes.lanes_made <= 2  # (two runs in flight at most: two lanes)
    finally:
        model.max_concurrent_runs = None


def test_a_run_inside_a_lane_runs_there(model, monkeypatch):
    lanes = _lanes(handoff.available(), 0, monkeypatch)
    x = np.zeros((1, 3, 32, 32), np.float32)
    want = model.run(x)[0]
    got = lanes.execute(2, lambda: model.run(x)[0])  # the native job of a run inside a Python job
    np.testing.assert_array_equal(got, want)
    assert lanes.lanes_made == 1


def test_a_loaded_export_runs_without_importing_llvmlite(model, tmp_path):
    """A process that only loads exports keeps its runtime free of LLVM, and its lanes still
    hand off natively: through the functions the export's library carries, not a JIT."""
    import os
    import subprocess
    import sys
    import textwrap

    path = model.export(str(tmp_path / "m.so"))
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "want.npy", model.run(x)[0])
    code = textwrap.dedent(f"""
        import sys, numpy as np, ember
        exe = ember.load({path!r})
        x = np.load({str(tmp_path / 'x.npy')!r})
        for _ in range(3):
            y = exe.run(x)[0]
        assert "llvmlite.binding" not in sys.modules, "running a loaded export imported llvmlite"
        from ember.runtime import handoff
        assert handoff.available() and handoff._FNS[0]._name == {path!r}, handoff._FNS
        print(float(np.abs(y - np.load({str(tmp_path / 'want.npy')!r})).max()))
    """)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=repo)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == 0.0
