"""The index and creation computes (ember.graph.ops.compute.index, .creation) against numpy.

Like test_compute.py: each case builds placeholders of its inputs' types, calls the op's
registered compute, inlines injective intermediate stages, schedules injective outputs with
``schedule_elementwise`` (vectorized gathers and guarded selects get exercised too), and all
kernels are built into one module (one LLVM run) shared by the tests. The inputs are fixed
arrays made once from a seeded generator; the references are plain numpy or loops over numpy.
"""
import numpy as np
import pytest

import ember

from .conftest import build_all
import ember.graph.ops.compute  # registers the computes
from ember.graph import TensorType, TupleType
from ember.graph.ops import get_op, infer_type, list_ops
from ember.kernels.elementwise import schedule_elementwise
from ember.loop import compute as te
from ember.loop import dtype as dt
from ember.loop.schedule import Schedule

RNG = np.random.default_rng(11)
F = "float32"


def _x(shape, dtype=F, lo=-20, hi=21):
    """Data: normals for floats, ints in [lo, hi) otherwise, random bools."""
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    if dtype.startswith("float"):
        return (RNG.standard_normal(shape) * 3).astype(dtype)
    return RNG.integers(lo, hi, shape).astype(dtype)


def _q(shape, dtype=F, hi=4):
    """Small integers (as ``dtype``): many ties."""
    return RNG.integers(0, hi, shape).astype(dtype)


def _i(shape, n, dtype="int64"):
    """Indices into an axis of extent n, negatives included."""
    return RNG.integers(-n, n, shape).astype(dtype)


# -- references ---------------------------------------------------------------------------------

def _wrap(i, n):
    return np.where(i < 0, i + n, i)


def _gather_nd(x, idx, batch_dims=0):
    if batch_dims:
        return np.stack([_gather_nd(x[b], idx[b], batch_dims - 1) for b in range(x.shape[0])])
    return x[tuple(np.moveaxis(idx, -1, 0))]


def _scatter_elements(x, idx, upd, axis=0, reduction="none"):
    out = x.copy()
    for q in np.ndindex(idx.shape):
        p = list(q)
        p[axis] = _wrap(idx[q], x.shape[axis])
        _combine(out, tuple(p), upd[q], reduction)
    return out


def _scatter_nd(x, idx, upd, reduction="none"):
    out = x.copy()
    for q in np.ndindex(idx.shape[:-1]):
        p = tuple(int(v) for v in _wrap(idx[q], np.array(x.shape[:idx.shape[-1]])))
        _combine(out, p, upd[q], reduction)
    return out


def _combine(out, p, v, reduction):
    if reduction == "none":
        out[p] = v
    elif reduction == "add":
        out[p] = out[p] + v
    elif reduction == "mul":
        out[p] = out[p] * v
    elif reduction == "max":
        out[p] = np.maximum(out[p], v)
    else:
        out[p] = np.minimum(out[p], v)


def _one_hot(idx, depth, axis=-1, on=1.0, off=0.0, dtype=np.float32):
    i = _wrap(np.trunc(idx).astype(np.int64), depth)
    axis = axis % (idx.ndim + 1)
    hit = np.expand_dims(i, axis) == np.arange(depth).reshape((-1,) + (1,) * (idx.ndim - axis))
    return np.where(hit, on, off).astype(dtype)


def _cum(x, axis, exclusive=False, reverse=False, prod=False):
    f = np.cumprod if prod else np.cumsum
    if reverse:
        x = np.flip(x, axis)
    y = f(x, axis=axis, dtype=x.dtype)
    if exclusive:  # shift by one, the identity first
        first = np.full_like(np.take(y, [0], axis=axis), 1 if prod else 0)
        y = np.concatenate([first, np.delete(y, -1, axis=axis)], axis=axis)
    return np.flip(y, axis) if reverse else y


