"""Tiered compilation: tier-0 kernels compute what tier 1 does, a tiered executable switches
over while it runs (from several threads), and a build that fails leaves tier 0 running."""
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.compiler import build as build_mod
from ember.compiler.executable import Executable
from ember.codegen.llvm import build_made
from ember.compiler.tier0 import constant_params, kernel_names, remap_program, tier0_kernels
from ember.compiler.tiered import TieredExecutable

RNG = np.random.default_rng(0)


def _init(name, shape, scale=0.2):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _model(nodes, inits, inputs, outputs, path):
    import onnx

    g = helper.make_graph(nodes, "m", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))
    return str(path)


def cnn(path, batch="N"):
    """Convs (dense, strided, depthwise, grouped, 1x1), pools, a residual add, global pooling
    and a Gemm: a dozen fused groups of every kind a CNN has."""
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], group=16),
             helper.make_node("Sigmoid", ["c1"], ["s1"]),
             helper.make_node("Mul", ["c1", "s1"], ["m1"]),
             helper.make_node("Conv", ["m1", "w2"], ["c2"], group=4),
             helper.make_node("Add", ["c2", "p0"], ["a2"]),
             helper.make_node("Conv", ["a2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("AveragePool", ["c3"], ["p3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["p3", "lo", "hi"], ["h3"]),
             helper.make_node("GlobalAveragePool", ["h3"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y0"], transB=1),
             helper.make_node("Softmax", ["y0"], ["y"], axis=-1)]
    inits = [_init("w0", (16, 3, 3, 3)), _init("w1", (16, 1, 3, 3)), _init("b1", (16,)),
             _init("w2", (16, 4, 1, 1)), _init("w3", (24, 16, 3, 3)), _init("b3", (24,)),
             numpy_helper.from_array(np.float32(-1.0), "lo"), numpy_helper.from_array(np.float32(1.5), "hi"),
             _init("fc", (10, 24)), _init("fb", (10,))]
    return _model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 20, 20])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])], path)


