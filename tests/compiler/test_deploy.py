"""The C runtime in every export: examples/c/run_model.c, built with cc, runs exports with no
Python, at several shapes of a dynamic model, and refuses bad input with the message Python
would give."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import ember
from ember.codegen.llvm.build import find_cc

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "c", "run_model.c")


@pytest.fixture(scope="module")
def run_model(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("c") / "run_model")
    subprocess.run(find_cc() + ["-O2", "-Wall", "-Werror", f"-I{ember.c_include_dir()}", EXAMPLE, "-o", exe,
                                "-ldl", "-lm"], check=True)
    return exe


def _run(run_model, so, inputs, tmp_path, extra=()):
    """Run the C example on ``inputs`` (arrays written to files); (returncode, stdout+stderr,
    outputs read back as float32)."""
    args = [run_model, so]
    for k, a in enumerate(inputs):
        path = tmp_path / f"in{k}.bin"
        a.tofile(path)
        args.append(f"{path}:{'x'.join(map(str, a.shape)) or 'scalar'}")
    res = subprocess.run(args + ["-o", str(tmp_path), *extra], capture_output=True, text=True, timeout=120)
    return res.returncode, res.stdout + res.stderr


def _read(tmp_path, k, like):
    return np.fromfile(tmp_path / f"output_{k}.bin", like.dtype).reshape(like.shape)


def _cnn(rng):
    """Conv, ReLU, pooling and a dense head over a symbolic batch."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 16, 16])
    y = h.make_tensor_value_info("y", T.FLOAT, ["batch", 10])
    w1 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((8 * 8 * 8, 10)).astype(np.float32) * 0.05, "w2")
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["r"]),
             h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Flatten", ["p"], ["f"]),
             h.make_node("MatMul", ["f", "w2"], ["m"]),
             h.make_node("Softmax", ["m"], ["y"], axis=-1)]
    g = h.make_graph(nodes, "cnn", [x], [y], [w1, b1, w2])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _two_inputs():
    """Two inputs that must share ``seq``; an output computed from both."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["b", "seq", 4])
    m = h.make_tensor_value_info("m", T.FLOAT, ["b", "seq"])
    y = h.make_tensor_value_info("y", T.FLOAT, ["b", 4])
    nodes = [h.make_node("Unsqueeze", ["m", "ax"], ["mu"]),
             h.make_node("Mul", ["x", "mu"], ["xm"]),
             h.make_node("ReduceSum", ["xm", "ax1"], ["y"], keepdims=0)]
    inits = [numpy_helper.from_array(np.array([2], np.int64), "ax"),
             numpy_helper.from_array(np.array([1], np.int64), "ax1")]
    return h.make_model(h.make_graph(nodes, "two", [x, m], [y], inits), opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def cnn_export(tmp_path_factory):
    exe = ember.compile(_cnn(np.random.default_rng(0)))
    return exe, exe.export(str(tmp_path_factory.mktemp("cnn") / "cnn.so"))


@pytest.mark.parametrize("batch", [1, 3])
def test_c_runs_a_dynamic_export_at_every_batch(run_model, cnn_export, tmp_path, batch):
    exe, so = cnn_export
    x = np.random.default_rng(batch).standard_normal((batch, 3, 16, 16)).astype(np.float32)
    rc, out = _run(run_model, so, [x], tmp_path)
    assert rc == 0, out
    want = exe.run(x)[0]
    assert f"y float32 ({batch}, 10)" in out
    np.testing.assert_allclose(_read(tmp_path, 0, want), want, rtol=1e-6, atol=1e-7)


def test_c_runs_a_static_export(run_model, tmp_path):
    model = _cnn(np.random.default_rng(1))
    exe = ember.compile(model, input_shapes={"x": (2, 3, 16, 16)})
    so = exe.export(str(tmp_path / "static.so"))
    res = subprocess.run([run_model, so, "-o", str(tmp_path), "-r", "3"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "median of 3 runs" in res.stdout
    x = np.sin(0.01 * np.arange(2 * 3 * 16 * 16)).astype(np.float32).reshape(2, 3, 16, 16)  # the pattern
    want = exe.run(x)[0]
    np.testing.assert_allclose(_read(tmp_path, 0, want), want, rtol=1e-6, atol=1e-7)


def test_c_checks_shapes_the_way_python_does(run_model, tmp_path):
    exe = ember.compile(_two_inputs())
    so = exe.export(str(tmp_path / "two.so"))
    x = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
    m = (np.arange(10).reshape(2, 5) % 3 > 0).astype(np.float32)
    rc, out = _run(run_model, so, [x, m], tmp_path)
    assert rc == 0, out
    want = exe.run(x, m)[0]
    np.testing.assert_allclose(_read(tmp_path, 0, want), want, rtol=1e-6)
    np.testing.assert_allclose(want, (x * m[..., None]).sum(1), rtol=1e-5)
    # two inputs that disagree on seq, a wrong static dim, a wrong rank: errors, no output
    rc, out = _run(run_model, so, [x, m[:, :4].copy()], tmp_path)
    assert rc == 1 and "input 'm' axis 1 must be seq = 5" in out, out
    rc, out = _run(run_model, so, [x[..., :3].copy(), m], tmp_path)
    assert rc == 1 and "input 'x' must have shape (b, seq, 4), got (2, 5, 3) (axis 2 must be 4)" in out, out
    rc, out = _run(run_model, so, [x[0].copy(), m], tmp_path)
    assert rc == 1 and "input 'x' must have rank 3, got 2" in out, out


def test_an_export_the_c_runtime_cannot_run_says_so(run_model, tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, [4])
    y = h.make_tensor_value_info("y", T.INT64, [1, None])
    model = h.make_model(h.make_graph([h.make_node("NonZero", ["x"], ["y"])], "nz", [x], [y]),
                         opset_imports=[h.make_opsetid("", 17)])
    exe = ember.compile(model)
    so = exe.export(str(tmp_path / "nz.so"))
    res = subprocess.run([run_model, so], capture_output=True, text=True)
    assert res.returncode == 1
    assert "needs the Python runtime (ember.load): sizes in it come from values" in res.stderr
    np.testing.assert_array_equal(ember.load(so).run(np.array([0, 1, 0, 2], np.float32))[0], [[1, 3]])


def test_a_library_that_is_not_an_export_is_a_clear_error(run_model, tmp_path):
    so = str(tmp_path / "plain.so")
    src = tmp_path / "plain.c"
    src.write_text("int f(void) { return 1; }\n")
    subprocess.run(find_cc() + ["-shared", "-fPIC", str(src), "-o", so], check=True)
    res = subprocess.run([run_model, so], capture_output=True, text=True)
    assert res.returncode == 1 and "not an Ember export" in res.stderr


def test_c_runs_an_export_whose_concat_parts_are_written_in_place(run_model, tmp_path):
    """The parts of a concat are views at byte offsets of its bytes (no concat call): the C
    runtime points each at its offset."""
    x = h.make_tensor_value_info("x", T.FLOAT, [1, 3, 4, 5])
    y = h.make_tensor_value_info("y", T.FLOAT, [1, 6, 4, 5])
    nodes = [h.make_node("Softmax", ["x"], ["a"], axis=-1), h.make_node("Softmax", ["a"], ["b"], axis=2),
             h.make_node("Concat", ["a", "b"], ["c"], axis=1), h.make_node("Softmax", ["c"], ["y"], axis=1)]
    model = h.make_model(h.make_graph(nodes, "parts", [x], [y]), opset_imports=[h.make_opsetid("", 17)])
    exe = ember.compile(model)
    assert not any("concat" in k for k, _ in exe.kernel_calls)
    xv = np.random.default_rng(6).standard_normal((1, 3, 4, 5)).astype(np.float32)
    code, out = _run(run_model, exe.export(str(tmp_path / "parts.so")), [xv], tmp_path)
    assert code == 0, out
    want = exe.run(xv)[0]
    np.testing.assert_allclose(_read(tmp_path, 0, want), want, rtol=1e-6, atol=1e-7)
