"""The op computes (ember.graph.ops.compute) against numpy.

Every case builds placeholders of its input types, calls the op's registered compute, schedules
the result (``schedule_elementwise`` on single-stage elementwise results), and all kernels are
built into one module (one LLVM run) shared by the tests.
"""
import math

import numpy as np
import pytest

import ember

from .conftest import build_all
from ember.graph import TensorType
from ember.graph.ops import get_op, infer_type, list_ops
from ember.kernels.elementwise import schedule_elementwise
from ember.loop import compute as te
from ember.loop import dtype as dt
from ember.loop.schedule import Schedule

RNG = np.random.default_rng(7)
F = "float32"
A, B = (3, 1, 5), (7, 5)  # broadcast to (3, 7, 5); no dim divides the vector width
U = (5, 13)



import ember.graph.ops.compute  # noqa: E402,F401  (registers the computes)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(x))


def _softplus(x):
    return np.logaddexp(0, x)


# inputs: "n" normal, "p" positive, "u" in (-1, 1), "g" > 1, "i" small ints, "nz" nonzero ints,
# "b" bools, "s" small non-negative ints (shift counts), "q" those as floats (ties compare equal),
# "x" normal with inf, -inf and nan
def _gen(kind, shape, dtype):
    if kind == "b":
        return RNG.random(shape) < 0.5
    if kind in ("i", "nz", "s", "q"):
        lo, hi = (0, 5) if kind == "s" else (-20, 21)
        v = RNG.integers(lo, hi, shape)
        if kind == "nz":
            v[v == 0] = 3
        return np.asarray(v.astype(dt.numpy_dtype(dtype)))
    v = RNG.standard_normal(shape) * 2
    if kind == "p":
        v = np.abs(v) + 0.1
    elif kind == "u":
        v = np.tanh(v) * 0.99
    elif kind == "g":
        v = np.abs(v) + 1.1
    elif kind == "x":  # special values sprinkled in
        v.flat[::3] = np.inf
        v.flat[1::5] = -np.inf
        v.flat[2::7] = np.nan
    return np.asarray(v.astype(dt.numpy_dtype(dtype)))


# (op, attrs, [(shape, dtype, kind)], reference, tolerance)
UNARY_F = [
    ("exp", np.exp, "n"), ("log", np.log, "p"), ("sqrt", np.sqrt, "p"),
    ("rsqrt", lambda x: 1 / np.sqrt(x), "p"), ("sin", np.sin, "n"), ("cos", np.cos, "n"),
    ("tan", np.tan, "u"), ("asin", np.arcsin, "u"), ("acos", np.arccos, "u"), ("atan", np.arctan, "n"),
    ("sinh", np.sinh, "n"), ("cosh", np.cosh, "n"), ("asinh", np.arcsinh, "n"), ("acosh", np.arccosh, "g"),
    ("atanh", np.arctanh, "u"), ("erf", _erf, "n"), ("sigmoid", _sigmoid, "n"), ("tanh", np.tanh, "n"),
    ("floor", np.floor, "n"), ("ceil", np.ceil, "n"), ("round", np.round, "n"),
    ("reciprocal", lambda x: 1 / x, "p"), ("abs", np.abs, "n"), ("sign", np.sign, "n"),
    ("negative", np.negative, "n"), ("isnan", np.isnan, "x"), ("isinf", np.isinf, "x"), ("copy", np.copy, "x"),
]
CASES = [(op, {}, [(U, F, kind)], ref, 2e-5) for op, ref, kind in UNARY_F]
# inf, -inf and nan through the math and the activations
CASES += [(op, {}, [(U, F, "x")], ref, 2e-5) for op, ref in (
    ("exp", np.exp), ("tanh", np.tanh), ("sigmoid", _sigmoid), ("erf", _erf), ("abs", np.abs),
    ("floor", np.floor), ("nn.relu", lambda x: np.maximum(x, 0)), ("nn.softplus", _softplus),
    ("nn.gelu", _gelu))]
