"""block_layout: convolutional regions in the blocked channel layout, layout changes only at
the region's edges, the same results as the plain layout."""
import numpy as np
import pytest

import ember
from ember.graph import Tuple as Tuple_
from ember.graph import Var, const, topo_calls
from ember.graph.passes import PassContext, block_layout, dce, fold_constant, simplify_inference
from ember.kernels.conv_nchwc import channel_block
from ember.compiler.fold import evaluate_constants

FOLD = {"evaluate": evaluate_constants}  # (fold_constant computes with the compiler)

from .conftest import T, call, module, rand

FB = channel_block()


def _conv(x, w, **attrs):
    return call("nn.conv2d", x, const(w), **{"padding": (1, 1, 1, 1), **attrs})


def run(mod):
    return PassContext(opt_level=3, config=FOLD).run(mod, [simplify_inference, block_layout, fold_constant, dce])


def _ops(mod):
    return [c.op for c in topo_calls(mod)]


def _residual_block(x, c):
    """conv-bias-relu, conv-bias, + x, relu, then a global average pool: a ResNet block."""
    y = call("nn.relu", call("add", _conv(x, rand(c, c, 3, 3) * 0.1), const(rand(c, 1, 1))))
    z = call("add", _conv(y, rand(c, c, 3, 3) * 0.1), const(rand(1, c, 1, 1)))
    return call("nn.global_avg_pool2d", call("nn.relu", call("add", z, x)))


