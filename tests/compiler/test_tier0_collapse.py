"""Tier 0's elementwise groups over collapsed shapes: which groups collapse and to what, and a
program that passes its buffers collapsed computes what tier 1 does."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.codegen.llvm import build_made
from ember.compiler.executable import Executable
from ember.compiler.tier0 import constant_params, remap_program, tier0_kernels
from ember.compiler.tier0_collapse import Viewed, collapse
from ember.graph import Call, Function, Var
from ember.graph.infer import infer_types
from ember.graph.types import TensorType

RNG = np.random.default_rng(0)


def _bias_relu(x_shape, b_shape, op="add", attrs=None):
    x, b = Var("p0", TensorType(x_shape, "float32")), Var("p1", TensorType(b_shape, "float32"))
    return infer_types(Function([x, b], Call("nn.relu", (Call(op, (x, b), attrs or {}),))))


def test_axes_of_one_go_and_axes_read_alike_merge():
    """A bias and ReLU over blocked data keeps the channel blocks, the plane as one axis and the
    block; over one block of channels the blocks' axis goes; over plain data the plane merges."""
    _, shapes = collapse(_bias_relu((1, 2, 5, 7, 16), (1, 2, 1, 1, 16)))
    assert shapes == ((2, 35, 16), (2, 1, 16), (2, 35, 16))
    _, shapes = collapse(_bias_relu((1, 1, 5, 7, 32), (1, 1, 1, 1, 32)))
    assert shapes == ((35, 32), (1, 32), (35, 32))
    fn, shapes = collapse(_bias_relu((1, 24, 5, 7), (24, 1, 1)))
    assert shapes == ((24, 35), (24, 1), (24, 35))
    assert fn.body.type == TensorType((24, 35), "float32")


def test_what_does_not_collapse():
    """Nothing to drop or merge, an op that names an axis, a group that is not elementwise."""
    assert collapse(_bias_relu((24, 35), (24, 1))) is None
    assert collapse(_bias_relu((1, 24, 5, 7), (24,), "nn.bias_add", {"axis": 1})) is None
    x = Var("p0", TensorType((4, 6, 5), "float32"))
    assert collapse(infer_types(Function([x], Call("transpose", (x,), {"axes": (0, 2, 1)})))) is None
    assert collapse(infer_types(Function([x], Call("nn.softmax", (x,), {"axis": 1})))) is None
    assert collapse(infer_types(Function([x], Call("mean", (x,), {"axis": (0, 2)})))) is None