CASES += [
    ("clip", {"a_min": -0.5, "a_max": 1.0}, [(U, F, "x")], lambda x: np.clip(x, -0.5, 1.0), 0),
    ("isinf", {"detect_negative": False}, [(U, F, "x")], np.isposinf, 0),
    ("isinf", {"detect_positive": False}, [(U, F, "x")], np.isneginf, 0),
    ("isinf", {"detect_positive": False, "detect_negative": False}, [(U, F, "x")],
     lambda x: np.zeros(x.shape, bool), 0),
    ("exp", {}, [(U, "float16", "n")], np.exp, 2e-3),
    ("sigmoid", {}, [(U, "float64", "n")], _sigmoid, 1e-12),
    ("tanh", {}, [(U, "float64", "n")], np.tanh, 1e-12),
    ("abs", {}, [(U, "int32", "i")], np.abs, 0),
    ("sign", {}, [(U, "int64", "i")], np.sign, 0),
    ("negative", {}, [(U, "int32", "i")], np.negative, 0),
    ("sign", {}, [(U, "uint8", "s")], np.sign, 0),
    ("abs", {}, [(U, "uint8", "s")], np.abs, 0),
    ("nn.relu", {}, [(U, "int8", "i")], lambda x: np.maximum(x, 0), 0),
    ("logical_not", {}, [(U, "bool", "b")], np.logical_not, 0),
    ("bitwise_not", {}, [(U, "int32", "i")], np.invert, 0),
    # activations
    ("nn.relu", {}, [(U, F, "n")], lambda x: np.maximum(x, 0), 0),
    ("nn.relu", {}, [(U, "int32", "i")], lambda x: np.maximum(x, 0), 0),
    ("nn.leaky_relu", {"alpha": 0.1}, [(U, F, "n")], lambda x: np.where(x >= 0, x, 0.1 * x), 1e-6),
    ("nn.elu", {"alpha": 0.7}, [(U, F, "n")], lambda x: _elu(x, 0.7), 2e-5),
    ("nn.celu", {"alpha": 1.5}, [(U, F, "n")],
     lambda x: np.maximum(x, 0) + np.minimum(0, 1.5 * np.expm1(x / 1.5)), 2e-5),
    ("nn.selu", {}, [(U, F, "n")], lambda x: 1.0507009873554805 * _elu(x, 1.6732632423543772), 2e-5),
    ("nn.thresholded_relu", {"alpha": 0.5}, [(U, F, "n")], lambda x: np.where(x > 0.5, x, 0), 0),
    ("nn.hard_sigmoid", {}, [(U, F, "n")], lambda x: np.clip(0.2 * x + 0.5, 0, 1), 1e-6),
    ("nn.hard_swish", {}, [(U, F, "n")], lambda x: x * np.clip(x / 6 + 0.5, 0, 1), 1e-6),
    ("nn.softplus", {}, [(U, F, "n")], _softplus, 2e-5),
    ("nn.softsign", {}, [(U, F, "n")], lambda x: x / (1 + np.abs(x)), 1e-6),
    ("nn.mish", {}, [(U, F, "n")], lambda x: x * np.tanh(_softplus(x)), 2e-5),
    ("nn.gelu", {}, [(U, F, "n")], _gelu, 2e-5),
    ("nn.gelu", {"approximate": "tanh"}, [(U, F, "n")],
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), 2e-5),
    ("nn.shrink", {"lambd": 0.7, "bias": 0.2}, [(U, F, "n")],
     lambda x: np.where(x < -0.7, x + 0.2, np.where(x > 0.7, x - 0.2, 0)), 1e-6),
    ("clip", {"a_min": -0.5, "a_max": 1.0}, [(U, F, "n")], lambda x: np.clip(x, -0.5, 1.0), 0),
    ("clip", {"a_min": 0.0}, [(U, F, "n")], lambda x: np.maximum(x, 0.0), 0),
    ("clip", {"a_min": -3, "a_max": 4}, [(U, "int32", "i")], lambda x: np.clip(x, -3, 4), 0),
    ("clip", {"a_min": 2.5, "a_max": 7.5}, [(U, "int32", "i")], lambda x: np.clip(x, 3, 7), 0),
    ("clip", {"a_min": -1.0, "a_max": 300.0}, [(U, "uint8", "s")], np.copy, 0),
    ("clip", {"a_min": 1.0, "a_max": 3.0}, [(U, "uint8", "s")], lambda x: np.clip(x, 1, 3), 0),
    # binary, broadcasting
    ("add", {}, [(A, F, "n"), (B, F, "n")], np.add, 1e-6),
    ("subtract", {}, [(A, F, "n"), (B, F, "n")], np.subtract, 1e-6),
    ("multiply", {}, [(A, F, "n"), (B, F, "n")], np.multiply, 1e-6),
    ("divide", {}, [(A, F, "n"), (B, F, "p")], np.divide, 1e-6),
    ("add", {}, [(A, "int64", "i"), (B, "int64", "i")], np.add, 0),
    ("multiply", {}, [((), "int32", "i"), (B, "int32", "i")], np.multiply, 0),
    ("divide", {}, [(A, "int32", "i"), (B, "int32", "nz")],
     lambda x, y: (np.trunc(x / y)).astype(np.int32), 0),
    ("maximum", {}, [(A, F, "x"), (B, F, "n")], np.maximum, 0),
    ("add", {}, [(A, "float64", "n"), (B, "float64", "n")], np.add, 0),
    ("divide", {}, [(A, "float16", "n"), (B, "float16", "p")], np.divide, 2e-3),
    ("minimum", {}, [(A, F, "n"), (B, F, "n")], np.minimum, 0),
    ("mod", {}, [(A, "int32", "i"), (B, "int32", "nz")], np.mod, 0),
    ("mod", {"fmod": True}, [(A, "int32", "i"), (B, "int32", "nz")], np.fmod, 0),
    ("mod", {}, [(A, F, "n"), (B, F, "p")], np.mod, 1e-5),
    ("mod", {"fmod": True}, [(A, F, "n"), (B, F, "p")], np.fmod, 1e-5),
    ("power", {}, [(A, F, "p"), (B, F, "n")], np.power, 2e-5),
    ("power", {}, [(A, "int64", "i"), (B, "int64", "s")], np.power, 0),
    ("equal", {}, [(A, "int32", "s"), (B, "int32", "s")], np.equal, 0),
    ("not_equal", {}, [(A, "int32", "s"), (B, "int32", "s")], np.not_equal, 0),
    ("less", {}, [(A, F, "n"), (B, F, "n")], np.less, 0),
    ("less_equal", {}, [(A, "int32", "s"), (B, "int32", "s")], np.less_equal, 0),
    ("greater", {}, [(A, F, "n"), (B, F, "n")], np.greater, 0),
    ("greater_equal", {}, [(A, "int32", "s"), (B, "int32", "s")], np.greater_equal, 0),
    ("equal", {}, [(A, "bool", "b"), (B, "bool", "b")], np.equal, 0),
    ("equal", {}, [(A, F, "q"), (B, F, "q")], np.equal, 0),
    ("less_equal", {}, [(A, F, "q"), (B, F, "q")], np.less_equal, 0),
    ("less", {}, [(A, "bool", "b"), (B, "bool", "b")], np.less, 0),
    ("greater", {}, [(A, "uint8", "s"), (B, "uint8", "s")], np.greater, 0),
    ("subtract", {}, [(A, "uint8", "s"), (B, "uint8", "s")], np.subtract, 0),
    ("add", {}, [((), F, "n"), ((), F, "n")], np.add, 1e-6),
    ("logical_and", {}, [(A, "bool", "b"), (B, "bool", "b")], np.logical_and, 0),
    ("logical_or", {}, [(A, "bool", "b"), (B, "bool", "b")], np.logical_or, 0),
    ("logical_xor", {}, [(A, "bool", "b"), (B, "bool", "b")], np.logical_xor, 0),
    ("bitwise_and", {}, [(A, "int32", "i"), (B, "int32", "i")], np.bitwise_and, 0),
    ("bitwise_or", {}, [(A, "int32", "i"), (B, "int32", "i")], np.bitwise_or, 0),
    ("bitwise_xor", {}, [(A, "int32", "i"), (B, "int32", "i")], np.bitwise_xor, 0),
    ("left_shift", {}, [(A, "int32", "i"), (B, "int32", "s")], np.left_shift, 0),
    ("right_shift", {}, [(A, "int32", "i"), (B, "int32", "s")], np.right_shift, 0),
    ("nn.prelu", {}, [(A, F, "n"), ((5,), F, "n")], lambda x, s: np.where(x >= 0, x, x * s), 1e-6),
    ("where", {}, [(B, "bool", "b"), (A, F, "n"), ((1, 5), F, "n")], np.where, 0),
    ("cast", {"dtype": "int32"}, [(U, F, "n")], lambda x: x.astype(np.int32), 0),
    ("cast", {"dtype": "float64"}, [(U, "int64", "i")], lambda x: x.astype(np.float64), 0),
    ("cast", {"dtype": "bool"}, [(U, "int32", "s")], lambda x: x.astype(bool), 0),
    ("cast", {"dtype": "float32"}, [(U, "bool", "b")], lambda x: x.astype(np.float32), 0),
    ("cast", {"dtype": "float16"}, [(U, F, "n")], lambda x: x.astype(np.float16), 0),
]

