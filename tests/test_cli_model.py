"""``ember compile`` and ``ember run`` end to end on a small ONNX model, and their errors."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ember.cli import main


def _model(path, op="Relu"):
    w = numpy_helper.from_array(np.full((3,), 2.0, np.float32), "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"], name="mul0"), helper.make_node(op, ["m"], ["y"], name="act0")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_compile_then_run_a_library(tmp_path, capsys):
    src = _model(str(tmp_path / "m.onnx"))
    lib = str(tmp_path / "m.so")
    assert main(["compile", src, "-o", lib]) == 0
    assert "wrote" in capsys.readouterr().out and os.path.exists(lib)
    x = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    assert main(["run", lib, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out / "y.npy"), np.maximum(2 * x, 0))


def test_run_an_onnx_file_directly_with_random_inputs(tmp_path, capsys):
    assert main(["run", _model(str(tmp_path / "m.onnx"))]) == 0
    assert "y: (2, 3) float32" in capsys.readouterr().out


def test_errors_are_named_and_exit_2(tmp_path, capsys):
    src = _model(str(tmp_path / "m.onnx"))
    bad = tmp_path / "cut.onnx"
    bad.write_bytes(open(src, "rb").read()[:40])
    assert main(["compile", str(bad)]) == 2
    assert "cut.onnx" in capsys.readouterr().err
    assert main(["run", _model(str(tmp_path / "u.onnx"), op="Bernoulli")]) == 2
    err = capsys.readouterr().err
    assert "Bernoulli" in err and "act0" in err
    np.save(tmp_path / "x.npy", np.zeros((3, 2), np.float32))
    assert main(["run", src, "--input", f"x={tmp_path / 'x.npy'}"]) == 2
    assert "input 'x' must have shape (2, 3), got (3, 2)" in capsys.readouterr().err


def test_light_models_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the library goes here, not next to the model in site-packages
    assert main(["compile", "--light", "squeezenet"]) == 0
    assert os.path.exists(tmp_path / "light_squeezenet.so")
    assert main(["run", "light_squeezenet.so"]) == 0
    assert "(1, 1000, 1, 1) float32" in capsys.readouterr().out
    for argv in (["compile"], ["compile", "m.onnx", "--light", "squeezenet"], ["run", "--light", "nope"]):
        try:
            main(argv)
        except SystemExit as e:
            assert "--light NAME" in str(e) or "no light model 'nope'" in str(e)
        else:
            raise AssertionError(f"{argv} did not stop")


def test_compile_memory_limit(tmp_path, capsys):
    src = _model(str(tmp_path / "m.onnx"))
    assert main(["compile", src, "-o", str(tmp_path / "a.so"), "--memory-limit", "64MiB"]) == 0
    capsys.readouterr()
    assert main(["compile", src, "-o", str(tmp_path / "b.so"), "--memory-limit", "8"]) == 2
    err = capsys.readouterr().err
    assert "initializer 'w'" in err and "12 bytes" in err and "8 bytes" in err and "--memory-limit" in err
    try:
        main(["compile", src, "--memory-limit", "lots"])
    except SystemExit as e:
        assert e.code == 2
    assert "not an amount of memory" in capsys.readouterr().err


def test_run_a_model_with_a_symbolic_batch_with_random_inputs(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    path = str(tmp_path / "dyn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main(["run", path]) == 0  # the symbolic batch is 1 in the random inputs
    assert "y: (1, 3) float32" in capsys.readouterr().out


def test_a_model_of_two_inputs_runs_with_random_inputs_and_names_the_one_left_out(tmp_path, capsys):
    """With no --input, every input is made up (a text model's ids and mask too); with some
    given, one left out is named."""
    nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="add0")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
                                       helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    path = str(tmp_path / "two.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main(["run", path]) == 0
    assert "y: (2, 3) float32" in capsys.readouterr().out
    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.float32))
    assert main(["run", path, "--input", f"a={tmp_path / 'a.npy'}"]) == 2
    assert "input 'b' is not given" in capsys.readouterr().err


def test_compile_with_a_shape_hint(tmp_path, capsys):
    """--shape-hint: the shape a symbolic input will mostly have, which the summary names; a
    hint of an unknown input or of the wrong rank is an error that names it (exit 2)."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, "h", "w"])])
    path = str(tmp_path / "dyn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main(["compile", path, "-o", str(tmp_path / "a.so"), "--shape-hint", "x=2,3,64,48"]) == 0
    # (the hinted size is where the kernels' static twins run: the summary says so)
    assert "static kernels for batch=2, h=64, w=48" in capsys.readouterr().out
    assert main(["compile", path, "-o", str(tmp_path / "b.so"), "--shape-hint", "z=2,3,64,48"]) == 2
    assert "not inputs" in capsys.readouterr().err
    assert main(["compile", path, "-o", str(tmp_path / "c.so"), "--shape-hint", "x=2,3"]) == 2
    assert "rank 4" in capsys.readouterr().err


def test_compile_and_profile_pass_saturating_int8(tmp_path, monkeypatch, capsys):
    """--saturating-int8 reaches ember.compile from both commands (off without it)."""
    import ember

    seen = []
    real = ember.compile

    def spy(*a, **k):
        seen.append(k.get("saturating_int8"))
        return real(*a, **k)
    monkeypatch.setattr(ember, "compile", spy)
    path = _model(str(tmp_path / "m.onnx"))
    assert main(["compile", path, "-o", str(tmp_path / "a.so"), "--saturating-int8"]) == 0
    assert main(["compile", path, "-o", str(tmp_path / "b.so")]) == 0
    assert main(["profile", path, "--saturating-int8", "--repeat", "1", "--warmup", "0"]) == 0
    assert seen == [True, False, True]