def encoder(path):
    """A transformer block: layer norms, attention's products and softmax, a GELU MLP."""
    D, H = 32, 4
    nodes = [helper.make_node("LayerNormalization", ["x", "g1", "b1"], ["n1"], axis=-1),
             helper.make_node("MatMul", ["n1", "wq"], ["q"]), helper.make_node("MatMul", ["n1", "wk"], ["k"]),
             helper.make_node("MatMul", ["n1", "wv"], ["v"]),
             *[helper.make_node("Reshape", [t, "heads"], [t + "h"]) for t in "qkv"],
             helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["vh"], ["vt"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["qt", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Softmax", ["ss"], ["pr"], axis=-1),
             helper.make_node("MatMul", ["pr", "vt"], ["o"]),
             helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["ot", "flat"], ["of"]),
             helper.make_node("MatMul", ["of", "wo"], ["proj"]),
             helper.make_node("Add", ["x", "proj"], ["r1"]),
             helper.make_node("LayerNormalization", ["r1", "g2", "b2"], ["n2"], axis=-1),
             helper.make_node("MatMul", ["n2", "w1"], ["h1"]), helper.make_node("Add", ["h1", "c1"], ["h1b"]),
             helper.make_node("Gelu", ["h1b"], ["ge"], domain="com.microsoft"),
             helper.make_node("MatMul", ["ge", "w2"], ["h2"]),
             helper.make_node("Add", ["r1", "h2"], ["y"])]
    inits = [_init("g1", (D,)), _init("b1", (D,)), _init("g2", (D,)), _init("b2", (D,)),
             _init("wq", (D, D)), _init("wk", (D, D)), _init("wv", (D, D)), _init("wo", (D, D)),
             _init("w1", (D, 64)), _init("c1", (64,)), _init("w2", (64, D)),
             numpy_helper.from_array(np.array([0, 0, H, D // H], np.int64), "heads"),
             numpy_helper.from_array(np.array([0, 0, D], np.int64), "flat"),
             numpy_helper.from_array(np.float32(0.35), "scale")]
    import onnx

    g = helper.make_graph(nodes, "enc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 12, D])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12, D])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(m, str(path))
    return str(path)


def _tier0_of(exe, split: bool = False) -> Executable:
    """``exe``'s program with every group on its tier-0 kernel (its constant weights known, as
    a tiered build knows them); ``split``: anchors apart from their epilogues, as a tiered build
    runs a static program."""
    from ember.compiler.tier0 import call_sizes

    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=split,
                                 sizes=call_sizes(exe.program))

    return Executable(build_made(jobs, exe.target), remap_program(exe.program, chosen), exe.constants)


@pytest.mark.parametrize("make,shape,batch", [(cnn, (2, 3, 20, 20), "N"), (encoder, (2, 12, 32), None),
                                              (cnn, (2, 3, 20, 20), 2)])
def test_tier0_kernels_compute_what_tier1_does(tmp_path, make, shape, batch):
    from ember.compiler.tier0_split import splittable

    path = make(tmp_path / "m.onnx") if batch is None else make(tmp_path / "m.onnx", batch=batch)
    exe = ember.compile(path, wait=True)
    x = RNG.standard_normal(shape).astype(np.float32)
    for split in (False, True) if splittable(exe.program) else (False,):
        t0 = _tier0_of(exe, split)
        assert all(c["kernel"].startswith("tier0_") for c in t0.program["calls"])
        np.testing.assert_allclose(t0.run(x)[0], exe.run(x)[0], rtol=1e-4, atol=1e-5)


def test_a_tier0_product_keeps_several_accumulators(tmp_path):
    """Each of a tier-0 product's output vectors is a chain of dependent FMAs: four vectors of
    columns accumulate side by side (the encoder's 64-column MLP product), each one's sums in
    the order of tier 1's; so do they with the product run apart from its epilogue, its
    columns a size (a multiple of 4 vectors: 64*s on AVX-512, 32*s on AVX2)."""
    from ember.compiler.tier0 import make_tier0_kernel
    from ember.kernels.common import vector_lanes
    from ember.loop.stmt import For, Store
    from ember.loop.visit import walk

    exe = ember.compile(encoder(tmp_path / "e.onnx"), wait=True)
    sized = f"units={4 * vector_lanes(exe.target, 'float32')}*s"
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program))
    mlp = [fn for *_, fn, _ in jobs if "nn.matmul_packed" in str(fn) and "units=64" in str(fn)]
    apart = [fn for *_, fn, _ in tier0_kernels(exe.groups, constant_params(exe.program), split=True)[0]
             if "nn.matmul_packed" in str(fn)]
    assert len(mlp) == 1 and any(sized in str(fn) for fn in apart)
    for fn in mlp + [fn for fn in apart if sized in str(fn)]:
        func, _ = make_tier0_kernel(fn, "k", exe.target)
        loops = [n for n in walk(func) if isinstance(n, For) and n.kind == "serial"
                 and any(isinstance(m, Store) and m.buffer.scope == "local" for m in walk(n.body))]
        inner = min(loops, key=lambda n: sum(1 for _ in walk(n)))
        assert sum(isinstance(m, Store) for m in walk(inner.body)) == 4


def test_tier0_kernels_are_shared_and_take_sizes(tmp_path):
    """Groups that differ only in sizes share one shape-generic tier-0 kernel, named by what it
    computes (so any model with such a group finds it in the cache)."""
    path = cnn(tmp_path / "m.onnx")
    exe = ember.compile(path, wait=True)
    jobs, chosen = tier0_kernels(exe.groups)
    assert len({n for n, _ in chosen.values()}) == len(jobs)
    generic = [(n, sizes) for n, sizes in chosen.values() if sizes]
    assert generic, "no group generalized"
    again = tier0_kernels(ember.compile(cnn(tmp_path / "m2.onnx"), wait=True).groups)[1]
    assert sorted(n for n, _ in again.values()) == sorted(n for n, _ in chosen.values())


def widths(path):
    """3x3 convs + ReLU of 64 -> 96 -> 128 -> 64 channels, then depthwise convs of 64 and 128
    channels around a 1x1: convolutions that differ only in their widths."""
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "d0"], ["e0"], pads=[1, 1, 1, 1], group=64),
             helper.make_node("Conv", ["e0", "w3"], ["c3"]),
             helper.make_node("Conv", ["c3", "d1"], ["y"], pads=[1, 1, 1, 1], group=128)]
    inits = [_init("w0", (96, 64, 3, 3), 0.05), _init("w1", (128, 96, 3, 3), 0.05), _init("w2", (64, 128, 3, 3), 0.05),
             _init("d0", (64, 1, 3, 3)), _init("w3", (128, 64, 1, 1), 0.1), _init("d1", (128, 1, 3, 3))]
    return _model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 10, 10])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128, 10, 10])], path)


