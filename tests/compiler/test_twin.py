"""Static twins: a kernel over symbolic sizes branches to the group compiled for its likely sizes
when called at those sizes, and to its symbolic loops at any other."""
import json

import numpy as np
import ember
from ember.compiler.group import lower_group
from ember.compiler.twin import specialize_group, twin_condition
from ember.graph import Call, Function, Module, Var, const
from ember.graph.infer import infer_types
from ember.graph.types import Dim, TensorType
from ember.kernels.common import host
from ember.tune.records import Record
from ember.loop.knobs import decisions
from ember.compiler.workload import target_name, workload_key

HINT = (1, 8, 20, 20)


def _conv_model():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    x = Var("x", TensorType((Dim("batch"), 8, Dim("h"), Dim("w")), "float32"))
    y = Call("nn.conv2d", [x, const(w)], {"padding": (1, 1, 1, 1)})
    y = Call("nn.relu", [Call("add", [y, const(b.reshape(1, 16, 1, 1))])])
    return infer_types(Module({"main": Function([x], y)})), w, b


def _reference(x, w, b):
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd), np.float32)
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return np.maximum(out + b.reshape(1, -1, 1, 1), 0)


def _conv_group(exe):
    return next((g, fn) for g, fn in exe.groups if "conv" in g)


def test_a_group_takes_static_shapes_at_the_likely_sizes():
    mod, _, _ = _conv_model()
    exe = ember.compile(mod, shape_hints={"x": HINT})
    _, fn = _conv_group(exe)
    static = specialize_group(fn, {"batch": 1, "h": 20, "w": 20})
    assert static is not None and all(p.type.is_static for p in static.params)
    assert static.ret_type.shape[-3:-1] == (20, 20)
    assert specialize_group(fn, {"batch": 1, "h": 20}) is None  # (w has no value: no twin)
    assert specialize_group(static, {"batch": 1, "h": 20, "w": 20}) is None  # (already static)
    assert str(twin_condition({"w": 20, "h": 20})) == "h == 20 and w == 20"


def test_the_kernel_branches_to_its_twin_and_runs_every_size():
    mod, w, b = _conv_model()
    exe = ember.compile(mod, shape_hints={"x": HINT})
    g, _ = _conv_group(exe)
    src = next(s for s, _, name in exe.kernel_sources if name == g).script()
    assert "if batch == 1 and h == 20 and w == 20:" in src, src
    # the twin reads the input as a buffer of static shape, the parameter's memory under its
    # name (the printer tells the two apart as p0 and p0_1)
    twin, generic = src.split("\n    else:\n")
    assert "p0_1[" in twin and "p0_1[" not in generic and "p0[" in generic
    for shape in (HINT, (1, 8, 13, 17), (2, 8, 20, 20), (1, 8, 20, 21)):
        x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(exe.run(x)[0], _reference(x, w, b), rtol=1e-4, atol=1e-4)


def test_a_record_tuned_at_the_likely_shape_schedules_the_twin():
    """``ember tune --input-shape`` records static workloads; the dynamic model's twin is one."""
    mod, w, b = _conv_model()
    target = host()
    exe0 = ember.compile(mod, shape_hints={"x": HINT})
    g, fn = _conv_group(exe0)
    static = specialize_group(fn, {"batch": 1, "h": 20, "w": 20})
    chosen = {"conv.columns": 3}
    with decisions(chosen):
        k = lower_group(static, g, target)
    rec = Record(workload_key(static, target), target_name(target), k.schedule.trace.to_json(),
                 json.dumps(chosen), times=(1e-6,))
    exe = ember.compile(mod, shape_hints={"x": HINT}, tuning_db={rec.workload: rec})
    assert exe.tuned_kernels == [g]
    assert exe0.tuned_kernels == []
    for shape in (HINT, (1, 8, 9, 30)):
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(exe.run(x)[0], _reference(x, w, b), rtol=1e-4, atol=1e-4)


def test_a_static_model_has_no_twin():
    mod, _, _ = _conv_model()
    exe = ember.compile(mod, input_shapes={"x": HINT})
    g, _ = _conv_group(exe)
    src = next(s for s, _, name in exe.kernel_sources if name == g)
    assert "h == 20" not in (src.script() if hasattr(src, "script") else str(src))