def _topk(x, k, axis=-1, largest=True):
    """Sort each slice (NaN the largest, ties by lower index) and keep the first k."""
    xs = np.moveaxis(x, axis, -1)
    rows = xs.reshape(-1, xs.shape[-1])

    def key(row, j):
        v = row[j]
        nan = isinstance(v, float) and np.isnan(v)
        if largest:
            return (0 if nan else 1, 0 if nan else -v, j)
        return (1 if nan else 0, 0 if nan else v, j)

    order = np.array([sorted(range(len(r)), key=lambda j, r=r: key(r.tolist(), j))[:k] for r in rows],
                     np.int64).reshape(xs.shape[:-1] + (k,))
    values = np.take_along_axis(xs, order, -1)
    return np.moveaxis(values, -1, axis), np.moveaxis(order, -1, axis)


def _hardmax(x, axis=-1):
    am = np.expand_dims(np.argmax(x, axis=axis), axis)
    return (np.arange(x.shape[axis]).reshape((-1,) + (1,) * (x.ndim - 1 - axis % x.ndim)) == am).astype(x.dtype)


def _trilu(x, upper=True, k=0):
    return np.triu(x, k) if upper else np.tril(x, k)


# -- cases: (op, attrs, input arrays, reference, tolerance) --------------------------------------

X3 = _x((4, 5, 6))
CASES = [
    # gather: negative indices, a 0-d index, several dtypes
    ("gather", {"axis": 1}, [X3, _i((2, 3), 5)], lambda x, i: np.take(x, i, axis=1), 0),
    ("gather", {}, [_x((5, 3), "int32"), np.array(-2, np.int32)], lambda x, i: np.take(x, i, axis=0), 0),
    ("gather", {"axis": -1}, [_x((3, 7), "bool"), _i((4,), 7)], lambda x, i: np.take(x, i, axis=-1), 0),
    ("gather", {"axis": 0}, [_x((6,), "int64"), _i((2, 2, 3), 6, "int32")], lambda x, i: np.take(x, i, 0), 0),
    # out-of-range indices are clamped into the axis (never read outside the data)
    ("gather", {"axis": 1}, [_x((3, 6)), np.array([7, -9, 2, -1], np.int64)],
     lambda x, i: np.take(x, np.clip(_wrap(i, 6), 0, 5), axis=1), 0),
    # gather_elements
    ("gather_elements", {"axis": 1}, [X3, _i((4, 3, 6), 5)], lambda x, i: np.take_along_axis(x, i, 1), 0),
    ("gather_elements", {"axis": -1}, [_x((3, 4), "int64"), _i((3, 9), 4, "int32")],
     lambda x, i: np.take_along_axis(x, i, -1), 0),
    ("gather_elements", {"axis": 1}, [X3, _i((2, 7, 3), 5)],  # indices smaller in the other dims
     lambda x, i: np.take_along_axis(x[:2, :, :3], i, 1), 0),
    # gather_nd
    ("gather_nd", {}, [X3, _i((3, 2), 4)], lambda x, i: _gather_nd(x, i), 0),
    ("gather_nd", {}, [X3, np.array([[1, -1, 2], [-4, 0, 5]], np.int32)], lambda x, i: _gather_nd(x, i), 0),
    ("gather_nd", {"batch_dims": 1}, [_x((3, 4, 5), "int32"), _i((3, 2, 1), 4)],
     lambda x, i: _gather_nd(x, i, 1), 0),
    ("gather_nd", {"batch_dims": 2}, [X3, _i((4, 5, 2, 1), 6)], lambda x, i: _gather_nd(x, i, 2), 0),
]

# scatter_elements: duplicates in the indices (the last update wins for "none")
SX = _x((4, 5))
for red in ("none", "add", "mul", "max", "min"):
    CASES.append(("scatter_elements", {"axis": 0, "reduction": red}, [SX, _i((3, 5), 4), _x((3, 5))],
                  lambda x, i, u, red=red: _scatter_elements(x, i, u, 0, red), 1e-5))
