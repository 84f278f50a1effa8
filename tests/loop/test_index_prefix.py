"""Leading indices that split a fused loop over symbolic sizes fold back into one: the access
keeps its offset, without the divisions."""
import numpy as np

from ember import runtime as rt
from ember.codegen.llvm import build
from ember.loop import Buffer, FloorDiv, FloorMod, For, IntImm, PrimFunc, Ramp, Store, Var
from ember.loop.passes import default_pipeline, fold_index_prefix
from ember.loop.visit import walk


def _symbolic_divs(f) -> int:
    return sum(isinstance(n, (FloorDiv, FloorMod)) and not isinstance(n.b, IntImm) for n in walk(f.body))


def _scale_rows(vector: bool):
    """``Y = 2 X`` over (b, 4, s, s), the three leading axes fused into one parallel loop."""
    i, j, b, s = Var("i"), Var("j"), Var("b"), Var("s")
    X, Y = Buffer("X", (b, 4, s, s)), Buffer("Y", (b, 4, s, s))
    lead = (FloorDiv(i, s * 4), FloorMod(FloorDiv(i, s), IntImm(4)), FloorMod(i, s))
    col = Ramp(j * 4, IntImm(1), 4) if vector else j
    inner = For(j, IntImm(0), s // 4 if vector else s, "serial", Store(Y, X[(*lead, col)] * 2.0, (*lead, col)))
    return PrimFunc("scale_rows" + ("_v" if vector else ""), (X, Y, b, s), For(i, IntImm(0), b * 4 * s, "parallel", inner))


def test_a_fused_split_over_symbolic_sizes_loses_its_divisions():
    f = _scale_rows(False)
    assert _symbolic_divs(f) == 6
    g = fold_index_prefix(f)
    assert _symbolic_divs(g) == 0
    store = next(n for n in walk(g.body) if isinstance(n, Store))
    assert store.indices[:2] == (IntImm(0), IntImm(0))


def test_static_shapes_are_left_to_llvm():
    i, j = Var("i"), Var("j")
    X = Buffer("X", (2, 4, 8))
    f = PrimFunc("k", (X,), For(i, 0, 8, "serial", For(j, 0, 8, "serial", Store(
        X, X[FloorDiv(i, IntImm(4)), FloorMod(i, IntImm(4)), j] + 1.0, (FloorDiv(i, IntImm(4)), FloorMod(i, IntImm(4)), j)))))
    assert fold_index_prefix(f) is f


def test_folded_accesses_compute_what_they_did():
    for vector in (False, True):
        f = _scale_rows(vector)
        assert _symbolic_divs(default_pipeline(f)) == 0
        mod = build(f, passes=True)
        for shape in ((1, 4, 4, 4), (3, 4, 8, 8), (2, 4, 12, 12)):
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            y = rt.zeros(shape, "float32")
            mod[f.name](rt.array(x), y)
            np.testing.assert_array_equal(y.numpy(), 2 * x)