def test_convolutions_of_every_width_share_a_tier0_kernel(tmp_path):
    """A blocked conv's tier-0 kernel takes its filters and channels as sizes (its window and
    block static): the 3x3 convs share one kernel, the depthwise ones another."""
    exe = ember.compile(widths(tmp_path / "w.onnx"), wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program))
    kernel = {g: n for g, (n, _) in chosen.items()}
    # (the first conv reads the input unblocked; the 1x1 has a kernel of its own)
    assert kernel["fused_conv2d_nchwc_relu_1"] == kernel["fused_conv2d_nchwc_relu_2"]
    assert kernel["fused_conv2d_nchwc"] == kernel["fused_conv2d_nchwc_2"]  # (depthwise, 64 and 128)
    assert len(set(kernel.values())) == 5
    x = RNG.standard_normal((1, 64, 10, 10)).astype(np.float32)
    np.testing.assert_allclose(_tier0_of(exe).run(x)[0], exe.run(x)[0], rtol=1e-4, atol=1e-5)


def test_convolutions_of_unblocked_data_share_a_tier0_kernel(tmp_path):
    """A conv reading its data unblocked (N C H W: a model's input, a concat's channels that
    no block divides) takes its channels and filter blocks as sizes at tier 0 too."""
    nodes = [helper.make_node("Conv", ["a", "wa"], ["ca"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["b", "wb"], ["cb"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["ca", "cb"], ["y"], axis=1)]
    inits = [_init("wa", (32, 3, 3, 3)), _init("wb", (32, 5, 3, 3))]
    path = _model(nodes, inits, [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 3, 12, 12]),
                                 helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 5, 12, 12])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 12, 12])], tmp_path / "u.onnx")
    exe = ember.compile(path, wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=True)
    convs = {n for c in chosen.values() for n in kernel_names(c) if "conv2d" in n}
    assert len(convs) == 1, convs
    a = RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)
    b = RNG.standard_normal((1, 5, 12, 12)).astype(np.float32)
    t0 = Executable(build_made(jobs, exe.target), remap_program(exe.program, chosen), exe.constants)
    np.testing.assert_allclose(t0.run(a, b)[0], exe.run(a, b)[0], rtol=1e-4, atol=1e-5)


