"""Parallel convolutions of one input, added, as one convolution (RepVGG's branches)."""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import ember
from ember.frontend.onnx import from_onnx
from ember.graph import topo_calls
from ember.graph.passes import PassContext, VerifyAfterPass, fold_constant, merge_branches, simplify_inference

RNG = np.random.default_rng(3)


def _block(C=16, F=16, groups=1, stride=1, small_pad=0, dilation=1, identity=True, share=False):
    """RepVGG's block as timm exports it: a 3x3 conv, a 1x1 conv and a batch norm of the input,
    added, then ReLU."""
    cg = C // groups
    inits = {"w3": RNG.standard_normal((F, cg, 3, 3)).astype(np.float32) * 0.2, "b3": RNG.standard_normal(F).astype(np.float32),
             "w1": RNG.standard_normal((F, cg, 1, 1)).astype(np.float32) * 0.2, "b1": RNG.standard_normal(F).astype(np.float32),
             "g": RNG.random(C).astype(np.float32) + 0.5, "be": RNG.standard_normal(C).astype(np.float32),
             "m": RNG.standard_normal(C).astype(np.float32) * 0.1, "v": RNG.random(C).astype(np.float32) + 0.5}
    pad3 = dilation
    nodes = [h.make_node("Conv", ["x", "w3", "b3"], ["c3"], pads=[pad3] * 4, strides=[stride] * 2, group=groups,
                         dilations=[dilation] * 2),
             h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[small_pad] * 4, strides=[stride] * 2, group=groups),
             h.make_node("Add", ["c3", "c1"], ["s"])]
    if identity:
        nodes += [h.make_node("BatchNormalization", ["x", "g", "be", "m", "v"], ["bn"]),
                  h.make_node("Add", ["s", "bn"], ["t"])]
    last = "t" if identity else "s"
    nodes.append(h.make_node("Relu", [last], ["y"]))
    outs = [h.make_tensor_value_info("y", TP.FLOAT, None)]
    if share:
        outs.append(h.make_tensor_value_info("c1", TP.FLOAT, None))
    g = h.make_graph(nodes, "block", [h.make_tensor_value_info("x", TP.FLOAT, [1, C, 10, 12])], outs,
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _convs(m) -> int:
    mod = from_onnx(m)
    mod = PassContext(opt_level=2, instruments=[VerifyAfterPass()]).run(
        mod, [fold_constant, simplify_inference, merge_branches])
    return sum(c.op == "nn.conv2d" for c in topo_calls(mod.main))


@pytest.mark.parametrize("kw", [dict(), dict(identity=False), dict(groups=16), dict(stride=2, identity=False)])
def test_the_branches_are_one_conv_and_match(kw):
    """(Groups of 16: MobileOne's depthwise branches; strided: RepVGG's first block of a stage,
    the 1x1 at the 3x3's center.)"""
    m = _block(**kw)
    assert _convs(m) == 1
    x = RNG.standard_normal((1, 16, 10, 12)).astype(np.float32)
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_allclose(ember.compile(m).run(x)[0], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kw", [dict(dilation=2, identity=False), dict(share=True, identity=False)])
def test_branches_that_do_not_line_up_or_are_read_elsewhere_stay_apart(kw):
    """A dilated 3x3 (the 1x1 would sit among spread taps), and a branch read elsewhere too
    (its work would be done twice)."""
    m = _block(**kw)
    assert _convs(m) == 2
    x = RNG.standard_normal((1, 16, 10, 12)).astype(np.float32)
    for a, b in zip(ember.compile(m).run(x), ReferenceEvaluator(m).run(None, {"x": x})):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
