"""Offload: groups a backend takes run on the kernel it writes in C (the ``reference`` backend,
a direct convolution), on the program's own buffers, matching Ember's kernels; exports,
profiles and concurrent runs see them as kernels like any other."""
import threading

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import ember
from ember.errors import ArgumentError

RNG = np.random.default_rng(5)


def _init(name, shape):
    return nh.from_array((RNG.standard_normal(shape) * 0.2).astype(np.float32), name)


def _model(size: int = 12, batch=1):
    """Conv+bias+ReLU (3x3, its input unblocked), a strided one, a 1x1 with a residual add, and
    a depthwise conv with a sigmoid (which the backend does not take); ``batch`` may be a
    symbol."""
    nodes = [h.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c0"], ["r0"]),
             h.make_node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2"], ["c2"]), h.make_node("Add", ["c2", "r1"], ["a2"]),
             h.make_node("Conv", ["a2", "w3"], ["c3"], pads=[1, 1, 1, 1], group=32),
             h.make_node("Sigmoid", ["c3"], ["y"])]
    inits = [_init("w0", (32, 16, 3, 3)), _init("b0", (32,)), _init("w1", (32, 32, 3, 3)), _init("b1", (32,)),
             _init("w2", (32, 32, 1, 1)), _init("w3", (32, 1, 3, 3))]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [batch, 16, size, size])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _backends(exe) -> dict:
    return {e["name"]: e.get("backend") for e in exe.module.metadata["kernels"]}


@pytest.fixture(scope="module")
def compiled():
    m = _model()
    return m, ember.compile(m, wait=True, cache=False), ember.compile(m, wait=True, cache=False, offload=["reference"])


def test_the_groups_it_takes_run_on_its_kernels_and_match(compiled):
    _, own, off = compiled
    backends = _backends(off)
    taken = sorted(k for k, b in backends.items() if b == "reference")
    assert len(taken) == 3, backends  # (the three dense convs and their epilogues)
    assert not any(_backends(own).values())
    assert any(b is None and "conv" in k for k, b in backends.items())  # (the depthwise one stays Ember's)
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    np.testing.assert_allclose(off.run(x)[0], own.run(x)[0], rtol=1e-5, atol=1e-5)


def test_profiles_name_the_backend_and_threads_share_its_kernels(compiled):
    _, own, off = compiled
    rows = off.profile(RNG.standard_normal((1, 16, 12, 12)).astype(np.float32), warmup=1, repeat=2).rows
    assert sum(r.kernel.endswith(" [reference]") for r in rows) == 3
    xs = [RNG.standard_normal((1, 16, 12, 12)).astype(np.float32) for _ in range(4)]
    want = [own.run(x)[0] for x in xs]
    got = [None] * 4

    def run(k):
        for _ in range(5):
            got[k] = off.run(xs[k])[0]
    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_an_export_carries_the_offloaded_kernels(compiled, tmp_path):
    _, own, off = compiled
    path = off.export(str(tmp_path / "m.so"))
    loaded = ember.load(path)
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    np.testing.assert_allclose(loaded.run(x)[0], own.run(x)[0], rtol=1e-5, atol=1e-5)


def test_an_unknown_backend_is_named_with_the_known_ones():
    with pytest.raises(ArgumentError, match="no offload backend 'cudnn'.*reference"):
        ember.compile(_model(), offload=["cudnn"])


def test_ember_compile_offload_writes_a_library_that_runs(tmp_path):
    import onnx

    from ember.cli_model import compile_main

    path = tmp_path / "m.onnx"
    onnx.save(_model(), str(path))
    out = tmp_path / "m.so"
    assert compile_main([str(path), "--offload", "reference", "-o", str(out)]) == 0
    loaded = ember.load(str(out))
    assert sum(e.get("backend") == "reference" for e in loaded.module.metadata["kernels"]) == 3




@pytest.mark.parametrize("where", ["module", "script"])
def test_an_offloaded_kernel_that_fails_is_named_with_its_backend(where, monkeypatch):
    """A backend's kernel returning non-zero raises an EmberError naming the kernel and the
    backend, not Ember's scratch-allocation failure. The backend is registered by its module:
    a compile worker imports it by name to make the kernels; one registered in a script
    (``__main__``, which a worker cannot import) has its kernels made in the compiling process."""
    from ember.errors import EmberError
    from ember.offload import _BACKENDS
    from ember.testing import failing_backend

    _BACKENDS.pop("failing", None)
    monkeypatch.setitem(_BACKENDS, "failing", failing_backend.FAILING)  # (gone after the test: auto's list)
    if where == "script":
        monkeypatch.setattr(failing_backend._source, "__module__", "__main__")
    exe = ember.compile(_model(), wait=True, cache=False, offload=["failing"])
    with pytest.raises(EmberError, match=r"kernel 'fused_conv2d_nchwc_add_relu\w*' failed: its offload backend "
                                         r"'failing' failed"):
        exe.run(RNG.standard_normal((1, 16, 12, 12)).astype(np.float32))