@pytest.fixture
def cold(monkeypatch, tmp_path):
    """A fresh kernel cache, and tiers for builds of any size."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build_mod, "TIER_MIN_KERNELS", 1)
    return tmp_path


def test_compile_returns_at_tier0_and_switches_to_tier1(cold):
    path = cnn(cold / "m.onnx")
    ref = ember.compile(path, wait=True, cache=False)  # (a different cache key: cache=False)
    import shutil

    shutil.rmtree(cold / "cache")
    exe = ember.compile(path)
    assert isinstance(exe, TieredExecutable)
    info = exe.tier_info
    assert set(info.tiers) == {g for g, _ in ref.groups}
    x = RNG.standard_normal((3, 3, 20, 20)).astype(np.float32)
    want = ref.run(x)[0]
    np.testing.assert_allclose(exe.run(x)[0], want, rtol=1e-4, atol=1e-5)
    assert exe.wait(timeout=300)
    info = exe.tier_info
    assert info.done and info.error is None and set(info.tiers.values()) == {1} and info.switches
    assert not any(c["kernel"].startswith("tier0_") for c in exe.program["calls"])
    np.testing.assert_allclose(exe.run(x)[0], want, rtol=1e-5, atol=1e-6)
    # the all-tier-1 build is what the cache keeps: the next compile waits for nothing
    assert not isinstance(ember.compile(path), TieredExecutable)


def test_runs_from_threads_while_tiers_switch(cold, monkeypatch):
    """Four threads run the model in a loop while the background build switches the groups
    over in batches: every result matches; no run sees a half-switched program."""
    monkeypatch.setattr(build_mod, "_batches", lambda n: min(n, 4))
    path = encoder(cold / "m.onnx")
    ref = ember.compile(path, wait=True, cache=False)
    import shutil

    shutil.rmtree(cold / "cache")
    exe = ember.compile(path)
    assert isinstance(exe, TieredExecutable)
    xs = [RNG.standard_normal((2, 12, 32)).astype(np.float32) for _ in range(4)]
    wants = [ref.run(x)[0] for x in xs]
    errors, runs = [], [0] * 4

    def loop(k):
        try:
            while True:
                done = exe.tier_info.done
                np.testing.assert_allclose(exe.run(xs[k])[0], wants[k], rtol=1e-4, atol=1e-5)
                runs[k] += 1
                if done:
                    return
        except BaseException as e:  # (reported by the main thread)
            errors.append(e)
    threads = [threading.Thread(target=loop, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[0]
    assert exe.tier_info.done and len(exe.tier_info.switches) >= 2
    assert all(r >= 1 for r in runs)


def test_a_failed_tier1_build_keeps_tier0_running(cold, monkeypatch):
    from ember.codegen.llvm import objects
    from ember.errors import CompileError

    real = objects.compile_made_objects

    def fail(*a, **k):
        if objects._BACKGROUND.get():  # (the tier-0 build, in the foreground, goes through)
            raise CompileError("no tier 1 today")
        return real(*a, **k)
    monkeypatch.setattr(objects, "compile_made_objects", fail)
    monkeypatch.setattr(build_mod, "_batches", lambda n: 2)
    path = cnn(cold / "m.onnx")
    exe = ember.compile(path)
    assert isinstance(exe, TieredExecutable)
    with pytest.raises(CompileError, match="no tier 1 today"):
        exe.wait(timeout=300)
    info = exe.tier_info
    assert not info.done and isinstance(info.error, CompileError) and set(info.tiers.values()) == {0}
    x = RNG.standard_normal((1, 3, 20, 20)).astype(np.float32)
    assert exe.run(x)[0].shape == (1, 10)


def test_settings_follow_the_switch_and_export_waits(cold):
    path = cnn(cold / "m.onnx")
    exe = ember.compile(path)
    assert isinstance(exe, TieredExecutable)
    exe.threads_per_run = 1
    out = exe.export(str(cold / "m.so"))
    assert exe.tier_info.done and exe.threads_per_run == 1
    loaded = ember.load(out)
    x = RNG.standard_normal((2, 3, 20, 20)).astype(np.float32)
    np.testing.assert_allclose(loaded.run(x)[0], exe.run(x)[0], rtol=1e-6)


def test_wait_compiles_everything_first(cold):
    exe = ember.compile(cnn(cold / "m.onnx"), wait=True)
    assert not isinstance(exe, TieredExecutable)


def test_heavy_groups_compile_at_tier1_first(cold, monkeypatch):
    """A group doing at least HEAVY_FLOPS per run (a conv CONV_HEAVY_FACTOR times that) gets
    its tier-1 kernel in the first build; where every missing group is heavy, the compile
    simply waits for them."""
    path = cnn(cold / "m.onnx", batch=2)
    # (the first conv, 0.69 MFLOP, and no more: the 3x3 one of 0.35 MFLOP counts 69k)
    monkeypatch.setattr(build_mod, "HEAVY_FLOPS", 100_000)
    exe = ember.compile(path)
    assert isinstance(exe, TieredExecutable)
    first = {g for g, t in exe.tier_info.tiers.items() if t == 1}
    assert first and any("conv" in g for g in first) and exe.tier_info.at_tier0
    x = RNG.standard_normal((2, 3, 20, 20)).astype(np.float32)
    got = exe.run(x)[0]
    exe.wait(300)
    np.testing.assert_allclose(got, exe.run(x)[0], rtol=1e-4, atol=1e-5)
    monkeypatch.setattr(build_mod, "HEAVY_FLOPS", 0)
    assert not isinstance(ember.compile(encoder(cold / "e.onnx")), TieredExecutable)


def test_a_process_exiting_mid_build_leaves_the_cache_whole(cold):
    """A script that compiles, runs once and exits while tier 1 compiles: it exits cleanly, no
    partial object is left, and the next process compiles and runs from what landed."""
    import subprocess
    import sys

    path = cnn(cold / "m.onnx")
    code = ("import sys, numpy as np, ember\n"
            "exe = ember.compile(sys.argv[1])\n"
            "print(type(exe).__name__, exe.run(np.ones((1, 3, 20, 20), np.float32))[0].shape)\n")
    import os

    env = dict(os.environ)
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "(1, 10)" in r.stdout
    left = [f for f in os.listdir(cold / "cache" / "objects") if f.startswith(".obj-")]
    assert not left


def test_grouped_convolutions_with_biases_of_every_width_share_a_tier0_kernel(tmp_path):
    """A grouped conv's weights keep their group width static, its bias (a constant too) goes
    generic like the activations: RegNet's grouped convs with a bias, each stage another width,
    share one tier-0 kernel."""
    nodes = [helper.make_node("Conv", ["x", "q"], ["x1"]),  # (the input read blocked by the convs after)
             helper.make_node("Conv", ["x1", "g0", "b0"], ["c0"], pads=[1, 1, 1, 1], group=8),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "p", "pb"], ["c1"]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "g1", "b1"], ["c2"], pads=[1, 1, 1, 1], group=16),
             helper.make_node("Relu", ["c2"], ["y"])]
    inits = [_init("q", (64, 64, 1, 1), 0.1), _init("g0", (64, 8, 3, 3)), _init("b0", (64,)),
             _init("p", (128, 64, 1, 1), 0.1), _init("pb", (128,)),
             _init("g1", (128, 8, 3, 3)), _init("b1", (128,))]
    path = _model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 10, 10])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128, 10, 10])], tmp_path / "g.onnx")
    exe = ember.compile(path, wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program))
    grouped = {n for g, (n, _) in chosen.items() if "groups=" in str(dict(exe.groups)[g])}
    assert len(grouped) == 1, grouped
    x = RNG.standard_normal((1, 64, 10, 10)).astype(np.float32)
    np.testing.assert_allclose(_tier0_of(exe).run(x)[0], exe.run(x)[0], rtol=1e-4, atol=1e-5)


def windows(path):
    """Swin's window partition at two stages: (1, 12, 12, 8) into 3x3 windows -- reshape to
    (1, 4, 3, 4, 3, 8), swap the middle axes, flatten to (144, 8) -- and (1, 6, 6, 16) likewise,
    (1, 2, 3, 2, 3, 16) to (36, 16): shapes given as constants, of sizes no input has."""
    nodes, inits = [], []
    for s, n, c in (("a", 4, 8), ("b", 2, 16)):
        inits += [numpy_helper.from_array(np.array([1, n, 3, n, 3, c], np.int64), f"w{s}"),
                  numpy_helper.from_array(np.array([n * n * 9, c], np.int64), f"f{s}")]
        nodes += [helper.make_node("Reshape", [f"x{s}", f"w{s}"], [f"r{s}"]),
                  helper.make_node("Transpose", [f"r{s}"], [f"t{s}"], perm=[0, 1, 3, 2, 4, 5]),
                  helper.make_node("Reshape", [f"t{s}", f"f{s}"], [f"y{s}"])]
    ins = [helper.make_tensor_value_info("xa", TensorProto.FLOAT, [1, 12, 12, 8]),
           helper.make_tensor_value_info("xb", TensorProto.FLOAT, [1, 6, 6, 16])]
    outs = [helper.make_tensor_value_info("ya", TensorProto.FLOAT, [144, 8]),
            helper.make_tensor_value_info("yb", TensorProto.FLOAT, [36, 16])]
    return _model(nodes, inits, ins, outs, path)


def test_shapes_given_as_constants_go_generic_at_tier0(tmp_path):
    """A reshape's sizes that no input dim has (a stage's window count) become sizes of the
    tier-0 kernel too, each call passing its own, and so does a short last axis (a stage's
    channels; tier 1 keeps it static for its vectors): both stages' partitions share one kernel."""
    exe = ember.compile(windows(tmp_path / "w.onnx"), wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program))
    assert len(exe.groups) == 2 and len(jobs) == 1
    a, b = RNG.standard_normal((1, 12, 12, 8)).astype(np.float32), RNG.standard_normal((1, 6, 6, 16)).astype(np.float32)
    for got, want in zip(_tier0_of(exe).run(a, b), exe.run(a, b)):
        np.testing.assert_array_equal(got, want)