CASES += [
    ("scatter_elements", {"axis": 1, "reduction": "add"}, [_x((3, 6), "int32"), _i((3, 8), 6), _x((3, 8), "int32")],
     lambda x, i, u: _scatter_elements(x, i, u, 1, "add"), 0),
    ("scatter_elements", {"axis": -1}, [_x((4, 6), "int64"), _i((2, 3), 6, "int32"), _x((2, 3), "int64")],
     lambda x, i, u: _scatter_elements(x, i, u, 1), 0),
    ("scatter_elements", {"axis": 1, "reduction": "max"}, [X3, _i((3, 2, 4), 5), _x((3, 2, 4))],
     lambda x, i, u: _scatter_elements(x, i, u, 1, "max"), 0),
    ("scatter_elements", {}, [_x((5,), "bool"), _i((3,), 5), _x((3,), "bool")],
     lambda x, i, u: _scatter_elements(x, i, u), 0),
]
# scatter_nd: tuples of length 1, 2 and 3 (full), duplicates
for red in ("none", "add", "mul", "max", "min"):
    CASES.append(("scatter_nd", {"reduction": red}, [X3, _i((2, 3, 2), 4), _x((2, 3, 6))],
                  lambda x, i, u, red=red: _scatter_nd(x, i, u, red), 1e-5))
CASES += [
    ("scatter_nd", {}, [X3, np.array([[2], [-1], [0]], np.int64), _x((3, 5, 6))], _scatter_nd, 0),
    ("scatter_nd", {"reduction": "add"}, [_x((3, 4), "int32"), _i((5, 2), 3, "int32"), _x((5,), "int32")],
     lambda x, i, u: _scatter_nd(x, i, u, "add"), 0),
    ("scatter_nd", {}, [_x((6,), "int64"), np.array([1, -2], np.int64).reshape(2, 1), _x((2,), "int64")],
     _scatter_nd, 0),
]
CASES += [
    # one_hot: out-of-range indices are all off; float indices truncate
    ("one_hot", {"depth": 5}, [np.array([[0, 4, -1, -5], [5, 7, -6, 2]], np.int64)],
     lambda i: _one_hot(i, 5), 0),
    ("one_hot", {"depth": 4, "axis": 0, "on_value": 3.0, "off_value": -1.0, "dtype": "int32"},
     [np.array([1.7, -1.2, 3.0, 9.0], np.float32)], lambda i: _one_hot(i, 4, 0, 3, -1, np.int32), 0),
    ("one_hot", {"depth": 3, "axis": 1, "dtype": "bool"}, [_i((2, 4), 3, "int32")],
     lambda i: _one_hot(i, 3, 1, True, False, bool), 0),
    # trilu
    ("trilu", {}, [_x((2, 4, 5))], _trilu, 0),
    ("trilu", {"upper": False, "k": -1}, [_x((5, 4), "int32")], lambda x: _trilu(x, False, -1), 0),
    ("trilu", {"upper": True, "k": 2}, [_x((3, 3, 6), "int64")], lambda x: _trilu(x, True, 2), 0),
    ("trilu", {"upper": False, "k": 1}, [_x((4, 4), "bool")], lambda x: _trilu(x, False, 1), 0),
]
# cumsum / cumprod: every combination of exclusive and reverse
C = _x((3, 6, 4))
for ex in (False, True):
    for rev in (False, True):
        CASES.append(("cumsum", {"axis": 1, "exclusive": ex, "reverse": rev}, [C],
                      lambda x, ex=ex, rev=rev: _cum(x, 1, ex, rev), 1e-5))
        CASES.append(("cumprod", {"axis": -1, "exclusive": ex, "reverse": rev}, [_q((3, 5), "int64", 4)],
                      lambda x, ex=ex, rev=rev: _cum(x, -1, ex, rev, prod=True), 0))
