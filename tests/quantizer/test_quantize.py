"""The quantizer: QDQ files any runtime reads, ranges by each method, errors reported, bad
input refused with a clear error."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import ember
from ember.errors import ArgumentError, ModelError
from ember.quantizer.calibrate import Ranges

RNG = np.random.default_rng(11)


def _net() -> onnx.ModelProto:
    """conv 3x3 (16 -> 32), relu, global pool, flatten, gemm (32 -> 10)."""
    w = (RNG.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    fc = (RNG.standard_normal((10, 32)) * 0.2).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("Relu", ["c"], ["r"], name="relu"),
             h.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             h.make_node("Flatten", ["p"], ["f"], name="flatten"),
             h.make_node("Gemm", ["f", "fc"], ["y"], transB=1, name="fc")]
    g = h.make_graph(nodes, "net", [h.make_tensor_value_info("x", TP.FLOAT, [1, 16, 8, 8])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [1, 10])],
                     [nh.from_array(w, "w"), nh.from_array(fc, "fc")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _batches(n=4):
    return [{"x": RNG.standard_normal((1, 16, 8, 8)).astype(np.float32)} for _ in range(n)]


def _ort(model, feeds: dict) -> np.ndarray:
    """ORT's first output from its reference kernels: its optimized ones on a CPU without VNNI
    run pmaddubsw, whose pair sums saturate for full-range weights (Ember's are exact there)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def test_a_quantized_file_runs_in_any_runtime_close_to_fp32(tmp_path):
    m = _net()
    report = ember.quantize(m, _batches(), tmp_path / "q.onnx")
    assert report.nodes == {"conv": "Conv", "fc": "Gemm"}
    assert set(report.activations) == {"x", "f"} and report.errors["y"]["max_rel"] < 0.05
    q = onnx.load(tmp_path / "q.onnx")
    onnx.checker.check_model(q)
    ops = [n.op_type for n in q.graph.node]
    assert ops.count("QuantizeLinear") == 2 and ops.count("DequantizeLinear") == 4
    assert {i.name for i in q.graph.initializer}.isdisjoint({"w", "fc"})  # (float weights gone)
    x = _batches(1)[0]
    ref = ember.compile(m).run(**x)[0]
    got = ember.compile(q).run(**x)[0]
    theirs = _ort(str(tmp_path / "q.onnx"), x)
    np.testing.assert_allclose(got, theirs, rtol=1e-4, atol=1e-4 * np.abs(theirs).max())
    assert 0 < np.abs(got - ref).max() < 0.05 * np.abs(ref).max()


def test_per_channel_weights_have_a_scale_per_output_channel():
    q = ember.quantize(_net(), _batches(2)).model
    inits = {i.name: nh.to_array(i) for i in q.graph.initializer}
    assert inits["w_quantized"].dtype == np.int8 and inits["w_scale"].shape == (32,)
    assert inits["fc_scale"].shape == (10,)  # (Gemm with transB: the rows are the outputs)
    tensor = ember.quantize(_net(), _batches(2), per_channel=False).model
    assert {i.name: nh.to_array(i) for i in tensor.graph.initializer}["w_scale"].shape == ()


def test_methods_clip_within_the_extremes():
    r = Ranges()
    x = RNG.standard_normal(100_000).astype(np.float32)
    x[0] = 40.0  # one outlier
    r.add("t", x)
    lo, hi = r.range("t", "minmax")
    assert hi == pytest.approx(40.0)
    for method in ("percentile", "entropy"):
        plo, phi = r.range("t", method, 99.9)
        assert lo <= plo < 0 < phi < 10, method  # (the outlier clips)


def test_bad_input_is_refused_clearly():
    with pytest.raises(ArgumentError, match="method must be one of"):
        ember.quantize(_net(), _batches(1), method="mse")
    with pytest.raises(ArgumentError, match="no batch"):
        ember.quantize(_net(), [])
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", TP.FLOAT, [2])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [2])])
    with pytest.raises(ModelError, match="nothing to quantize"):
        ember.quantize(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), [{"x": np.ones(2, np.float32)}])


def test_cli_quantizes_and_reports(tmp_path, capsys):
    from ember.cli import main

    path = tmp_path / "net.onnx"
    onnx.save(_net(), path)
    assert main(["quantize", str(path), "--random", "2", "--method", "percentile"]) == 0
    assert "quantized 2 op(s)" in capsys.readouterr().out
    assert (tmp_path / "net.int8.onnx").exists()
    assert main(["quantize", str(path)]) == 2  # neither --calibration nor --random
    assert "--random" in capsys.readouterr().err