def _conv_then(path, act: str):
    """A 3x3 conv (bias) of 16 -> 32 channels, then ``act`` ("relu" or "silu") and a 1x1 conv."""
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1])]
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c0"], ["a0"]))
    else:
        nodes += [helper.make_node("Sigmoid", ["c0"], ["s0"]), helper.make_node("Mul", ["c0", "s0"], ["a0"])]
    nodes.append(helper.make_node("Conv", ["a0", "w1"], ["y"]))
    inits = [_init("w0", (32, 16, 3, 3), 0.1), _init("b0", (32,)), _init("w1", (16, 32, 1, 1), 0.1)]
    return _model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 12])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 12, 12])], path)


def test_a_static_program_runs_anchors_apart_from_their_epilogues(tmp_path):
    """In a static program a tier-0 conv and its epilogue are two kernels through a scratch
    buffer: models whose convs differ only in their activation share the conv's kernel, and the
    split program computes what tier 1 does."""
    from ember.compiler.tier0 import kernel_names
    from ember.compiler.tier0_split import Split, splittable


    names = []
    for act in ("relu", "silu"):
        exe = ember.compile(_conv_then(tmp_path / f"{act}.onnx", act), wait=True)
        assert splittable(exe.program)
        jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=True)
        split = [c for c in chosen.values() if isinstance(c, Split)]
        assert split, "no group split"
        names.append({n for c in split for n in kernel_names(c)})
        prog = remap_program(exe.program, chosen)
        assert len(prog["calls"]) == len(exe.program["calls"]) + len(split)
        assert prog["arena_bytes"] > exe.program["arena_bytes"]
        t0 = Executable(build_made(jobs, exe.target), prog, exe.constants)
        x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
        np.testing.assert_allclose(t0.run(x)[0], exe.run(x)[0], rtol=1e-4, atol=1e-5)
    shared = names[0] & names[1]
    assert any(n.startswith("tier0_conv2d") for n in shared)  # (the 3x3 conv's, its bias add apart)
    assert names[0] != names[1]  # (the activations)