CASES += [
    ("cumsum", {"axis": 0, "reverse": True, "exclusive": True}, [_x((5, 3), "int32")],
     lambda x: _cum(x, 0, True, True), 0),
    ("cumsum", {}, [_x((7,), "int64")], lambda x: _cum(x, 0), 0),
    ("cumprod", {"axis": 0}, [_x((4, 3), "float64")], lambda x: _cum(x, 0, prod=True), 1e-12),
    ("cumsum", {}, [np.array(2.5, np.float32)], lambda x: x, 0),
    ("cumprod", {"exclusive": True}, [np.array(3, np.int32)], lambda x: np.int32(1), 0),
]
# topk: ties (small integers) break toward the lower index; NaN counts as the largest
NAN = _q((3, 7), F, 5)
NAN[0, [1, 4]] = np.nan
NAN[2, 6] = np.nan
CASES += [
    ("topk", {"k": 3}, [_x((3, 8))], lambda x: _topk(x, 3), 0),
    ("topk", {"k": 4, "largest": False}, [_x((2, 9))], lambda x: _topk(x, 4, largest=False), 0),
    ("topk", {"k": 5}, [_q((4, 8))], lambda x: _topk(x, 5), 0),
    ("topk", {"k": 5, "largest": False}, [_q((4, 8))], lambda x: _topk(x, 5, largest=False), 0),
    ("topk", {"k": 2, "axis": 1}, [_q((3, 6, 4), "float64")], lambda x: _topk(x, 2, 1), 0),
    ("topk", {"k": 3, "axis": 0, "largest": False}, [_q((5, 4), "int32")], lambda x: _topk(x, 3, 0, False), 0),
    ("topk", {"k": 6, "sorted": False}, [_q((2, 6), "int64", 3)], lambda x: _topk(x, 6), 0),
    ("topk", {"k": 0}, [_x((3, 4))], lambda x: _topk(x, 0), 0),
    ("topk", {"k": 4}, [NAN], lambda x: _topk(x, 4), 0),
    ("topk", {"k": 4, "largest": False}, [NAN], lambda x: _topk(x, 4, largest=False), 0),
]


def _einsum_case(eq, *arrays, tol=1e-5):
    return ("einsum", {"equation": eq}, list(arrays), lambda *xs: np.einsum(eq, *xs), tol)


