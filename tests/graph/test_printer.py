"""The graph IR's text form: exact output, shared subexpressions, constants, names, stability."""
import os
import subprocess
import sys
import textwrap

import numpy as np

from ember.graph import (Call, Constant, Dim, Function, Module, TensorType, Tuple, TupleGetItem, Var,
                         astext, const)
from ember.graph.ir import _interning


def resnet_stem():
    data = Var("data", TensorType((1, 3, 224, 224), "float32"))
    w = Constant(np.zeros((64, 3, 7, 7), "float32"))
    conv = Call("nn.conv2d", [data, w], {"strides": [2, 2], "padding": (3, 3, 3, 3)},
                TensorType((1, 64, 112, 112), "float32"))
    relu = Call("nn.relu", [conv])
    return Module({"main": Function([data], relu, TensorType((1, 64, 112, 112), "float32"))})


def test_function_text():
    assert astext(resnet_stem()) == textwrap.dedent("""\
        def main(%data: Tensor[(1, 3, 224, 224), float32]) -> Tensor[(1, 64, 112, 112), float32]:
            %0 = nn.conv2d(%data, meta[Constant][0], padding=(3, 3, 3, 3), strides=(2, 2)) : Tensor[(1, 64, 112, 112), float32]
            %1 = nn.relu(%0)
            return %1

        # meta[Constant][0]: Tensor[(64, 3, 7, 7), float32]""")
    assert str(resnet_stem()) == astext(resnet_stem())


def test_shared_subexpressions_are_bound_once():
    x = Var("x", TensorType((Dim("batch"), 8), "float32"))
    a = Call("nn.relu", [x])
    b = Call("add", [Call("exp", [a]), Call("log", [a])])
    out = Tuple([b, a])
    assert astext(Function([x], TupleGetItem(out, 0)), name="f") == textwrap.dedent("""\
        def f(%x: Tensor[(batch, 8), float32]):
            %0 = nn.relu(%x)
            %1 = exp(%0)
            %2 = log(%0)
            %3 = add(%1, %2)
            %4 = (%3, %0)
            %5 = %4.0
            return %5""")


def test_constants_inline_small_and_meta_large_numbered_by_first_use():
    x = Var("x")
    big1, big2 = Constant(np.ones((3, 3), "float32")), Constant(np.ones(9, "int8"))
    e = Call("f", [x, big2, const([[1, 2], [3, 4]], "int32"), big1, big2, const(0.1, "float32"),
                   const(True), const([], "int64")])
    assert astext(e) == textwrap.dedent("""\
        %0 = f(%x, meta[Constant][0], const([[1, 2], [3, 4]], int32), meta[Constant][1], meta[Constant][0], const(0.1, float32), const(True, bool), const([], int64))
        %0

        # meta[Constant][0]: Tensor[(9,), int8]
        # meta[Constant][1]: Tensor[(3, 3), float32]""")
    assert astext(Call("f", [big1]), inline_limit=9).startswith("%0 = f(const([[1.0, 1.0, 1.0], ")


def test_meta_numbering_spans_the_module():
    w = Constant(np.ones(16, "float32"))
    x = Var("x")
    mod = Module({"main": Function([x], Call("g", [x, w])), "aux": Function([x], Call("h", [w, x]))})
    text = astext(mod)
    assert text.startswith("def main(%x):")  # main first, then the others by name
    assert text.index("def aux(%x):") > text.index("def main")
    assert text.count("meta[Constant][0]") == 3 and "meta[Constant][1]" not in text


def test_names_are_quoted_and_deduplicated():
    a = Var("input.1", TensorType((1,), "float32"))
    b = Var("x", TensorType((1,), "float32"))
    c = Var("x", TensorType((2,), "float32"))  # same name, different variable
    d = Var("0")
    e = Call("concat", [a, b, c, d], {"layout": "NCHW", "shape": (Dim("n"), 2), "alpha": 0.5, "k": None})
    assert astext(e).splitlines()[0] == (
        '%0 = concat(%"input.1", %x, %x_1, %"0", alpha=0.5, k=None, layout=\'NCHW\', shape=(n, 2))')


def test_bare_leaves_and_types():
    assert astext(Var("x")) == "%x"
    assert astext(const([1, 2], "int64")) == "const([1, 2], int64)"
    assert astext(TensorType((Dim("b"),), "int8")) == "Tensor[(b,), int8]"
    assert astext(Function([], const(1.5, "float32"))) == "def fn():\n    return const(1.5, float32)"


def test_printing_is_stable():
    text = astext(resnet_stem())
    with _interning(False):
        assert astext(resnet_stem()) == text  # fresh objects, same text


SCRIPT = """
import numpy as np
from ember.graph import *
xs = [Var(n, TensorType((Dim("b"), 4), "float32")) for n in "pqrs"]
e = [Call("add", [xs[i], xs[(i * 3) % 4]], {"k" + str(i): i, "z": "a", "a": 1.5}) for i in range(4)]
body = Tuple([Call("mul", [e[i], e[3 - i], Constant(np.full((3, 3), i, "float32"))]) for i in range(4)])
print(astext(Module({"main": Function(xs, body), "other": Function(xs[:1], e[0])})))
"""


def test_printing_is_deterministic_across_processes():
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outs.append(subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                                   check=True).stdout)
    assert outs[0] == outs[1] and "meta[Constant][3]" in outs[0]