def test_a_symbolic_program_keeps_its_groups_whole(tmp_path):
    """A program planned per run (a symbolic batch) is not split."""
    from ember.compiler.tier0_split import splittable

    exe = ember.compile(cnn(tmp_path / "m.onnx"), wait=True)
    assert not splittable(exe.program)


def test_an_anchor_alone_takes_its_ones_as_sizes():
    """A conv alone (a split group's anchor) reads no operand broadcast, so its dims of 1 -- one
    channel block, one block of filters -- go generic too (its batch not): a conv of one block
    and one of several share a tier-0 kernel."""
    from ember.compiler.tier0 import _tier0_function
    from ember.graph.ir import Function, Var
    from ember.graph.passes.context import typed_call
    from ember.graph.printer import astext
    from ember.graph.types import TensorType

    def conv(n, cin, cout):
        x = Var("p0", TensorType((n, cin, 8, 8, 16), "float32"))
        w = Var("p1", TensorType((cout, cin * 16, 3, 3, 16), "float32"))
        return Function([x, w], typed_call("nn.conv2d_nchwc", [x, w], {"padding": (1, 1, 1, 1)}, None))

    (f1, s1), (f2, s2) = (_tier0_function(conv(1, 1, 1), frozenset({1})),
                          _tier0_function(conv(1, 3, 2), frozenset({1})))
    assert astext(f1) == astext(f2) and s1 != s2
    assert 1 in s1.values()


