"""The oneDNN backend: blocked float32 convolutions and products by weights on oneDNN's
primitives, reading and writing Ember's buffers (convolutions in their blocked layout, which the
model takes in oneDNN's block); its exports say they need libdnnl. CI installs Debian's
libdnnl-dev (.ci/run)."""
import numpy as np
import pytest

import ember
from ember.errors import TargetError
from ember.kernels.common import vector_lanes
from ember.offload import get_backend
from ember.offload.onednn import _unavailable

from .test_reference import RNG, _model

pytestmark = pytest.mark.skipif(_unavailable() is not None, reason=f"oneDNN: {_unavailable()}")


@pytest.fixture(scope="module")
def compiled():
    m = _model()
    return ember.compile(m, wait=True, cache=False), ember.compile(m, wait=True, cache=False, offload=["onednn"])


def test_convolutions_run_on_onednn_jit_kernels_and_match(compiled, capfd, monkeypatch):
    own, off = compiled
    taken = [e for e in off.module.metadata["kernels"] if e.get("backend") == "onednn"]
    # (the first conv reads the 16-channel input unblocked: oneDNN's JIT takes that for 4 or
    # fewer channels only, so it stays Ember's; the depthwise one with its sigmoid is oneDNN's)
    assert sorted(e["name"] for e in taken) == ["fused_conv2d_nchwc_add", "fused_conv2d_nchwc_add_relu_1",
                                                "fused_conv2d_nchwc_sigmoid"], [e["name"] for e in taken]
    # (in oneDNN's JIT block, one vector: nChw16c on AVX-512, nChw8c on AVX2)
    lanes = vector_lanes(off.target, "float32")
    assert all(p["shape"][-1] == lanes for e in taken for p in e["params"] if len(p["shape"]) == 5)
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    np.testing.assert_allclose(off.run(x)[0], own.run(x)[0], rtol=1e-5, atol=1e-5)
    monkeypatch.setenv("EMBER_DNNL_VERBOSE", "1")  # (read when a primitive is made: other kernels)
    again = ember.compile(_model(10), wait=True, cache=False, offload=["onednn"])
    capfd.readouterr()
    again.run(RNG.standard_normal((1, 16, 10, 10)).astype(np.float32))
    err = capfd.readouterr().err
    assert err.count("ember onednn") == 3 and "ref:" not in err, err


def test_a_symbolic_batch_gets_a_primitive_per_size_a_run_brings(capfd, monkeypatch):
    """A user's file with a dynamic batch (timm's and TorchScript's exports): the convolutions
    are still oneDNN's, and every batch size runs, from several threads at once."""
    from concurrent.futures import ThreadPoolExecutor

    m = _model(batch="N")
    own = ember.compile(m, wait=True, cache=False)
    monkeypatch.setenv("EMBER_DNNL_VERBOSE", "1")
    off = ember.compile(m, wait=True, cache=False, offload=["onednn"])
    assert len([e for e in off.module.metadata["kernels"] if e.get("backend") == "onednn"]) == 3
    capfd.readouterr()
    xs = [RNG.standard_normal((n, 16, 12, 12)).astype(np.float32) for n in (1, 3, 2, 3, 1, 5, 2, 4)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda x: off.run(x)[0], xs))
    for x, y in zip(xs, got):
        np.testing.assert_allclose(y, own.run(x)[0], rtol=1e-5, atol=1e-5)
    made = [line for line in capfd.readouterr().err.splitlines() if "ember onednn" in line]
    assert len(made) == 3 * 5 and "ref:" not in "".join(made), made  # (three kernels, five batch sizes)


def test_an_export_needs_libdnnl(compiled, tmp_path, monkeypatch):
    own, off = compiled
    path = off.export(str(tmp_path / "m.so"))
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    np.testing.assert_allclose(ember.load(path).run(x)[0], own.run(x)[0], rtol=1e-5, atol=1e-5)
    from ember.runtime import requirements

    monkeypatch.setattr(requirements, "_loadable", lambda lib: lib != "libdnnl.so.2")
    with pytest.raises(TargetError, match="libdnnl.so.2.*oneDNN"):
        ember.load(path)


def test_the_backend_is_named_and_described():
    assert "oneDNN" in get_backend("onednn").doc


