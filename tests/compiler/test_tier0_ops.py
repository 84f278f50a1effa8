"""Tier 0's groups that move data, one op at a time (``ember.compiler.tier0_ops``): how a group
comes apart, and a program that runs its ops through scratch buffers computes what tier 1 does."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.codegen.llvm import build_made
from ember.compiler.executable import Executable
from ember.compiler.tier0 import constant_params, remap_program, tier0_kernels
from ember.compiler.tier0_ops import Steps, op_steps
from ember.graph import Call, Function, Var
from ember.graph.infer import infer_types
from ember.graph.types import TensorType

RNG = np.random.default_rng(0)


def _window_shift():
    """Swin's cyclic shift and window partition as one group: a slice of rows, a concat, a
    reshape into windows and a transpose."""
    x, y = Var("p0", TensorType((1, 14, 14, 8), "float32")), Var("p1", TensorType((1, 3, 14, 8), "float32"))
    s = Call("strided_slice", (x,), {"axes": (1,), "begin": (3,), "end": (14,), "strides": None})
    c = Call("concat", (s, y), {"axis": 1})
    r = Call("reshape", (c,), {"newshape": (1, 2, 7, 2, 7, 8)})
    return infer_types(Function([x, y], Call("transpose", (r,), {"axes": (0, 1, 3, 2, 4, 5)})))


def test_a_group_that_moves_data_comes_apart_op_by_op():
    steps, scratch = op_steps(_window_shift())
    assert [f.body.op for f, _, _ in steps] == ["strided_slice", "concat", "transpose"]
    # (the slice writes scratch 0, the concat reads it and the group's second parameter; the
    # transpose reads the concat's scratch viewed in windows and writes the output)
    assert [refs for _, refs, _ in steps] == [(("p", 0), ("t", 0)), (("t", 0), ("p", 1), ("t", 1)), (("t", 1), ("o",))]
    assert steps[2][0].params[0].type.shape == (1, 2, 7, 2, 7, 8)
    assert [t.shape for t in scratch] == [(1, 11, 14, 8), (1, 14, 14, 8)]


def test_groups_that_stay_whole():
    """An op alone, an elementwise chain, a group of symbolic shapes."""
    x = Var("p0", TensorType((4, 6), "float32"))
    assert op_steps(infer_types(Function([x], Call("transpose", (x,), {"axes": (1, 0)})))) is None
    assert op_steps(infer_types(Function([x], Call("exp", (Call("negative", (x,)),))))) is None
    from ember.graph.types import Dim
    n = Var("p0", TensorType((Dim("n"), 6), "float32"))
    assert op_steps(infer_types(Function([n], Call("exp", (Call("transpose", (n,), {"axes": (1, 0)}),))))) is None


def _shift_model(path):
    """A roll of rows (a slice and a concat), windows, a transpose and a scale: fused in one group."""
    nodes = [helper.make_node("Slice", ["x", "b", "e", "a"], ["lo"]),
             helper.make_node("Slice", ["x", "z", "b", "a"], ["hi"]),
             helper.make_node("Concat", ["lo", "hi"], ["c"], axis=1),
             helper.make_node("Reshape", ["c", "w"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 1, 3, 2, 4, 5]),
             helper.make_node("Mul", ["t", "k"], ["y"])]
    ints = lambda v, n: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    g = helper.make_graph(nodes, "s", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 14, 14, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 7, 7, 8])],
                          [ints([3], "b"), ints([14], "e"), ints([1], "a"), ints([0], "z"),
                           ints([1, 2, 7, 2, 7, 8], "w"), numpy_helper.from_array(np.float32(0.5), "k")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_program_running_a_group_op_by_op_computes_what_tier1_does(tmp_path):
    exe = ember.compile(_shift_model(tmp_path / "s.onnx"), wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=True)
    apart = [c for c in chosen.values() if isinstance(c, Steps)]
    assert apart and len(apart[0].steps) >= 3
    prog = remap_program(exe.program, chosen)
    assert len(prog["calls"]) > len(exe.program["calls"])
    t0 = Executable(build_made(jobs, exe.target), prog, exe.constants)
    x = RNG.standard_normal((1, 14, 14, 8)).astype(np.float32)
    want = np.roll(x, -3, axis=1).reshape(1, 2, 7, 2, 7, 8).transpose(0, 1, 3, 2, 4, 5) * 0.5
    np.testing.assert_array_equal(t0.run(x)[0], want)
    np.testing.assert_array_equal(exe.run(x)[0], want)