R = (3, 7, 5)


REDUCE_REF = {
    "sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min,
    "l1_norm": lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims),
    "sum_square": lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims),
    "l2_norm": lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)),
    "log_sum": lambda x, axis, keepdims: np.log(np.sum(x, axis=axis, keepdims=keepdims)),
    "log_sum_exp": lambda x, axis, keepdims: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims)),
}


def _reduce_case(op, axis, keepdims, dtype=F, kind="n", shape=R):
    ref = REDUCE_REF[op]
    ax = None if axis is None else tuple(axis)
    attrs = {"axis": ax, "keepdims": keepdims}
    return (op, attrs, [(shape, dtype, kind)], lambda x: ref(x, axis=ax, keepdims=keepdims), 2e-5)


for _op in ("sum", "mean", "max", "min", "prod", "l1_norm", "sum_square", "l2_norm", "log_sum_exp"):
    CASES += [_reduce_case(_op, (1,), False), _reduce_case(_op, (0, 2), True), _reduce_case(_op, None, False)]
CASES += [
    _reduce_case("sum", (-1,), False), _reduce_case("mean", (0,), True),
    _reduce_case("sum", (0, 1), False, dtype="float64"), _reduce_case("max", (1,), False, kind="x"),
    _reduce_case("log_sum", (2,), False, kind="p"),
    _reduce_case("sum", (1, 2), False, dtype="int32", kind="i"),
    _reduce_case("mean", (0,), False, dtype="int64", kind="i"),
    ("mean", {"axis": (0,)}, [((0, 4), "int32", "i")], lambda x: np.zeros(4, np.int32), 0),
    ("mean", {"axis": (1,)}, [((3, 0), F, "n")], lambda x: np.full(3, np.nan, np.float32), 0),
    _reduce_case("max", (2,), True, dtype="int32", kind="i"),
    _reduce_case("min", None, True, dtype="int64", kind="i"),
    _reduce_case("max", (0,), False, dtype="bool", kind="b"),
    _reduce_case("min", (1,), False, dtype="bool", kind="b"),
    _reduce_case("sum", (), False), _reduce_case("sum", (0,), False, shape=(0, 4)),
    ("max", {"axis": (1,)}, [((6, 0), F, "n")], lambda x: np.max(x, axis=1, initial=-np.inf), 0),
    ("argmax", {}, [(R, F, "n")], lambda x: np.argmax(x, axis=0)[None], 0),
    ("argmax", {"axis": -1, "keepdims": False}, [(R, "int32", "s")], lambda x: np.argmax(x, axis=-1), 0),
    ("argmax", {"axis": 1, "keepdims": False, "select_last_index": True}, [(R, "int32", "s")],
     lambda x: 6 - np.argmax(x[:, ::-1], axis=1), 0),
    ("argmin", {"axis": 1}, [(R, F, "n")], lambda x: np.argmin(x, axis=1, keepdims=True), 0),
    ("argmax", {"axis": 2}, [(R, F, "x")], lambda x: np.argmax(x, axis=2, keepdims=True), 0),
    ("argmin", {"axis": 0, "keepdims": False}, [(R, F, "x")], lambda x: np.argmin(x, axis=0), 0),
    ("argmin", {"axis": 2, "keepdims": False, "select_last_index": True}, [(R, "int32", "s")],
     lambda x: 4 - np.argmin(x[:, :, ::-1], axis=2), 0),
]