def rolls(path):
    """Swin's window shift (``torch.roll`` by 3 rows: the last 3 rows, then the others) at two
    stages, (1, 28, 28, 96) and (1, 14, 14, 192): tier 1 computes both with one shape-generic
    kernel, each call passing its sizes."""
    nodes, inits = [], []
    for s, n, c in (("a", 28, 96), ("b", 14, 192)):
        inits += [numpy_helper.from_array(np.array(v, np.int64), f"{k}{s}")
                  for k, v in (("s", [-3]), ("e", [2 ** 63 - 1]), ("z", [0]), ("m", [-3]), ("ax", [1]))]
        nodes += [helper.make_node("Slice", [f"x{s}", f"s{s}", f"e{s}", f"ax{s}"], [f"tail{s}"]),
                  helper.make_node("Slice", [f"x{s}", f"z{s}", f"m{s}", f"ax{s}"], [f"head{s}"]),
                  helper.make_node("Concat", [f"tail{s}", f"head{s}"], [f"y{s}"], axis=1)]
    ins = [helper.make_tensor_value_info(f"x{s}", TensorProto.FLOAT, [1, n, n, c]) for s, n, c in (("a", 28, 96), ("b", 14, 192))]
    outs = [helper.make_tensor_value_info(f"y{s}", TensorProto.FLOAT, [1, n, n, c]) for s, n, c in (("a", 28, 96), ("b", 14, 192))]
    return _model(nodes, inits, ins, outs, path)


def test_a_generic_tier1_kernel_is_bound_per_call_and_made_generic_again(tmp_path):
    """A tier-1 kernel shared by calls of different sizes: tier 0 binds the group to each
    call's sizes and generalizes it its own way (each dim its own size, a slice's bounds
    absolute sizes), a choice per call; the program then computes what tier 1 does."""
    from ember.compiler.tier0 import call_sizes
    from ember.compiler.tier0_split import PerCall, splittable

    exe = ember.compile(rolls(tmp_path / "r.onnx"), wait=True)
    assert splittable(exe.program)
    sizes = call_sizes(exe.program)
    shared = [k for k, v in sizes.items() if len(v) == 2]
    assert shared, "tier 1 shares no kernel between the stages"
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=True, sizes=sizes)
    assert all(isinstance(chosen[k], PerCall) for k in shared)
    a, b = RNG.standard_normal((1, 28, 28, 96)).astype(np.float32), RNG.standard_normal((1, 14, 14, 192)).astype(np.float32)
    t0 = Executable(build_made(jobs, exe.target), remap_program(exe.program, chosen), exe.constants)
    assert all(c["kernel"].startswith("tier0_") for c in t0.program["calls"])
    for got, want in zip(t0.run(a, b), exe.run(a, b)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(t0.run(a, b)[0], np.roll(a, 3, axis=1))


def test_a_slice_from_0_across_a_concat_computes_what_tier1_does(tmp_path):
    """A slice whose begin is 0, over a concat along the vectorized axis: the begin stays 0 in
    the tier-0 kernel (the loop arithmetic takes every size for at least 1; as a size of 0,
    the concat's select across the vector's lanes was proved one-sided and read out of
    bounds -- torch's ResNet-18 with a dynamic batch)."""
    nodes = [helper.make_node("Concat", ["a", "b"], ["c"], axis=3),
             helper.make_node("Slice", ["c", "s", "e", "ax"], ["d"]),
             helper.make_node("Relu", ["d"], ["y"])]
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("s", [0]), ("e", [17]), ("ax", [3]))]
    path = _model(nodes, inits, [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 64, 4, 1]),
                                 helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 64, 4, 20])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64, 4, 17])], tmp_path / "c.onnx")
    exe = ember.compile(path, wait=True)
    a, b = RNG.standard_normal((1, 64, 4, 1)).astype(np.float32), RNG.standard_normal((1, 64, 4, 20)).astype(np.float32)
    want = np.maximum(np.concatenate([a, b], axis=3)[..., :17], 0)
    np.testing.assert_array_equal(exe.run(a, b)[0], want)
    np.testing.assert_array_equal(_tier0_of(exe).run(a, b)[0], want)