def _residual_net() -> onnx.ModelProto:
    """relu(conv(r)) + r for r = relu(conv(x)): r read by the second conv and by the add."""
    w1 = (RNG.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((16, 16, 1, 1)) * 0.2).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             h.make_node("Relu", ["c1"], ["r"], name="relu1"),
             h.make_node("Conv", ["r", "w2"], ["c2"], name="conv2"),
             h.make_node("Add", ["c2", "r"], ["y"], name="add")]
    g = h.make_graph(nodes, "net", [h.make_tensor_value_info("x", TP.FLOAT, [1, 16, 8, 8])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [1, 16, 8, 8])],
                     [nh.from_array(w1, "w1"), nh.from_array(w2, "w2")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("share", [True, False, None])
def test_a_residual_reads_the_dequantized_activation_unless_asked_not_to(share):
    """(None: measured -- shared unless that raises the error by more than SHARE_TOLERANCE.)"""
    m = _residual_net()
    report = ember.quantize(m, _batches(), share_codes=share)
    add = next(n for n in report.model.graph.node if n.op_type == "Add")
    assert (add.input[1] == "r_DequantizeLinear") == report.shared, list(add.input)
    assert report.shared == share or share is None
    assert ("read the float" in str(report)) != report.shared
    assert report.errors["y"]["max_rel"] < 0.05
    x = _batches(1)[0]
    want = ember.compile(m, cache=False).run(**x)[0]
    got = ember.compile(report.model, cache=False).run(**x)[0]
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()


def _attention_net() -> onnx.ModelProto:
    """softmax(q k^T) v for q, k, v = x @ wq, x @ wk, x @ wv: two MatMuls of activations."""
    ws = {n: (RNG.standard_normal((32, 32)) * 0.05).astype(np.float32) for n in ("wq", "wk", "wv")}
    nodes = [h.make_node("MatMul", ["x", w], [w[1]], name=f"proj_{w[1]}") for w in ws]
    nodes += [h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="kt"),
              h.make_node("MatMul", ["q", "kt"], ["s"], name="scores"),
              h.make_node("Softmax", ["s"], ["p"], axis=-1, name="softmax"),
              h.make_node("MatMul", ["p", "v"], ["y"], name="mix")]
    g = h.make_graph(nodes, "attention", [h.make_tensor_value_info("x", TP.FLOAT, [2, 24, 32])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [2, 24, 32])],
                     [nh.from_array(w, n) for n, w in ws.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("products", [True, False, None])
def test_products_of_two_activations_get_pairs_on_both_inputs_unless_asked_not_to(products):
    """(as ORT's quantize_static writes attention; None: measured like the shared codes)"""
    m = _attention_net()
    batches = [{"x": RNG.standard_normal((2, 24, 32)).astype(np.float32)} for _ in range(3)]
    report = ember.quantize(m, batches, activation_products=products)
    quantized = {n for n in report.nodes}
    assert {"proj_q", "proj_k", "proj_v"} <= quantized
    assert ({"scores", "mix"} <= quantized) == (products is not False) or products is None
    mix = next(n for n in report.model.graph.node if n.name == "mix")
    assert all(i.endswith("_DequantizeLinear") for i in mix.input) == ("mix" in quantized)
    assert report.errors["y"]["max_rel"] < 0.05
    x = batches[0]
    got = ember.compile(report.model, cache=False).run(**x)[0]
    path = report.model.SerializeToString()
    theirs = _ort(path, x)
    assert np.abs(got - theirs).max() < 0.02 * np.abs(theirs).max()


def _silu_net() -> onnx.ModelProto:
    """conv 3x3 (8 -> 16), SiLU (sigmoid, mul), conv 1x1 (16 -> 8)."""
    w1 = (RNG.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)
    w2 = (RNG.standard_normal((8, 16, 1, 1)) * 0.2).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1], name="conv1"),
             h.make_node("Sigmoid", ["c"], ["g"], name="sigmoid"),
             h.make_node("Mul", ["c", "g"], ["a"], name="silu"),
             h.make_node("Conv", ["a", "w2"], ["y"], name="conv2")]
    g = h.make_graph(nodes, "silu", [h.make_tensor_value_info("x", TP.FLOAT, [1, 8, 8, 8])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [1, 8, 8, 8])],
                     [nh.from_array(w1, "w1"), nh.from_array(w2, "w2")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("tables", [True, False, None])
def test_an_activations_input_gets_a_pair_read_by_all_its_readers_unless_asked_not_to(tables):
    """(as ORT's quantize_static writes SiLU: the activation is then a function of one code, a
    table in Ember; None: measured like the shared codes)"""
    from ember.graph.ir import Call
    from ember.graph.visit import post_order
    from ember.target import Target

    m = _silu_net()
    batches = [{"x": RNG.standard_normal((1, 8, 8, 8)).astype(np.float32)} for _ in range(3)]
    report = ember.quantize(m, batches, activation_tables=tables)
    assert report.tables == (tables is not False) or tables is None
    nodes = {n.name: n for n in report.model.graph.node}
    assert (list(nodes["sigmoid"].input) == ["c_DequantizeLinear"]
            and nodes["silu"].input[0] == "c_DequantizeLinear") == report.tables
    assert ("c" in report.activations) == report.tables and ("tables" in str(report)) == report.tables
    assert report.errors["y"]["max_rel"] < 0.05
    exe = ember.compile(report.model, target="llvm -mcpu=znver4", cache=False, wait=True)
    lookups = sum(n.op == "gather" for _, fn in exe.graph.functions for n in post_order(fn) if isinstance(n, Call))
    assert lookups == report.tables  # (code_tables: the SiLU between two quantizers)
    if Target.host().has_feature("avx512vbmi"):
        x = batches[0]
        got = exe.run(**x)[0]
        theirs = _ort(report.model.SerializeToString(), x)
        assert np.abs(got - theirs).max() < 0.02 * np.abs(theirs).max()


@pytest.mark.parametrize("choice", ["int8", "float"])
def test_cli_takes_the_activations_choice(tmp_path, capsys, choice):
    from ember.cli import main

    path = tmp_path / "silu.onnx"
    onnx.save(_silu_net(), path)
    assert main(["quantize", str(path), "--random", "2", "--activations", choice]) == 0
    assert ("tables" in capsys.readouterr().out) == (choice == "int8")
    sigmoid = next(n for n in onnx.load(tmp_path / "silu.int8.onnx").graph.node if n.op_type == "Sigmoid")
    assert (sigmoid.input[0] == "c_DequantizeLinear") == (choice == "int8")