CASES += [
    _einsum_case("ij,jk->ik", _x((3, 5)), _x((5, 4))),
    _einsum_case("bij,bkj->bik", _x((2, 3, 5)), _x((2, 4, 5))),
    _einsum_case("ij,jk", _x((3, 5)), _x((5, 4))),  # implicit output
    _einsum_case("ii->i", _x((4, 4))),
    _einsum_case("ii", _x((4, 4))),
    _einsum_case("i,i", _x((6,)), _x((6,))),
    _einsum_case("i,j->ij", _x((3,)), _x((4,))),
    _einsum_case("ij->ji", _x((3, 4), "int32"), tol=0),
    _einsum_case("ij,j->i", _x((3, 4), "int64"), _x((4,), "int64"), tol=0),
    _einsum_case("...ij,...jk->...ik", _x((2, 1, 3, 4)), _x((5, 4, 2))),  # broadcast ellipsis
    _einsum_case("...i->...", _x((2, 3, 4))),
    _einsum_case("b...i,b...i->b...", _x((2, 3, 4)), _x((2, 1, 4))),
    _einsum_case("ijk,jil->kl", _x((2, 3, 4)), _x((3, 2, 5))),
    _einsum_case("ij,jk->ik", _x((3, 4), "bool"), _x((4, 2), "bool"), tol=0),
    _einsum_case("ij,ij->ij", _x((3, 4), "float64"), _x((3, 4), "float64"), tol=1e-12),
    # hardmax: the first maximum wins
    ("nn.hardmax", {}, [_q((3, 6))], _hardmax, 0),
    ("nn.hardmax", {"axis": 0}, [_x((4, 3, 2))], lambda x: _hardmax(x, 0), 0),
]
# creation: ops without inputs, and ops that read only their input's shape
CASES += [
    ("eye", {"shape": (4, 6)}, [], lambda: np.eye(4, 6, dtype=np.float32), 0),
    ("eye", {"shape": (5, 3), "k": -1, "dtype": "int32"}, [], lambda: np.eye(5, 3, -1, dtype=np.int32), 0),
    ("eye", {"shape": (3, 4), "k": 2, "dtype": "bool"}, [], lambda: np.eye(3, 4, 2, dtype=bool), 0),
    ("range", {"start": 0, "stop": 10, "step": 3}, [], lambda: np.arange(0, 10, 3), 0),
    ("range", {"start": 5, "stop": -3, "step": -2, "dtype": "int32"}, [], lambda: np.arange(5, -3, -2), 0),
    ("range", {"start": 0.5, "stop": 3.1, "step": 0.3, "dtype": F}, [],
     lambda: 0.5 + 0.3 * np.arange(9), 1e-6),
    ("range", {"start": 5, "stop": 1, "step": 1}, [], lambda: np.arange(5, 1), 0),
    ("constant_of_shape", {"shape": (2, 3), "value": 1.5}, [], lambda: np.full((2, 3), 1.5, np.float32), 0),
    ("constant_of_shape", {"shape": (4,), "value": 7.0, "dtype": "int64"}, [], lambda: np.full(4, 7), 0),
    ("constant_of_shape", {"shape": (2, 2), "value": True, "dtype": "bool"}, [],
     lambda: np.ones((2, 2), bool), 0),
    ("constant_of_shape", {"shape": (), "value": -2.0}, [], lambda: np.float32(-2.0), 0),
    ("shape_of", {}, [X3], lambda x: np.array(x.shape), 0),
    ("shape_of", {"dtype": "int32"}, [_x((0, 5), "int32")], lambda x: np.array(x.shape), 0),
    ("shape_of", {}, [np.array(1.0, np.float32)], lambda x: np.zeros(0, np.int64), 0),
    ("size", {}, [X3], lambda x: np.int64(x.size), 0),
    ("size", {"dtype": "int32"}, [_x((0, 5), "bool")], lambda x: np.int32(0), 0),
    ("size", {}, [np.array(3, np.int64)], lambda x: np.int64(1), 0),
]


def _case_id(case):
    op, attrs, ins, _, _ = case
    a = ",".join(f"{k}={v}" for k, v in attrs.items())
    return f"{op}[{a}]" + ",".join(f"{x.dtype}{x.shape}" for x in ins)


def _outputs(out):
    return list(out) if isinstance(out, tuple) else [out]


def _types(out_type):
    return list(out_type.fields) if isinstance(out_type, TupleType) else [out_type]


def _schedule(outs: list) -> Schedule:
    """Inline injective intermediate stages; vectorize and parallelize injective outputs."""
    s = Schedule(outs)
    for st in list(s.stages):
        if st.is_placeholder or st.reduce_axis:
            continue
        if any(st.tensor == o for o in outs):
            schedule_elementwise(s, st.tensor)
        else:
            s[st.tensor].compute_inline()
    return s


def _make(op, attrs, types, name, placeholder_shape=None):
    out_type = infer_type(op, types, attrs)
    shape = placeholder_shape or (lambda t: t.shape)
    xs = [te.placeholder(shape(t), t.dtype, f"x{i}") for i, t in enumerate(types)]
    outs = _outputs(get_op(op).compute(get_op(op).check_attrs(attrs), xs, out_type))
    for o, t in zip(outs, _types(out_type), strict=True):
        assert o.dtype == t.dtype
    return (_schedule(outs), xs + outs, name), out_type


@pytest.fixture(scope="module")
def built():
    return build_all(CASES, lambda i, c: _make(c[0], c[1], [TensorType(a.shape, dt.from_numpy(a.dtype))
                                                           for a in c[2]], f"k{i}"), "computes_index")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[_case_id(c) for c in CASES])