def test_auto_offloads_the_groups_whose_kernels_measured_faster():
    m = _model()
    own = ember.compile(m, wait=True, cache=False)
    exe = ember.compile(m, offload="auto", cache=False)
    choices, summary = exe.offload_choices, exe.offload_summary
    assert summary["backends"] == ["onednn"] and len(choices) == 3
    for c in choices.values():  # (the choice follows the two measured kernel times)
        assert c["backend"] == "onednn" and c["offloaded"] == (c["backend_s"] < c["ember_s"])
    # (the fastest end to end, Ember alone unless another wins by more than the margin in
    # every pass)
    from ember.compiler.offload import MARGIN, pick_configuration

    margin = {k: 1.0 if k == "ember_alone_s" else 1.0 + MARGIN for k in ("ember_alone_s", "chosen_s", "forced_s")}
    winners = {min(t, key=lambda k: t[k] * margin[k]) for t in summary["passes"]}
    assert len(summary["passes"]) == 2
    assert summary["picked"] == (winners.pop() if len(winners) == 1 else "ember_alone_s")
    assert pick_configuration([{"ember_alone_s": 1.0, "chosen_s": 0.9, "forced_s": 1.2},
                               {"ember_alone_s": 1.0, "chosen_s": 0.99, "forced_s": 1.2}]) == "ember_alone_s"
    assert pick_configuration([{"ember_alone_s": 1.0, "chosen_s": 0.9, "forced_s": 0.95}] * 2) == "chosen_s"
    want = {"ember_alone_s": set(), "forced_s": set(choices),
            "chosen_s": {g for g, c in choices.items() if c["offloaded"]}}[summary["picked"]]
    assert set(summary["offloaded"]) == want
    taken = {e["name"] for e in exe.module.metadata["kernels"] if e.get("backend")}
    assert taken == set(summary["offloaded"])
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    np.testing.assert_allclose(exe.run(x)[0], own.run(x)[0], rtol=1e-5, atol=1e-5)


def test_auto_keeps_its_choice_for_the_next_compile_of_the_file(tmp_path, monkeypatch):
    """A second compile of the same file with offload="auto" takes the first one's choice without
    measuring (every process then runs one configuration); cache=False neither reads nor keeps it."""
    import onnx

    from ember.compiler import offload as auto

    path = str(tmp_path / "m.onnx")
    onnx.save(_model(), path)
    first = ember.compile(path, offload="auto", wait=True)
    assert "kept" not in first.offload_summary

    def no_measuring(*a, **k):
        raise AssertionError("measured again")
    monkeypatch.setattr(auto, "_kernel_times", no_measuring)
    again = ember.compile(path, offload="auto", wait=True)
    assert again.offload_summary["kept"] and again.offload_choices == first.offload_choices
    assert again.offload_summary["picked"] == first.offload_summary["picked"]
    offloaded = lambda exe: sorted(e["name"] for e in exe.module.metadata["kernels"] if e.get("backend"))  # noqa: E731
    assert offloaded(again) == offloaded(first) == sorted(first.offload_summary["offloaded"])
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    np.testing.assert_array_equal(again.run(x)[0], first.run(x)[0])
    with pytest.raises(AssertionError, match="measured again"):
        ember.compile(path, offload="auto", wait=True, cache=False)
    # (a kept choice naming a backend this host lacks is measured again, not trusted)
    import json

    from ember.options import CompileOptions

    kept_at = auto._kept_path(path, CompileOptions.create(offload="auto"))
    with open(kept_at) as f:
        kept = json.load(f)
    assert auto._read_kept(kept_at) == kept
    with open(kept_at, "w") as f:
        json.dump({**kept, "backends": ["no_such_backend"]}, f)
    assert auto._read_kept(kept_at) is None