def _residual(path):
    """A conv, then its bias, a residual add and a clip over blocked data (the epilogue a tier-0
    conv runs apart)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x"], ["r"]),
             helper.make_node("Clip", ["r", "lo", "hi"], ["y"])]
    inits = [numpy_helper.from_array((RNG.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32), "w"),
             numpy_helper.from_array(RNG.standard_normal(32).astype(np.float32), "b"),
             numpy_helper.from_array(np.float32(0.0), "lo"), numpy_helper.from_array(np.float32(6.0), "hi")]
    import onnx

    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 9, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 9, 9])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_program_passes_collapsed_views_and_computes_what_tier1_does(tmp_path):
    exe = ember.compile(_residual(tmp_path / "r.onnx"), wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=True)
    viewed = [c for c in chosen.values() if isinstance(c, Viewed)] + \
        [c for c in chosen.values() if getattr(c, "epilogue", (None,) * 4)[3]]
    assert viewed, "nothing collapsed"
    prog = remap_program(exe.program, chosen)
    assert any(s["kind"] == "view" for s in prog["slots"][len(exe.program["slots"]):])
    t0 = Executable(build_made(jobs, exe.target), prog, exe.constants)
    x = RNG.standard_normal((1, 32, 9, 9)).astype(np.float32)
    np.testing.assert_allclose(t0.run(x)[0], exe.run(x)[0], rtol=1e-5, atol=1e-5)


def _chain(shape, *steps):
    x = Var("p0", TensorType(shape, "float32"))
    n = x
    for op, attrs in steps:
        n = Call(op, (n,), attrs)
    return infer_types(Function([x], n))


def test_a_chain_of_reshapes_and_transposes_is_one_transpose():
    """Swin's window partition (56x56 rows into 8x8 windows of 7x7) and a head split collapse
    to a transpose of the fewest axes; the window partition of another stage to the same one."""
    swin = _chain((1, 56, 56, 96), ("reshape", {"newshape": (1, 8, 7, 8, 7, 96)}),
                  ("transpose", {"axes": (0, 1, 3, 2, 4, 5)}), ("reshape", {"newshape": (3136, 96)}))
    fn, shapes = collapse(swin)
    assert shapes == ((8, 7, 8, 672), (8, 8, 7, 672)) and fn.body.attr("axes") == (0, 2, 1, 3)
    _, later = collapse(_chain((1, 28, 28, 192), ("reshape", {"newshape": (1, 4, 7, 4, 7, 192)}),
                               ("transpose", {"axes": (0, 1, 3, 2, 4, 5)}), ("reshape", {"newshape": (784, 192)})))
    assert later == ((4, 7, 4, 1344), (4, 4, 7, 1344))
    heads = _chain((197, 768), ("reshape", {"newshape": (1, 197, 12, 64)}), ("transpose", {"axes": (0, 2, 1, 3)}))
    assert collapse(heads)[1] == ((197, 12, 64), (12, 197, 64))
    # (the reshapes after the last transpose only view its result)
    odd = _chain((2, 3), ("transpose", {"axes": (1, 0)}), ("reshape", {"newshape": (2, 3)}))
    assert collapse(odd)[1] == ((2, 3), (3, 2))


def _heads_model(path):
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3])]
    import onnx

    g = helper.make_graph(nodes, "h", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 6, 4])],
                          [numpy_helper.from_array(np.array([2, 6, 2, 4], np.int64), "s")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def _viewed_tier0(path: str) -> tuple:
    """(tier-1 executable, tier-0 executable with some group viewed collapsed) of ``path``."""
    exe = ember.compile(path, wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=True)
    assert any(isinstance(c, Viewed) for c in chosen.values())
    return exe, Executable(build_made(jobs, exe.target), remap_program(exe.program, chosen), exe.constants)


def test_a_collapsed_transpose_computes_what_tier1_does(tmp_path):
    _, t0 = _viewed_tier0(_heads_model(tmp_path / "h.onnx"))
    x = RNG.standard_normal((2, 6, 8)).astype(np.float32)
    np.testing.assert_array_equal(t0.run(x)[0], x.reshape(2, 6, 2, 4).transpose(0, 2, 1, 3))


def _one(op, shape, attrs, *others):
    ps = [Var(f"p{k}", TensorType(s, "float32")) for k, s in enumerate((shape, *others))]
    return infer_types(Function(ps, Call(op, tuple(ps), attrs)))


def test_an_op_along_the_last_axes_runs_over_rows():
    """A softmax, a layer norm, a mean over the last axes: the same op over (rows, n), its
    scale and shift vectors of n, whatever the rank (Swin's windows' softmax is BERT's)."""
    assert collapse(_one("nn.softmax", (2, 3, 5, 7), {"axis": -1}))[1] == ((30, 7), (30, 7))
    fn, shapes = collapse(_one("nn.layer_norm", (1, 4, 6, 8), {"axis": -1}, (8,), (8,)))
    assert shapes == ((24, 8), (8,), (8,), (24, 8)) and fn.body.attr("axis") == -1
    assert collapse(_one("nn.layer_norm", (2, 3, 4), {"axis": 1}, (3, 4), (3, 4)))[1] == ((2, 12), (12,), (12,), (2, 12))
    assert collapse(_one("mean", (1, 8, 5, 5), {"axis": (-1, -2), "keepdims": True}))[1] == ((8, 25), (8, 1))
    assert collapse(_one("sum", (3, 4, 5), {"axis": (2,), "keepdims": False}))[1] == ((12, 5), (12,))


def _norms_model(path):
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("Softmax", ["n"], ["y"], axis=-1),
             helper.make_node("ReduceMean", ["y"], ["m"], axes=[-1, -2], keepdims=1)]
    import onnx

    g = helper.make_graph(nodes, "n", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 40])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5, 40]),
                           helper.make_tensor_value_info("m", TensorProto.FLOAT, [2, 3, 1, 1])],
                          [numpy_helper.from_array(RNG.standard_normal(40).astype(np.float32), "g"),
                           numpy_helper.from_array(RNG.standard_normal(40).astype(np.float32), "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_ops_along_the_last_axes_over_rows_compute_what_tier1_does(tmp_path):
    exe, t0 = _viewed_tier0(_norms_model(tmp_path / "n.onnx"))
    x = RNG.standard_normal((2, 3, 5, 40)).astype(np.float32)
    for got, want in zip(t0.run(x), exe.run(x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_reshapes_at_a_groups_edges_are_views():
    """A parameter read through a reshape is passed viewed in the reshaped shape, a reshaped
    result is the output viewed: ViT's ``reshape(x) + y`` is an add, collapsed like any."""
    x, y = Var("p0", TensorType((4, 1, 6), "float32")), Var("p1", TensorType((1, 4, 6), "float32"))
    r = Call("reshape", (x,), {"newshape": (1, 4, 6)})
    fn = infer_types(Function([x, y], Call("reshape", (Call("add", (r, y)),), {"newshape": (4, 6)})))
    g, shapes = collapse(fn)
    assert shapes == ((24,), (24,), (24,)) and g.body.op == "add"
    both = infer_types(Function([x, y], Call("add", (Call("reshape", (x,), {"newshape": (1, 4, 6)}),
                                                     Call("exp", (Call("reshape", (x,), {"newshape": (1, 4, 6)}),))))))
    assert collapse(both)[1][0] == (24,)  # (one reshape read twice: still one view)


def test_an_op_along_axes_runs_over_outer_n_inner():
    """A slice, concat or gather of one axis over ``(outer, n, inner)`` whatever the rank, an
    outer or inner of none as 1 (Swin's slices of rows and of columns, of every stage, share it)."""
    rows = collapse(_one("strided_slice", (1, 56, 56, 96), {"axes": (1,), "begin": (0,), "end": (56,), "strides": (2,)}))
    assert rows[1] == ((1, 56, 5376), (1, 28, 5376)) and rows[0].body.attr("axes") == (1,)
    cols = collapse(_one("strided_slice", (1, 56, 56, 96), {"axes": (2,), "begin": (1,), "end": (56,), "strides": (2,)}))
    assert cols[1] == ((56, 56, 96), (56, 28, 96))
    cat = collapse(_one("concat", (1, 7, 56, 96), {"axis": -1}, (1, 7, 56, 32)))
    assert cat[1] == ((392, 96, 1), (392, 32, 1), (392, 128, 1)) and cat[0].body.attr("axis") == 1
    x, i = Var("p0", TensorType((3, 64, 3, 49, 32), "float32")), Var("p1", TensorType((), "int64"))
    g = collapse(infer_types(Function([x, i], Call("gather", (x, i), {"axis": 0}))))
    assert g[1] == ((1, 3, 301056), (), (1, 301056))
    assert collapse(_one("strided_slice", (4, 6, 5), {"axes": (1,), "begin": (1,), "end": (3,), "strides": None})) is None


def test_a_product_of_activations_runs_over_one_batch_axis():
    fn, shapes = collapse(_one("nn.matmul", (64, 3, 49, 32), {}, (64, 3, 32, 49)))
    assert shapes == ((192, 49, 32), (192, 32, 49), (192, 49, 49)) and fn.body.op == "nn.matmul"
    assert collapse(_one("nn.matmul", (1, 12, 197, 64), {}, (1, 12, 64, 197)))[1][0] == (12, 197, 64)
    assert collapse(_one("nn.matmul", (2, 3, 4, 5), {}, (1, 3, 5, 4))) is None  # (a broadcast batch)


def _along_model(path):
    """Ops along axes alone: a slice of rows by 2, a concat of columns, a gather of one row."""
    nodes = [helper.make_node("Slice", ["x", "b", "e", "a", "s"], ["r"]),
             helper.make_node("Concat", ["x", "x"], ["c"], axis=3),
             helper.make_node("Gather", ["x", "i"], ["g"], axis=2)]
    import onnx

    ints = lambda v, n: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    g = helper.make_graph(nodes, "a", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 8, 5])],
                          [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 6, 4, 5]),
                           helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 6, 8, 10]),
                           helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 6, 5])],
                          [ints([1], "b"), ints([8], "e"), ints([2], "a"), ints([2], "s"), ints(3, "i")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_ops_along_axes_over_outer_n_inner_compute_what_tier1_does(tmp_path):
    exe, t0 = _viewed_tier0(_along_model(tmp_path / "a.onnx"))
    x = RNG.standard_normal((1, 6, 8, 5)).astype(np.float32)
    for got, want in zip(t0.run(x), (x[:, :, 1::2], np.concatenate([x, x], 3), x[:, :, 3])):
        np.testing.assert_array_equal(got, want)


def _pools_model(path):
    """Max pools of two windows and strides, an average pool with a one-sided pad."""
    nodes = [helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["x"], ["b"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("AveragePool", ["x"], ["c"], kernel_shape=[3, 3], pads=[0, 0, 1, 1])]
    import onnx

    g = helper.make_graph(nodes, "p", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 9, 8])],
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 5, 5, 4]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 5, 4, 4]),
                           helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 5, 8, 7])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_tier0_pools_window_is_sizes(tmp_path):
    """One tier-0 max pool kernel serves windows of 3x3 by 2 and 2x2 by 2 (a pad of 0 stays
    static: the two pads make two kernels), and they compute what tier 1 does."""
    exe = ember.compile(_pools_model(tmp_path / "p.onnx"), wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=True)
    texts = [j[1] for j in jobs if "max_pool" in j[0]]
    assert texts and all("pool_size=(s" in t for t in texts)
    t0 = Executable(build_made(jobs, exe.target), remap_program(exe.program, chosen), exe.constants)
    x = RNG.standard_normal((1, 5, 9, 8)).astype(np.float32)
    for got, want in zip(t0.run(x), exe.run(x)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _convs_model(path):
    """Convolutions of three windows, strides, paddings and dilations, over the blocked data
    the first one writes."""
    def w(o, i, k):
        return numpy_helper.from_array((RNG.standard_normal((o, i, k, k)) * 0.2).astype(np.float32), f"w{o}_{i}_{k}")
    nodes = [helper.make_node("Conv", ["x", "w32_16_3"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w32_32_5"], ["b"], pads=[2, 1, 2, 1], strides=[2, 1]),
             helper.make_node("Conv", ["a", "w32_32_3"], ["c"], dilations=[2, 2], pads=[2, 2, 2, 2]),
             helper.make_node("Conv", ["a", "w32_32_1"], ["d"])]
    import onnx

    g = helper.make_graph(nodes, "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 11, 10])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "bcd"],
                          [w(32, 16, 3), w(32, 32, 5), w(32, 32, 3), w(32, 32, 1)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_tier0_convs_window_is_sizes(tmp_path):
    """Convolutions of 3x3, 5x5 by (2, 1) and dilated 3x3 windows share a tier-0 kernel (a pad
    of 0 and the data's layout aside) and compute what tier 1 does."""
    exe = ember.compile(_convs_model(tmp_path / "c.onnx"), wait=True)
    jobs, chosen = tier0_kernels(exe.groups, constant_params(exe.program), split=True)
    convs = [j for j in jobs if "conv2d" in j[0]]
    assert convs and all("dilation=(s" in j[1] for j in convs)
    assert len(convs) < 4  # (four convolutions)
    t0 = Executable(build_made(jobs, exe.target), remap_program(exe.program, chosen), exe.constants)
    x = RNG.standard_normal((1, 16, 11, 10)).astype(np.float32)
    for got, want in zip(t0.run(x), exe.run(x)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_concat_of_parts_in_another_order_than_its_parameters():
    """The group numbers its parameters by first use, a concat may take them in another order
    (a reverse GRU's steps): the shapes are the parameters', the parts keep their order."""
    a, b = Var("p0", TensorType((2, 5), "float32")), Var("p1", TensorType((1, 3, 5), "float32"))
    r = Call("reshape", (a,), {"newshape": (1, 2, 5)})
    fn = infer_types(Function([a, b], Call("concat", (b, r), {"axis": 1})))
    g, shapes = collapse(fn)
    assert shapes == ((1, 2, 5), (1, 3, 5), (1, 5, 5))
    assert [x.name for x in g.body.args] == ["p1", "p0"] and [p.name for p in g.params] == ["p0", "p1"]