def test_compute(built, i):
    mod, types = built
    _, _, ins, ref, tol = CASES[i]
    outs = [np.full(t.shape, 99, dt.numpy_dtype(t.dtype)) for t in _types(types[i])]
    mod[f"k{i}"](*ins, *outs)
    want = ref(*ins)
    for out, w in zip(outs, want if isinstance(want, tuple) else (want,), strict=True):
        w = np.asarray(w)
        assert out.shape == w.shape
        w = w.astype(out.dtype)
        if tol:
            np.testing.assert_allclose(out, w, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(out, w)


def test_inputs_are_left_untouched(built):
    # scatters copy their data; nothing writes through an input
    mod, _ = built
    i = next(k for k, c in enumerate(CASES) if c[0] == "scatter_nd")
    ins = [a.copy() for a in CASES[i][2]]
    out = np.zeros(ins[0].shape, ins[0].dtype)
    mod[f"k{i}"](*ins, out)
    for a, b in zip(ins, CASES[i][2]):
        np.testing.assert_array_equal(a, b)


def test_every_index_and_creation_op_has_a_compute_and_a_case():
    family = [n for n in list_ops()
              if get_op(n).infer.__module__ in ("ember.graph.ops.index", "ember.graph.ops.creation")]
    family += ["einsum", "nn.hardmax"]
    assert len(family) > 15
    covered = {c[0] for c in CASES}
    assert [n for n in family if get_op(n).compute is None or n not in covered] == []


def test_einsum_rejects_a_repeated_output_label():
    from ember.graph.ops.compute.index import _einsum

    x = te.placeholder((3,), F, "x")
    with pytest.raises(ember.ShapeError, match="repeat"):
        _einsum({"equation": "i->ii"}, [x], TensorType((3, 3), F))


# (op, attrs, input types with a symbolic "n", reference)
SYMBOLIC = [
    ("gather", {"axis": 0}, [(("n", 3), F), ((4,), "int64")], lambda x, i: np.take(x, i, 0)),
    ("cumsum", {"axis": 0}, [(("n", 3), F)], lambda x: np.cumsum(x, 0)),
    ("topk", {"k": 1, "axis": 0}, [(("n", 3), F)], lambda x: _topk(x, 1, 0)),
    ("shape_of", {}, [(("n", 3), F)], lambda x: np.array(x.shape)),
    ("size", {}, [((2, "n"), F)], lambda x: np.int64(x.size)),
    ("scatter_elements", {"reduction": "add"}, [(("n", 3), F), ((2, 3), "int64"), ((2, 3), F)],
     lambda x, i, u: _scatter_elements(x, i, u, 0, "add")),
]


def test_symbolic_dims():
    from ember.graph.types import Dim

    kernels = []
    for i, (op, attrs, ins, _) in enumerate(SYMBOLIC):
        types = [TensorType(shape, d) for shape, d in ins]
        kernels.append(_make(op, attrs, types, f"s{i}",
                             lambda t: tuple(d.name if isinstance(d, Dim) else d for d in t.shape)))
    mod = ember.build([k for k, _ in kernels], name="index_symbolic")
    for n in (1, 6):
        for i, (op, attrs, ins, ref) in enumerate(SYMBOLIC):
            shapes = [tuple(n if d == "n" else d for d in shape) for shape, _ in ins]
            arrays = [_x(s, d) if d != "int64" else _i(s, min(n, 2)) for s, (_, d) in zip(shapes, ins)]
            want = ref(*arrays)
            want = want if isinstance(want, tuple) else (want,)
            outs = [np.zeros(np.shape(w), dt.numpy_dtype(t.dtype)) for w, t in zip(want, _types(kernels[i][1]))]
            mod[f"s{i}"](*arrays, *outs)
            for out, w in zip(outs, want):
                np.testing.assert_allclose(out, np.asarray(w).astype(out.dtype), rtol=1e-5, atol=1e-5,
                                           err_msg=f"{op} n={n}")
