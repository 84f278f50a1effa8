"""The narrow types (float8, float4, int4, int2): stored as bytes, converted by Cast, CastLike
and the quantization ops exactly as onnx's reference (ml_dtypes) converts them."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import ember
from ember.errors import DTypeError, UnsupportedOpError
from ember.frontend.onnx.narrow import _reference, encode_tables

FLOAT8 = [(T.FLOAT8E4M3FN, "float8_e4m3fn"), (T.FLOAT8E4M3FNUZ, "float8_e4m3fnuz"),
          (T.FLOAT8E5M2, "float8_e5m2"), (T.FLOAT8E5M2FNUZ, "float8_e5m2fnuz"), (T.FLOAT4E2M1, "float4_e2m1fn")]


def _values(n=4000):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(n).astype(np.float32) * s for s in (1e-3, 0.3, 4, 300, 1e5)])
    return np.concatenate([x, np.array([0, -0.0, np.inf, -np.inf, np.nan, 448, 449, 464, -57344, 1e-9],
                                       np.float32)])


def _cast_model(src, dst, n, **attrs):
    g = h.make_graph([h.make_node("Cast", ["x"], ["y"], to=dst, **attrs)], "c",
                     [h.make_tensor_value_info("x", src, [n])], [h.make_tensor_value_info("y", dst, [n])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


@pytest.mark.parametrize("onnx_type, name", FLOAT8)
@pytest.mark.parametrize("saturate", [1, 0])
def test_casts_to_and_from_float8_match_the_reference_bit_for_bit(onnx_type, name, saturate):
    x = _values()
    model = _cast_model(T.FLOAT, onnx_type, x.size, saturate=saturate)
    exe = ember.compile(model)
    assert exe.output_info[0].dtype == name
    got = exe.run(x)[0]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert got.dtype == np.dtype(getattr(ml_dtypes, name))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    back = ember.compile(_cast_model(onnx_type, T.FLOAT, x.size))
    assert back.input_info[0].dtype == name
    np.testing.assert_array_equal(back.run(want)[0], want.astype(np.float32))


def test_the_tables_are_the_reference_conversion():
    x = _values()
    for name in ("float8_e4m3fn", "float8_e8m0fnu"):
        pb, pc, nb, nc, nan = encode_tables(name, True)
        m = np.abs(x)
        code = np.where(np.signbit(x), nc[np.searchsorted(nb, m, side="right")],
                        pc[np.searchsorted(pb, m, side="right")])
        code = np.where(np.isnan(x), nan, code)
        np.testing.assert_array_equal(code, _reference(name, True, "up")(x))


@pytest.mark.parametrize("onnx_type, name", [(T.INT4, "int4"), (T.UINT4, "uint4"), (T.INT2, "int2"),
                                             (T.UINT2, "uint2")])
def test_int4_and_int2_casts_truncate_and_wrap_like_the_reference(onnx_type, name):
    x = np.array([7.6, 7.4, -8.6, -9.2, 20.0, 15.5, 2.5, -3.5, 0, np.nan, np.inf], np.float32)
    model = _cast_model(T.FLOAT, onnx_type, x.size)
    got = ember.compile(model).run(x)[0]
    np.testing.assert_array_equal(got.view(np.uint8), x.astype(getattr(ml_dtypes, name)).view(np.uint8))


def test_quantize_to_int4_and_back():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 12)
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=4),
             h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=4)]
    inits = [h.make_tensor("s", T.FLOAT, [2, 3], [0.3, 0.2, 0.4, 0.5, 0.25, 0.1]),
             h.make_tensor("z", T.INT4, [2, 3], [0, 1, -1, 2, 0, -2])]
    g = h.make_graph(nodes, "q", [h.make_tensor_value_info("x", T.FLOAT, [2, 12])],
                     [h.make_tensor_value_info("q", T.INT4, None), h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 21)])
    q, y = ember.compile(model).run(x)
    wq, wy = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_array_equal(q.view(np.uint8), wq.view(np.uint8))
    np.testing.assert_array_equal(y, wy)


def test_arithmetic_on_a_narrow_type_is_refused_and_inputs_are_checked(tmp_path):
    g = h.make_graph([h.make_node("Add", ["x", "x"], ["y"])], "a",
                     [h.make_tensor_value_info("x", T.FLOAT8E4M3FN, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT8E4M3FN, [4])])
    with pytest.raises(UnsupportedOpError, match="Add of float8_e4m3fn values is not supported.*Cast it"):
        ember.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 21)]))
    exe = ember.compile(_cast_model(T.FLOAT8E4M3FN, T.FLOAT, 4))
    with pytest.raises(DTypeError, match="must have dtype float8_e4m3fn, got uint8"):
        exe.run(np.zeros(4, np.uint8))
    loaded = ember.load(exe.export(str(tmp_path / "f8.so")))
    x = np.array([1, -2, 0.5, 448], np.float32).astype(ml_dtypes.float8_e4m3fn)
    assert loaded.input_info[0].dtype == "float8_e4m3fn"
    np.testing.assert_array_equal(loaded.run(x)[0], x.astype(np.float32))