def ragged(path):
    """Convolutions whose output rows are not a whole number of 4 columns: 3x3 padded (7 and 13
    wide), a 1x1 unpadded (its columns past a row's end would read past the data), a strided
    3x3 and a dilated one."""
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1"], ["c1"]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["y"], pads=[2, 2, 2, 2], dilations=[2, 2])]
    inits = [_init("w0", (32, 16, 3, 3), 0.1), _init("w1", (48, 32, 1, 1), 0.1), _init("w2", (32, 48, 3, 3), 0.1),
             _init("w3", (16, 32, 3, 3), 0.1)]
    return _model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 13, 7])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 7, 4])], path)


def test_a_tier0_conv_accumulates_neighbouring_columns(tmp_path):
    """A blocked window conv's tier-0 kernel, run apart from its epilogue, accumulates 4
    columns side by side (each FMA of a filter block shares one load of its weights); rows of
    7, 13 and 4 columns end inside a group of 4, whose columns past the end are computed from
    the last one's data (an unpadded 1x1 too, which would otherwise read past its input) and
    not stored: every tier-0 result is tier 1's."""
    from ember.compiler.tier0 import COLUMNS, call_sizes, make_tier0_kernel
    from ember.loop.expr import Load
    from ember.loop.stmt import For, IfThenElse, Store
    from ember.loop.visit import walk

    exe = ember.compile(ragged(tmp_path / "r.onnx"), wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=True, sizes=call_sizes(exe.program))
    convs = [fn for *_, fn, _ in jobs if "nn.conv2d_nchwc" in str(fn) and "dilation=(s" in str(fn)]
    assert convs
    for fn in convs:
        func, _ = make_tier0_kernel(fn, "k", exe.target)
        loops = [n for n in walk(func) if isinstance(n, For) and n.kind == "serial"
                 and any(isinstance(m, Store) and m.buffer.scope == "local" for m in walk(n.body))]
        inner = min(loops, key=lambda n: sum(1 for _ in walk(n)))
        stores = sum(isinstance(m, Store) for m in walk(inner.body))  # (a vector each: a block of 32 has 2)
        assert stores >= COLUMNS and stores % COLUMNS == 0
        # and nothing else: no guard per column (the columns past the end read in bounds), no
        # predicated load (a padded tap zeroes its clamped read by a factor, not a select)
        assert not any(isinstance(m, IfThenElse) for m in walk(inner.body))
        assert not any(isinstance(m, Load) and m.predicate is not None for m in walk(inner.body))
    x = RNG.standard_normal((1, 16, 13, 7)).astype(np.float32)
    np.testing.assert_allclose(_tier0_of(exe, split=True).run(x)[0], exe.run(x)[0], rtol=1e-4, atol=1e-5)