def test_a_residual_block_runs_blocked_between_its_edges():
    c = 2 * FB
    x = Var("x", T(1, c, 9, 9))
    after = run(module([x], _residual_block(x, c)))
    ops = _ops(after)
    # the first conv reads the input as it is; the block, its biases and the residual stay
    # blocked; the layout changes back once, before the pool
    assert ops.count("nn.conv2d_nchwc") == 2 and "nn.conv2d" not in ops
    assert ops.count("unblock_channels") == 1 and ops.index("unblock_channels") == len(ops) - 2
    # the per-channel biases were blocked and folded; the residual input is blocked once
    blocks = [c_ for c_ in topo_calls(after) if c_.op == "block_channels"]
    assert len(blocks) == 1 and blocks[0].args[0] is x
    first = next(c_ for c_ in topo_calls(after) if c_.op == "nn.conv2d_nchwc")
    assert first.args[0] is x and first.type.shape == (1, c // FB, 9, 9, FB)


def test_blocked_and_plain_layouts_agree():
    c = 2 * FB
    x = Var("x", T(2, c, 7, 10))
    mod = module([x], _residual_block(x, c))
    blocked, plain = ember.compile(mod), ember.compile(mod, disabled_passes=["block_layout"])
    xv = rand(2, c, 7, 10)
    np.testing.assert_allclose(blocked.run(xv)[0], plain.run(xv)[0], rtol=1e-4, atol=1e-4)


def test_what_does_not_fit_the_blocks_keeps_the_plain_layout():
    x = Var("x", T(1, 8, 9, 9))
    # fewer output channels than a vector, groups, runtime weights
    for body in (_conv(x, rand(FB // 2 - 4, 8, 3, 3)), _conv(x, rand(2 * FB, 4, 3, 3), groups=2)):
        assert "nn.conv2d_nchwc" not in _ops(run(module([x], body)))
    w = Var("w", T(FB, 8, 3, 3))
    assert "nn.conv2d_nchwc" not in _ops(run(module([x, w], call("nn.conv2d", x, w))))


def test_fewer_channels_than_a_block_take_a_block_of_one_vector():
    """A conv of fewer filters than two vectors (MobileNet's 16 and 24 on AVX-512) is blocked
    by one vector, padded to whole vectors; the next conv reads those blocks; the results
    are the plain layout's."""
    c = FB // 2 + 4
    x = Var("x", T(1, 8, 9, 9))
    y = call("nn.relu", _conv(x, rand(c, 8, 3, 3) * 0.1))
    mod = module([x], _conv(y, rand(FB, c, 3, 3) * 0.1))
    convs = [n for n in topo_calls(run(mod)) if n.op == "nn.conv2d_nchwc"]
    assert [n.type.shape[-1] for n in convs] == [FB // 2, FB]
    assert convs[1].args[0].op == "nn.relu" and convs[1].args[0].type.shape[1] == 2
    blocked, plain = ember.compile(mod), ember.compile(mod, disabled_passes=["block_layout"])
    xv = rand(1, 8, 9, 9)
    np.testing.assert_allclose(blocked.run(xv)[0], plain.run(xv)[0], rtol=1e-4, atol=1e-4)


def test_the_block_is_the_one_that_pads_the_channels_least():
    """Two vectors where they pad no more than one (64 channels, or 60: both pad to 64), one
    where they would (EfficientNet's 40 or 144: 48 or 144 against 64 or 160), and one under
    two vectors."""
    lanes = FB // 2
    assert channel_block(channels=4 * lanes) == FB and channel_block(channels=4 * lanes - 4) == FB
    assert channel_block(channels=3 * lanes) == lanes and channel_block(channels=2 * lanes + 8) == lanes
    assert channel_block(channels=2 * lanes - 4) == lanes
    x = Var("x", T(1, 8, 9, 9))
    c = 3 * lanes - 4
    mod = module([x], call("nn.relu", _conv(call("nn.relu", _conv(x, rand(c, 8, 3, 3) * 0.1)), rand(c, c, 1, 1) * 0.1)))
    after = run(mod)
    assert [n.type.shape[-1] for n in topo_calls(after) if n.op == "nn.conv2d_nchwc"] == [lanes, lanes]
    xv = rand(1, 8, 9, 9)
    np.testing.assert_allclose(ember.compile(mod).run(xv)[0],
                               ember.compile(mod, disabled_passes=["block_layout"]).run(xv)[0], rtol=1e-4, atol=1e-5)


def test_channels_past_the_last_whole_block_pad_it():
    """F = 2 FB - 4 filters: the last block is padded with zero filters and cropped when the
    region ends; ops in between carry the padding (finite: zeros through add, relu and a
    pool), the next conv reads the padded blocks against zero weights, and a concat stops the
    region. The results are the plain layout's."""
    c = 2 * FB - 4
    x = Var("x", T(1, 8, 9, 9))
    y = call("nn.relu", call("add", _conv(x, rand(c, 8, 3, 3) * 0.1), const(rand(c, 1, 1))))
    p = call("nn.max_pool2d", y, pool_size=(2, 2), strides=(2, 2))
    z = call("sigmoid", _conv(p, rand(2 * FB, c, 3, 3) * 0.1))
    both = call("concat", p, call("add", p, const(rand(1, c, 1, 1))), axis=1)
    mod = module([x], Tuple_([z, both]))
    after = run(mod)
    unblocks = [n for n in topo_calls(after) if n.op == "unblock_channels"]
    assert _ops(after).count("nn.conv2d_nchwc") == 2 and "concat" in _ops(after)
    assert any(n.attr("channels", 0) == c for n in unblocks)
    second = [n for n in topo_calls(after) if n.op == "nn.conv2d_nchwc"][1]
    assert second.args[0].op == "nn.max_pool2d"  # the padded blocks themselves
    assert second.args[1].type.shape[1] == 2 * FB  # the weights' input channels padded to the blocks
    blocked, plain = ember.compile(mod), ember.compile(mod, disabled_passes=["block_layout"])
    xv = rand(1, 8, 9, 9)
    for a, b in zip(blocked.run(xv), plain.run(xv)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_region_hundreds_of_convs_deep_reads_its_padded_blocks():
    """Whether padding is finite is traced back through the whole region: 400 convs of
    padded blocks in a row (EfficientNet-B3's depth) once hit Python's recursion limit."""
    c = 2 * FB - 4
    x = Var("x", T(1, c, 4, 4))
    y = x
    for _ in range(400):
        y = call("nn.relu", _conv(y, rand(c, c, 1, 1) * 0.1, padding=(0, 0, 0, 0)))
    after = run(module([x], y))
    convs = [n for n in topo_calls(after) if n.op == "nn.conv2d_nchwc"]
    assert len(convs) == 400 and convs[-1].args[0].op == "nn.relu"  # the padded blocks themselves


def test_padding_that_may_not_be_finite_is_not_read_by_a_conv():
    """1 / x makes the zero padding infinite: zero weights would not cancel it (0 * inf), so
    the next conv reads the plain layout."""
    c = FB + 4
    x = Var("x", T(1, 8, 9, 9))
    y = call("reciprocal", call("add", _conv(x, rand(c, 8, 3, 3)), const(rand(c, 1, 1))))
    z = _conv(y, rand(FB, c, 3, 3) * 0.1)
    mod = module([x], z)
    after = run(mod)
    second = [n for n in topo_calls(after) if n.op == "nn.conv2d_nchwc"][1]
    assert second.args[0].op == "unblock_channels"
    xv = rand(1, 8, 9, 9)
    np.testing.assert_allclose(ember.compile(mod).run(xv)[0],
                               ember.compile(mod, disabled_passes=["block_layout"]).run(xv)[0], rtol=1e-3, atol=1e-3)


def test_an_operand_that_broadcasts_across_channels_stops_the_region():
    """A value varying along H or W cannot be blocked: the op reads the unblocked result."""
    x = Var("x", T(1, 8, 5, 5))
    body = call("add", _conv(x, rand(FB, 8, 3, 3)), const(rand(1, 1, 5, 1)))
    after = run(module([x], body))
    ops = _ops(after)
    assert ops == ["nn.conv2d_nchwc", "unblock_channels", "add"]
    xv = rand(1, 8, 5, 5)
    got = ember.compile(module([x], body)).run(xv)[0]
    want = ember.compile(module([x], body), disabled_passes=["block_layout"]).run(xv)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_concat_of_blocked_branches_stays_blocked():
    """DenseNet/Inception: branches concatenated along the channels, then a per-channel
    scale and a conv: one region, the plain input blocked once."""
    x = Var("x", T(1, FB, 6, 6))
    a = call("nn.relu", _conv(x, rand(FB, FB, 3, 3)))
    b = _conv(x, rand(2 * FB, FB, 1, 1), padding=(0, 0, 0, 0))
    cat = call("concat", a, b, x, axis=1)
    body = _conv(call("multiply", cat, const(rand(4 * FB, 1, 1))), rand(FB, 4 * FB, 3, 3))
    after = run(module([x], body))
    ops = _ops(after)
    assert ops.count("unblock_channels") == 1 and ops[-1] == "unblock_channels"
    assert ops.count("concat") == 1 and ops.count("block_channels") == 1
    xv = rand(1, FB, 6, 6)
    got = ember.compile(module([x], body)).run(xv)[0]
    want = ember.compile(module([x], body), disabled_passes=["block_layout"]).run(xv)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_depthwise_conv_takes_its_producers_block():
    """MixNet: two 1x1 convs of 3 blocks each concatenated, then a depthwise conv over the 6
    blocks, for which a block of its own would be wider: it runs on the concat's blocks, with
    no layout change between them."""
    # branches of c channels whose block differs from what 2c channels would take (here 48 in
    # blocks of 16, 96 in blocks of 32)
    c = next(c for c in range(8, 256, 8) if channel_block(channels=c) != channel_block(channels=2 * c))
    x = Var("x", T(1, 16, 8, 8))
    a = _conv(x, rand(c, 16, 1, 1), padding=(0, 0, 0, 0))
    b = _conv(x, rand(c, 16, 1, 1), padding=(0, 0, 0, 0))
    cat = call("nn.relu", call("concat", a, b, axis=1))
    body = call("nn.relu", _conv(cat, rand(2 * c, 1, 3, 3), groups=2 * c, strides=(2, 2)))
    after = run(module([x], body))
    ops = _ops(after)
    assert ops.count("unblock_channels") == 1 and ops[-2:] == ["nn.relu", "unblock_channels"]
    dw = [n for n in topo_calls(after) if n.op == "nn.conv2d_nchwc"][-1]
    assert dw.attr("groups") == 2 * c and dw.args[0].type.shape[-1] == channel_block(channels=c)
    xv = rand(1, 16, 8, 8)
    got = ember.compile(module([x], body)).run(xv)[0]
    want = ember.compile(module([x], body), disabled_passes=["block_layout"]).run(xv)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis", [2, -1])
def test_bands_concatenated_along_a_spatial_axis_stay_blocked(axis):
    """trim_conv_taps cuts a dilated conv's output into bands of rows or columns, each its own
    conv, concatenated along H or W: the bands concatenate blocked (padded channels too),
    read by the next conv without leaving the blocks."""
    c = FB + FB // 2  # (the last block padded)
    x = Var("x", T(1, FB, 6, 6))
    a = _conv(x, rand(c, FB, 3, 3) * 0.1)
    b = _conv(x, rand(c, FB, 1, 1) * 0.1, padding=(0, 0, 0, 0))
    band = call("nn.relu", call("concat", a, b, axis=axis))
    body = _conv(band, rand(FB, c, 3, 3) * 0.1)
    after = run(module([x], body))
    ops = _ops(after)
    assert ops.count("unblock_channels") == 1 and ops[-1] == "unblock_channels"
    cat, = [n for n in topo_calls(after) if n.op == "concat"]
    assert cat.type.ndim == 5 and cat.attr("axis") == axis % 4
    xv = rand(1, FB, 6, 6)
    got = ember.compile(module([x], body)).run(xv)[0]
    want = ember.compile(module([x], body), disabled_passes=["block_layout"]).run(xv)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_pools_of_blocked_operands_pool_the_blocks():
    x = Var("x", T(1, 3, 12, 12))
    y = call("nn.max_pool2d", call("nn.relu", _conv(x, rand(FB, 3, 3, 3))), pool_size=(3, 3), strides=(2, 2),
             padding=(1, 1, 1, 1))
    body = call("nn.avg_pool2d", _conv(y, rand(FB, FB, 1, 1), padding=(0, 0, 0, 0)), pool_size=(2, 2),
                strides=(2, 2))
    after = run(module([x], body))
    pools = [c_ for c_ in topo_calls(after) if c_.op.endswith("pool2d")]
    assert [p.attr("blocked") for p in pools] == [True, True] and _ops(after).count("unblock_channels") == 1
    xv = rand(1, 3, 12, 12)
    got = ember.compile(module([x], body)).run(xv)[0]
    want = ember.compile(module([x], body), disabled_passes=["block_layout"]).run(xv)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_bias_add_along_the_channels_stays_blocked():
    x = Var("x", T(1, 8, 5, 5))
    body = call("nn.relu", call("nn.bias_add", _conv(x, rand(FB, 8, 3, 3)), const(rand(FB)), axis=1))
    after = run(module([x], body))
    assert _ops(after) == ["nn.conv2d_nchwc", "add", "nn.relu", "unblock_channels"]
    xv = rand(1, 8, 5, 5)
    got = ember.compile(module([x], body)).run(xv)[0]
    want = ember.compile(module([x], body), disabled_passes=["block_layout"]).run(xv)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _same_as_plain(mod, shape, rtol=1e-4, atol=1e-5):
    xv = rand(*shape)
    for a, b in zip(ember.compile(mod).run(xv), ember.compile(mod, disabled_passes=["block_layout"]).run(xv)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def test_a_mobile_block_stays_blocked_through_depthwise_and_squeeze_excitation():
    """MobileNetV3/EfficientNet: expand 1x1, depthwise 3x3 stride 2 with hard-swish, a
    squeeze-excitation (mean over the plane, two 1x1 convs, hard-sigmoid, multiply) and the
    projection: no layout change inside, with channels that pad the last block."""
    c, e = FB + 8, 2 * FB + 8
    x = Var("x", T(1, c, 12, 12))
    y = call("nn.relu", call("add", _conv(x, rand(e, c, 1, 1) * 0.2, padding=(0, 0, 0, 0)), const(rand(e, 1, 1))))
    d = call("nn.hard_swish", _conv(y, rand(e, 1, 3, 3), groups=e, strides=(2, 2)))
    s = call("mean", d, axis=(2, 3), keepdims=True)
    s = call("nn.relu", _conv(s, rand(8, e, 1, 1) * 0.2, padding=(0, 0, 0, 0)))
    s = call("nn.hard_sigmoid", _conv(s, rand(e, 8, 1, 1) * 0.2, padding=(0, 0, 0, 0)), alpha=1 / 6, beta=0.5)
    z = _conv(call("multiply", d, s), rand(c, e, 1, 1) * 0.2, padding=(0, 0, 0, 0))
    mod = module([x], z)
    after = run(mod)
    ops = _ops(after)
    # (the expand conv may read the plain input, as on AVX-512, or blocked, as on AVX2)
    assert ops.count("nn.conv2d_nchwc") + ops.count("nn.conv2d") == 5 and ops.count("nn.conv2d_nchwc") >= 4
    assert "mean" in ops
    big = [n for n in topo_calls(after) if n.op == "unblock_channels" and n.type.shape[2] > 1]
    assert len(big) == 1 and big[0] is after.main.body  # only the result leaves the blocks
    _same_as_plain(mod, (1, c, 12, 12))


@pytest.mark.parametrize("g", [FB // 2, FB // 4, FB // 8])
def test_grouped_convs_read_their_own_groups_channels(g):
    """RegNetX's groups of 16 channels (a vector on AVX-512, half a block), RegNetY's 8 (half a
    vector), ResNeXt's 4: each filter reads its own group's channels (weights (C/FB, g, kh,
    kw, FB)), not a block-diagonal matrix with zeros between the groups (FB / g times the
    FLOPs). Strided too, and a padded last block."""
    for c, strides, hw in ((3 * FB, (1, 1), 9), (2 * FB, (2, 2), 12), (FB + g, (1, 1), 7)):
        x = Var("x", T(1, c, hw, hw))
        y = call("nn.relu", _conv(x, rand(c, c, 1, 1) * 0.2, padding=(0, 0, 0, 0)))
        z = call("nn.relu", _conv(y, rand(c, g, 3, 3) * 0.2, groups=c // g, strides=strides))
        mod = module([x], z)
        (grouped,) = [n for n in topo_calls(run(mod)) if n.op == "nn.conv2d_nchwc" and n.attr("groups", 1) > 1]
        assert grouped.args[1].type.shape[1] == g
        out = (hw + 2 - 3) // strides[0] + 1
        b = channel_block(channels=c)
        true = 2 * (-(-c // b) * b) * g * 9 * out * out  # (over the padded last block's lanes)
        calls = ember.compile(mod).program["calls"]
        flops = max(k["flops"] for k in calls if "nn.conv2d_nchwc" in k["ops"] and k["group"] != calls[0]["group"])
        assert true <= flops < 1.1 * true  # the grouped conv's (with its ReLU): not twice
        _same_as_plain(mod, (1, c, hw, hw))


def test_an_expand_of_a_blocked_value_reads_the_plain_layout():
    """expand names its result's shape in the plain layout: it cannot run on the blocks."""
    x = Var("x", T(1, 8, 6, 6))
    s = call("mean", call("nn.relu", _conv(x, rand(FB, 8, 3, 3))), axis=(2, 3), keepdims=True)
    mod = module([x], call("expand", s, shape=(1, FB, 6, 6)))
    after = run(mod)
    assert [n for n in topo_calls(after) if n.op == "expand"][0].args[0].op == "unblock_channels"
    _same_as_plain(mod, (1, 8, 6, 6))


def test_bf16_precision_runs_blocked_convs_as_packed_dots_of_channel_pairs():
    import ml_dtypes
    from ember.target import Target

    if not Target.host().has_feature("avx512bf16"):
        pytest.skip("the host has no AVX512-BF16")
    c = 2 * FB
    x = Var("x", T(1, c, 9, 9))
    mod = module([x], _residual_block(x, c))
    exe = ember.compile(mod, precision="bf16")
    convs = [k for k in exe.kernel_sources if "conv2d_nchwc" in k[2]]
    assert convs
    # the second conv reads the first's blocked output as bfloat16 words; the first reads x as it is
    from ember.driver import lower_kernel

    text = "\n".join(lower_kernel(s, args, name).script() for s, args, name in convs)
    assert "dot_bf16x2" in text
    xv = rand(1, c, 9, 9)
    ref = ember.compile(mod).run(xv)[0]
    got = exe.run(xv)[0]
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())
    assert not np.array_equal(got, ref)  # (bfloat16 operands: the option took effect)


def test_a_one_group_norm_normalizes_the_blocks_as_they_lie():
    c = 2 * FB
    x = Var("x", T(2, c, 5, 6))
    y = call("nn.relu", _conv(x, rand(c, c, 3, 3) * 0.1))
    flat = call("reshape", y, newshape=(2, 1, c * 30))
    normed = call("nn.instance_norm", flat, const(np.ones(1, np.float32)), const(np.zeros(1, np.float32)),
                  epsilon=1e-5)
    out = call("add", call("reshape", normed, newshape=(2, c, 5, 6)), const(rand(1, c, 1, 1)))
    mod = module([x], _conv(out, rand(c, c, 3, 3) * 0.1))
    after = run(mod)
    ops = _ops(after)
    assert ops.count("unblock_channels") == 1 and ops.index("unblock_channels") == len(ops) - 1  # (only at the end)
    norm = next(c_ for c_ in topo_calls(after) if c_.op == "nn.instance_norm")
    assert norm.args[0].args[0].type.ndim == 5  # (a view of the blocks)
    xv = rand(2, c, 5, 6)
    np.testing.assert_allclose(ember.compile(mod).run(xv)[0],
                               ember.compile(mod, disabled_passes=["block_layout"]).run(xv)[0], rtol=1e-4, atol=1e-4)


def test_a_split_into_whole_blocks_splits_the_blocks():
    """MixNet's mixed depthwise convs: a blocked tensor split along the channels into whole
    blocks, each part filtered by a window of its own size, concatenated: blocked throughout
    (through the plain layout, an unblocking, the split and a blocking each)."""
    from ember.graph import TupleGetItem

    x = Var("x", T(1, 16, 8, 8))
    y = call("nn.relu", _conv(x, rand(2 * FB, 16, 1, 1), padding=(0, 0, 0, 0)))
    parts = call("split", y, axis=1, sizes=(FB, FB))
    a = _conv(TupleGetItem(parts, 0), rand(FB, 1, 3, 3), groups=FB)
    b = _conv(TupleGetItem(parts, 1), rand(FB, 1, 5, 5), groups=FB, padding=(2, 2, 2, 2))
    body = call("nn.relu", call("concat", a, b, axis=1))
    after = run(module([x], body))
    ops = _ops(after)
    assert ops.count("unblock_channels") == 1 and ops[-1] == "unblock_channels" and ops.count("split") == 1
    split = next(n for n in topo_calls(after) if n.op == "split")
    assert split.args[0].type.ndim == 5
    xv = rand(1, 16, 8, 8)
    got = ember.compile(module([x], body)).run(xv)[0]
    want = ember.compile(module([x], body), disabled_passes=["block_layout"]).run(xv)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