def _case_id(case):
    op, attrs, ins, _, _ = case
    a = ",".join(f"{k}={v}" for k, v in attrs.items() if v is not None)
    return f"{op}[{a}]" + ",".join(str(d) for _, d, _ in ins)


def _make(case, name):
    op, attrs, ins, _, _ = case
    types = [TensorType(shape, d) for shape, d, _ in ins]
    out_type = infer_type(op, types, attrs)
    filled = get_op(op).check_attrs(attrs)
    xs = [te.placeholder(t.shape, t.dtype, f"x{i}") for i, t in enumerate(types)]
    out = get_op(op).compute(filled, xs, out_type)
    assert out.dtype == out_type.dtype
    assert tuple(s.value for s in out.shape) == out_type.shape
    s = Schedule(out)
    if isinstance(out.op, te.ComputeOp) and not out.op.reduce_axis and \
            all(isinstance(t.op, te.PlaceholderOp) for t in out.op.input_tensors()):
        schedule_elementwise(s, out)
    return (s, xs + [out], name), out_type


@pytest.fixture(scope="module")
def built():
    return build_all(CASES, lambda i, c: _make(c, f"k{i}"), "computes")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[_case_id(c) for c in CASES])
def test_compute(built, i):
    mod, types = built
    op, attrs, ins, ref, tol = CASES[i]
    arrays = [_gen(kind, shape, d) for shape, d, kind in ins]
    out_type = types[i]
    out = np.zeros(out_type.shape, dt.numpy_dtype(out_type.dtype))
    mod[f"k{i}"](*arrays, out)
    with np.errstate(all="ignore"):  # the special-value inputs make numpy warn
        want = np.asarray(ref(*arrays)).astype(out.dtype)
    if tol:
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(out, want)


