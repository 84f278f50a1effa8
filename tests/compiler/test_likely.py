"""Likely sizes: what the schedules of a model with symbolic dims are made for -- a batch of 1,
224x224 images, sequences of 128, or the shape hints given -- while its kernels run at every size."""
import numpy as np
import pytest

import ember
from ember.compiler.likely import likely_sizes_of
from ember.graph import Call, Function, Module, Var, const
from ember.graph.infer import infer_types
from ember.graph.types import Dim, TensorType
from ember.kernels.common import likely_int, likely_sizes
from ember.loop.expr import Var as LoopVar


def _main(*types):
    params = [Var(f"in{k}", t) for k, t in enumerate(types)]
    return Function(params, params[0])


def test_defaults_by_role_and_hints_first():
    image = TensorType((Dim("batch"), 3, Dim("h"), Dim("w")), "float32")
    ids = TensorType((Dim("batch"), Dim("seq")), "int64")
    feats = TensorType((Dim("batch"), Dim("frames"), 80), "float32")
    main = _main(image, ids, feats)
    assert likely_sizes_of(main) == {"batch": 1, "h": 224, "w": 224, "seq": 128}  # frames: no default
    assert likely_sizes_of(main, {"in0": (4, 3, 512, 384)}) == {"batch": 4, "h": 512, "w": 384, "seq": 128}


def test_a_kv_cache_is_no_image_and_its_past_is_likely_empty():
    """optimum's past key/values, (batch, heads, past, 64): a static last axis, so no image;
    its past length is likeliest 0 (the prompt's step, the one static twins can serve)."""
    past = TensorType((Dim("batch"), 4, Dim("past_sequence_length"), 64), "float32")
    ids = TensorType((Dim("batch"), Dim("seq")), "int64")
    assert likely_sizes_of(_main(past, ids)) == {"batch": 1, "past_sequence_length": 0, "seq": 128}
    frames = TensorType((Dim("batch"), 3, Dim("t"), 64), "float32")  # (a 4-d float with one symbolic axis)
    assert likely_sizes_of(_main(frames)) == {"batch": 1}


def test_hints_name_inputs_of_their_rank():
    from ember.errors import ShapeError

    main = _main(TensorType((Dim("batch"), 3, Dim("h"), Dim("w")), "float32"))
    with pytest.raises(ShapeError, match="not inputs.*in0"):
        likely_sizes_of(main, {"x": (1, 3, 224, 224)})
    with pytest.raises(ShapeError, match="rank 4"):
        likely_sizes_of(main, {"in0": (1, 224, 224)})


def test_a_size_expression_takes_its_symbols_likely_values():
    h = LoopVar("h")
    assert likely_int((((h + 1) // 2 + 1) // 2)) is None
    with likely_sizes({"h": 224}):
        assert likely_int((((h + 1) // 2 + 1) // 2)) == 56
        assert likely_int(h * LoopVar("unhinted")) is None
    assert likely_int(7) == 7


def _product(rows: str):
    w = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    x = Var("x", TensorType((Dim("batch"), Dim(rows), 64), "float32"))
    return infer_types(Module({"main": Function([x], Call("nn.matmul", [x, const(w)], {}))})), w


@pytest.mark.parametrize("hint,mr", [(None, 14), (128, 13), (197, 11)])
def test_a_product_over_a_sequence_blocks_its_rows_for_the_likely_length(hint, mr):
    """The row block that pads the rows least, for the likely sequence (BERT's 128 in blocks of
    13; ViT's 197 of 11), in a kernel that still runs every length; with none (a float input's
    second axis has no default), the register block's 14."""
    from ember.kernels.common import vector_lanes

    if vector_lanes(None) < 16:
        pytest.skip("the row blocks measured are AVX-512's")
    mod, w = _product("seq")
    exe = ember.compile(mod, shape_hints={"x": (1, hint, 64)} if hint else None)
    assert exe.likely_sizes.get("seq") == hint
    src = "\n".join(s.script() if hasattr(s, "script") else str(s) for s, _, name in exe.kernel_sources if "matmul" in name)
    assert f"for i1_i_1 in unrolled({mr}):" in src, src
    for seq in (1, 5, 128, 200):
        a = np.random.default_rng(seq).standard_normal((1, seq, 64)).astype(np.float32)
        np.testing.assert_allclose(exe.run(a)[0], a @ w, rtol=1e-4, atol=1e-4)


def test_the_likely_shapes_of_inputs_with_symbolic_dims():
    """What ``ember tune`` measures a dynamic model at when given no shape: each input with
    symbolic dims at its symbols' likely values; a static input, or one with a symbol that has
    none, is left out."""
    from ember.compiler.likely import likely_shapes

    image = TensorType((Dim("batch"), 3, Dim.parse("32*h32"), Dim("w")), "float32")
    feats = TensorType((1, Dim("frames"), 80), "float32")
    main = _main(image, TensorType((2, 3), "float32"), feats)
    assert likely_shapes(main) == {}  # (h32 has no likely value: a 32*h32 axis is no plain symbol)
    main = _main(TensorType((Dim("batch"), 3, Dim("h"), Dim("w")), "float32"), feats,
                 TensorType((Dim("batch"), Dim("seq")), "int64"))
    assert likely_shapes(main) == {"in0": (1, 3, 224, 224), "in2": (1, 128)}
    assert likely_shapes(main, {"in0": (2, 3, 64, 96)}) == {"in0": (2, 3, 64, 96), "in2": (2, 128)}