def test_two_models_of_one_architecture_keep_their_own_weights():
    """The same kernels (one library) for two models with other weights: each kernel keeps the
    weights reordered per buffer, and a freed model's buffers are forgotten, so a third model
    whose constants come to the same addresses gets its own."""
    import gc

    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    models = [_model() for _ in range(3)]
    want = [ember.compile(m, wait=True, cache=False).run(x)[0] for m in models]
    a, b = (ember.compile(m, wait=True, cache=False, offload=["onednn"]) for m in models[:2])
    assert a.module.path == b.module.path  # (one library: the same groups)
    np.testing.assert_allclose(a.run(x)[0], want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b.run(x)[0], want[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a.run(x)[0], want[0], rtol=1e-5, atol=1e-5)
    del a
    gc.collect()
    c = ember.compile(models[2], wait=True, cache=False, offload=["onednn"])
    np.testing.assert_allclose(c.run(x)[0], want[2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b.run(x)[0], want[1], rtol=1e-5, atol=1e-5)


def test_the_c_example_runs_an_export_with_offloaded_kernels(compiled, tmp_path):
    """examples/c/run_model.c, with no Python: the export links libdnnl itself."""
    import os
    import subprocess

    from ember.codegen.llvm.build import find_cc

    own, off = compiled
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "c", "run_model.c")
    run_model = str(tmp_path / "run_model")
    subprocess.run(find_cc() + ["-O2", f"-I{ember.c_include_dir()}", example, "-o", run_model, "-ldl", "-lm"],
                   check=True)
    so = off.export(str(tmp_path / "m.so"))
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    x.tofile(tmp_path / "x.bin")
    res = subprocess.run([run_model, so, f"{tmp_path / 'x.bin'}:1x16x12x12", "-o", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    want = own.run(x)[0]
    got = np.fromfile(tmp_path / "output_0.bin", np.float32).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _mlp(batch=2):
    """A transformer's MLP block: y = x + gelu(x @ w1 + b1) @ w2 + b2, then relu(y @ w3), over
    (batch, 16, 32) -- products of rows across two leading dims, a bias, GELU, a residual, ReLU."""
    from onnx import TensorProto as TP, helper as h, numpy_helper as nh

    w = {n: (RNG.standard_normal(s) * 0.2).astype(np.float32)
         for n, s in (("w1", (32, 64)), ("b1", (64,)), ("w2", (64, 32)), ("b2", (32,)), ("w3", (32, 48)))}
    nodes = [h.make_node("MatMul", ["x", "w1"], ["m1"]), h.make_node("Add", ["m1", "b1"], ["a1"]),
             h.make_node("Gelu", ["a1"], ["g"], domain="com.microsoft"),
             h.make_node("MatMul", ["g", "w2"], ["m2"]), h.make_node("Add", ["m2", "b2"], ["a2"]),
             h.make_node("Add", ["a2", "x"], ["y"]), h.make_node("MatMul", ["y", "w3"], ["m3"]),
             h.make_node("Relu", ["m3"], ["out"])]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", TP.FLOAT, [batch, 16, 32])],
                     [h.make_tensor_value_info("out", TP.FLOAT, [batch, 16, 48])],
                     [nh.from_array(v, n) for n, v in w.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])


def _own_and_offloaded(m, monkeypatch, **options):
    """``m`` compiled by Ember alone and with oneDNN (its primitives reported on stderr as they
    are made), and the kernels oneDNN took."""
    own = ember.compile(m, wait=True, cache=False, **options)
    monkeypatch.setenv("EMBER_DNNL_VERBOSE", "1")
    off = ember.compile(m, wait=True, cache=False, offload=["onednn"], **options)
    return own, off, [e["name"] for e in off.module.metadata["kernels"] if e.get("backend") == "onednn"]


@pytest.mark.parametrize("batch", [2, "N"])
def test_products_by_weights_run_on_onednn_matmul_with_their_epilogues(batch, capfd, monkeypatch):
    own, off, taken = _own_and_offloaded(_mlp(batch), monkeypatch)
    assert len(taken) == 3 and all("matmul" in n for n in taken), taken
    capfd.readouterr()
    for n in ((2,) if batch == 2 else (1, 3, 2)):
        x = RNG.standard_normal((n, 16, 32)).astype(np.float32)
        np.testing.assert_allclose(off.run(x)[0], own.run(x)[0], rtol=1e-5, atol=1e-5)
    made = [line for line in capfd.readouterr().err.splitlines() if "ember onednn" in line]
    assert len(made) == 3 * (1 if batch == 2 else 3) and "ref:" not in "".join(made), made


@pytest.mark.skipif(not __import__("ember").target.Target.host().has_feature("avx512bf16"),
                    reason="precision='bf16' needs a CPU with AVX512-BF16")
def test_bf16_products_run_on_onednn_in_bf16():
    m = _mlp(2)
    own = ember.compile(m, wait=True, cache=False, precision="bf16")
    off = ember.compile(m, wait=True, cache=False, precision="bf16", offload=["onednn"])
    taken = [e["name"] for e in off.module.metadata["kernels"] if e.get("backend") == "onednn"]
    # (the residual's product writes bf16 for the next: a sum post-op would add into bf16, so Ember's)
    assert sorted(taken) == ["fused_matmul_packed_add_gelu_cast", "fused_matmul_packed_relu"], taken
    x = RNG.standard_normal((2, 16, 32)).astype(np.float32)
    want = own.run(x)[0]
    np.testing.assert_allclose(off.run(x)[0], want, rtol=2e-2, atol=2e-2 * np.abs(want).max())


def _inverted_residual(batch=1):
    """MobileNetV2's block: a 1x1 expansion with ReLU6 (a Clip), a depthwise 3x3 (strided, then
    dilated) with ReLU6, a 1x1 projection and the residual add."""
    from onnx import TensorProto as TP, helper as h, numpy_helper as nh

    w = {n: (RNG.standard_normal(s) * 0.3).astype(np.float32)
         for n, s in (("e", (64, 32, 1, 1)), ("eb", (64,)), ("d", (64, 1, 3, 3)), ("db", (64,)),
                      ("d2", (64, 1, 3, 3)), ("p", (32, 64, 1, 1)), ("pb", (32,)), ("s", (32, 32, 3, 3)))}
    lo, hi = nh.from_array(np.float32(0.0), "lo"), nh.from_array(np.float32(6.0), "hi")
    nodes = [h.make_node("Conv", ["x", "s"], ["x1"], pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["x1", "e", "eb"], ["c0"]), h.make_node("Clip", ["c0", "lo", "hi"], ["r0"]),
             h.make_node("Conv", ["r0", "d", "db"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2], group=64),
             h.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
             h.make_node("Conv", ["r1", "d2"], ["c2"], pads=[2, 2, 2, 2], dilations=[2, 2], group=64),
             h.make_node("Conv", ["c2", "p", "pb"], ["c3"]),
             h.make_node("MaxPool", ["x1"], ["xp"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Add", ["c3", "xp"], ["y"])]
    g = h.make_graph(nodes, "ir", [h.make_tensor_value_info("x", TP.FLOAT, [batch, 32, 14, 14])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)],
                     [nh.from_array(v, n) for n, v in w.items()] + [lo, hi])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("batch", [1, "N"])
def test_depthwise_convolutions_and_relu6_run_on_onednn(batch, capfd, monkeypatch):
    own, off, taken = _own_and_offloaded(_inverted_residual(batch), monkeypatch)
    # (every conv but the first, which reads the 32-channel input unblocked)
    assert sorted(taken) == ["fused_conv2d_nchwc_1", "fused_conv2d_nchwc_add", "fused_conv2d_nchwc_add_clip",
                             "fused_conv2d_nchwc_add_clip_1"], taken
    capfd.readouterr()
    for n in ((1,) if batch == 1 else (1, 3)):
        x = RNG.standard_normal((n, 32, 14, 14)).astype(np.float32)
        np.testing.assert_allclose(off.run(x)[0], own.run(x)[0], rtol=1e-4, atol=1e-4)
    made = [line for line in capfd.readouterr().err.splitlines() if "ember onednn" in line]
    assert len(made) == 4 * (1 if batch == 1 else 2) and "ref:" not in "".join(made), made


@pytest.mark.skipif(not __import__("ember").target.Target.host().has_feature("avx512bf16"),
                    reason="precision='bf16' needs a CPU with AVX512-BF16")
def test_bf16_convolutions_run_on_onednn_in_bf16(capfd, monkeypatch):
    """With precision='bf16' the convs whose data are bf16 words in oneDNN's block run on its
    bf16 JIT kernels (the packed words unpacked once), writing bf16 for the next conv or float;
    the depthwise convs (float data in Ember's bf16 mode) on its float ones; what oneDNN would
    run on reference code (data in another block) or could not write (a float residual into a
    bf16 output) stays Ember's."""
    own, off, taken = _own_and_offloaded(_inverted_residual(), monkeypatch, precision="bf16")
    assert sorted(taken) == ["fused_conv2d_nchwc_add", "fused_conv2d_nchwc_add_clip", "fused_conv2d_nchwc_add_clip_1"], taken
    capfd.readouterr()
    x = RNG.standard_normal((1, 32, 14, 14)).astype(np.float32)
    want = own.run(x)[0]
    np.testing.assert_allclose(off.run(x)[0], want, rtol=1e-2, atol=1e-2 * np.abs(want).max())
    made = [line for line in capfd.readouterr().err.splitlines() if "ember onednn" in line]
    assert len(made) == 3 and sum("bf16" in line for line in made) == 2 and "ref:" not in "".join(made), made