def test_raw_attributes_get_their_defaults():
    x = te.placeholder((4,), F, "x")
    out = get_op("nn.leaky_relu").compute({}, [x], TensorType((4,), F))
    y = get_op("sum").compute({"axis": (0,)}, [x], TensorType((), F))
    assert out.shape[0].value == 4 and y.shape == ()


def test_every_elementwise_and_reduce_op_has_a_compute_and_a_case():
    family = [n for n in list_ops()
              if get_op(n).infer.__module__ in ("ember.graph.ops.elementwise", "ember.graph.ops.reduce")]
    assert len(family) > 60
    covered = {c[0] for c in CASES}
    assert [n for n in family if get_op(n).compute is None or n not in covered] == []
    for n in ("add", "subtract", "multiply", "divide", "nn.relu", "sigmoid", "tanh", "clip", "exp", "log",
              "sqrt", "erf", "where", "equal", "less", "greater", "cast", "sum", "mean", "max", "min"):
        assert get_op(n).compute is not None and n in covered


# (op, attrs, input types with a symbolic "n", reference)
SYMBOLIC = [
    ("add", {}, [(("n", 1, 5), F), ((7, 5), F)], np.add),
    ("nn.gelu", {}, [(("n", 6), F)], _gelu),
    ("mean", {"axis": (0,), "keepdims": False}, [(("n", 6), F)], lambda x: x.mean(0)),
    ("log_sum_exp", {"axis": (-1,), "keepdims": True}, [((3, "n"), F)],
     lambda x: np.log(np.exp(x).sum(-1, keepdims=True))),
    ("argmax", {"axis": 0}, [(("n", 4), F)], lambda x: x.argmax(0)[None]),
]


def test_symbolic_dims():
    from ember.graph.types import Dim

    kernels = []
    for i, (op, attrs, ins, _) in enumerate(SYMBOLIC):
        types = [TensorType(shape, d) for shape, d in ins]
        out_type = infer_type(op, types, attrs)
        xs = [te.placeholder(tuple(d.name if isinstance(d, Dim) else d for d in t.shape), t.dtype, f"x{j}")
              for j, t in enumerate(types)]
        out = get_op(op).compute(get_op(op).check_attrs(attrs), xs, out_type)
        s = Schedule(out)
        if not out.op.reduce_axis and all(isinstance(t.op, te.PlaceholderOp) for t in out.op.input_tensors()):
            schedule_elementwise(s, out)
        kernels.append(((s, xs + [out], f"s{i}"), out_type))
    mod = ember.build([k for k, _ in kernels], name="symbolic")
    for n in (1, 11):
        for i, (op, attrs, ins, ref) in enumerate(SYMBOLIC):
            arrays = [_gen("n", tuple(n if d == "n" else d for d in shape), d_) for shape, d_ in ins]
            want = np.asarray(ref(*arrays))
            out = np.zeros(want.shape, dt.numpy_dtype(kernels[i][1].dtype))
            mod[f"s{i}"](*arrays, out)
            np.testing.assert_allclose(out, want.astype(out.dtype), rtol=2e-5, atol=2e-5, err_msg=f"{op} n={n}")
