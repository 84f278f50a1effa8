"""Import + type inference of every ONNX node test case (``onnx.backend.test.case.node``).

A case *passes* when its model imports and the inferred output types equal the shapes and
dtypes of its expected outputs. Inputs that decide shapes (``value_inputs``) are bound to the
case's input values, as a runtime caller will bind them. Run as a script for a report:

    python -m tests.frontend.onnx.node_cases
"""
from __future__ import annotations

import collections
import dataclasses
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

from ember.errors import EmberError
from ember.frontend.onnx import from_onnx, value_inputs
from ember.graph import TupleType
from ember.loop import dtype as dt

# the op types issue 3 lists (each must pass all of its cases but those needing what Ember
# does not support yet: exotic dtypes, training mode, MaxPool indices, antialiasing)
LISTED = """Conv ConvTranspose Gemm MatMul BatchNormalization LRN MaxPool AveragePool GlobalAveragePool
GlobalMaxPool Abs Acos Acosh Asin Asinh Atan Atanh Ceil Cos Cosh Exp Floor Log Neg Reciprocal Round Sign Sin
Sinh Sqrt Tan Tanh Add Sub Mul Div Pow Mod BitShift Relu LeakyRelu Clip Sigmoid HardSigmoid Erf Gelu Softplus
Elu Selu PRelu Celu Softsign HardSwish Mish ThresholdedRelu Shrink IsNaN IsInf Equal Greater GreaterOrEqual
Less LessOrEqual And Or Xor Not BitwiseAnd BitwiseOr BitwiseXor BitwiseNot Where Cast CastLike Softmax
LogSoftmax LayerNormalization ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2
ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin Concat Split Slice Pad Reshape Flatten Transpose
Squeeze Unsqueeze Expand Tile Gather GatherElements ScatterElements Shape Size ConstantOfShape Range Resize
DepthToSpace SpaceToDepth Dropout Identity Sum Mean Max Min TopK CumSum Einsum""".split()


@dataclasses.dataclass
class Result:
    name: str
    ops: frozenset  # op types in the case's graph (Constant aside)
    status: str  # "ok", "unsupported" (named up front or while converting), "mismatch", "error", "crash"
    detail: str = ""


def _array(x):
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, np.generic):  # some cases give 0-d results as numpy scalars
        return np.asarray(x)
    return x


def run_case(case) -> Result:
    m = case.model
    ops = frozenset(n.op_type for n in m.graph.node) - {"Constant"}
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    inputs, outputs = case.data_sets[0]
    try:
        static = {n: _array(inputs[names.index(n)]) for n in value_inputs(m) if n in names}
        narrow: dict = {}
        mod = from_onnx(m, static_inputs=static, io_narrow=narrow)
    except EmberError as e:
        unsupported = hasattr(e, "problems") or type(e).__name__ in ("UnsupportedOpError", "DTypeError", "SequenceOutputError")
        return Result(case.name, ops, "unsupported" if unsupported else "error", f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - a crash is what this harness exists to catch
        return Result(case.name, ops, "crash", f"{type(e).__name__}: {e}")
    expected = [_array(o) for o in outputs]
    if not all(isinstance(o, np.ndarray) for o in expected):
        return Result(case.name, ops, "unsupported", "outputs are sequences or optionals")
    t = mod.main.ret_type
    got = [(tuple(f.shape), f.dtype) for f in (t.fields if isinstance(t, TupleType) else [t])]
    kinds = narrow.get("outputs") or [None] * len(expected)
    # a narrow type (float8, int4, ...) comes out as its bytes
    want = [(tuple(o.shape), "uint8" if k and o.dtype.name == k else dt.from_numpy(o.dtype))
            for o, k in zip(expected, kinds)]
    if not _same(got, want):
        return Result(case.name, ops, "mismatch", f"inferred {got}, expected {want}")
    return Result(case.name, ops, "ok")


def _same(got: list, want: list) -> bool:
    """Inferred and expected (shape, dtype) pairs agree; a data size (a Dim a kernel computes
    while running, such as NonZero's count) stands for any size."""
    from ember.graph import Dim

    if len(got) != len(want):
        return False
    for (gs, gd), (ws, wd) in zip(got, want):
        if gd != wd or len(gs) != len(ws):
            return False
        if any(not isinstance(g, Dim) and g != w for g, w in zip(gs, ws)):
            return False
    return True


def run_all() -> list:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators divide by zero on purpose
        cases = collect_testcases()
    return [run_case(c) for c in cases]


def report(results: list) -> str:
    counts = collections.Counter(r.status for r in results)
    lines = [f"node cases: {counts['ok']} of {len(results)} import and infer correctly ({dict(counts)})"]
    per = collections.defaultdict(lambda: [0, 0])
    for r in results:
        if len(r.ops) == 1:
            op = next(iter(r.ops))
            per[op][1] += 1
            per[op][0] += r.status == "ok"
    listed = {op: v for op, v in per.items() if op in LISTED}
    lines.append(f"single-op cases of the listed ops: {sum(v[0] for v in listed.values())} of "
                 f"{sum(v[1] for v in listed.values())}")
    for op, (ok, n) in sorted(listed.items()):
        if ok != n:
            lines.append(f"  {op}: {ok}/{n}")
    return "\n".join(lines)


if __name__ == "__main__":
    res = run_all()
    print(report(res))
    for r in res:
        if r.status in ("mismatch", "error", "crash"):
            print(r.status, r.name, r.detail[:300])
