"""Models as GPU kernels without a GPU (issue 49): every fused group scheduled for the cuda
kind (the generic GPU schedule: blocks of 256 threads, one an element), split into device
kernels, compiled to PTX that ptxas assembles for sm_80 and sm_90; and the same loop programs
run on the CPU, thread by thread, matching the CPU's own kernels on random inputs."""
import os

import numpy as np
import pytest

import ember
import ember.runtime as rt
from ember.bench.models import LIGHT, light_path
from ember.codegen.nvptx import assemble, ptx, ptxas_path
from ember.compiler.cuda import device_kernels, gpu_groups, lower_for_gpu, model_ptx
from ember.compiler.group import lower_group
from ember.graph.types import TensorType
from ember.loop.passes import default_pipeline
from ember.loop.passes.threads_on_cpu import threads_on_cpu
from ember.runtime.ndarray import numpy_dtype
from ember.target import as_target

needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="no ptxas: pip install nvidia-cuda-nvcc-cu12 (the test extra)")


def _assembles(path: str) -> None:
    groups, text = model_ptx(path, "cuda -arch=sm_80")
    kernels = [k for g in groups for k in g.kernels]
    assert len(kernels) >= len(groups) > 0
    assert len(assemble(text, "sm_80")) > 0
    assert len(assemble(ptx(kernels, as_target("cuda -arch=sm_90")), "sm_90")) > 0


@needs_ptxas
@pytest.mark.parametrize("name", LIGHT)
def test_every_kernel_of_the_light_models_assembles_for_sm_80_and_sm_90(name):
    _assembles(light_path(name))


def _matches_the_cpu_kernels(path: str) -> int:
    """Each static group of ``path``: its GPU loop program run on the CPU against the CPU's
    kernel, on the same random inputs; the number checked."""
    rng = np.random.default_rng(0)
    checked = 0
    for name, fn in gpu_groups(path, "cuda"):
        types = [p.type for p in fn.params]
        outs = list(fn.ret_type.fields) if hasattr(fn.ret_type, "fields") else [fn.ret_type]
        if not all(isinstance(t, TensorType) and t.is_static for t in types + outs):
            continue
        args = []
        for t in types:
            d = numpy_dtype(t.dtype)
            a = rng.standard_normal(t.shape).astype(d) if d.kind == "f" else rng.integers(0, 3, t.shape).astype(d)
            args.append(rt.array(a))
        got = []
        for func in (default_pipeline(lower_group(fn, name, None).lowered()),
                     threads_on_cpu(lower_for_gpu(fn, name, "cuda"))):
            o = [rt.zeros(tuple(t.shape), t.dtype) for t in outs]
            ember.build(func)[name](*args, *o)
            got.append([x.numpy() for x in o])
        for cpu, gpu in zip(*got):
            np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-4, err_msg=name)
        checked += 1
    return checked


def test_the_gpu_schedules_of_a_cnn_run_on_the_cpu_as_its_cpu_kernels_do():
    assert _matches_the_cpu_kernels(light_path("squeezenet")) >= 20


def test_a_group_of_several_launches_passes_values_through_workspace():
    """Softmax's group is four grid nests (max parts, max, sum parts, normalize): four device
    kernels, its partial results workspace buffers the host allocates."""
    groups = dict(gpu_groups(light_path("squeezenet"), "cuda"))
    name = next(n for n in groups if "softmax" in n)
    kernels, workspace = device_kernels(lower_for_gpu(groups[name], name, "cuda"))
    assert len(kernels) > 1 and [k.name for k in kernels] == [f"{name}_{i}" for i in range(len(kernels))]
    assert workspace and all(b.scope == "global" for b in workspace)
    assert all(any(b in k.buffers for k in kernels) for b in workspace)


@pytest.mark.slow
@needs_ptxas
def test_every_kernel_of_the_zoo_assembles_and_transformer_groups_match():
    pytest.importorskip("torchvision")
    pytest.importorskip("transformers")
    from ember.bench.zoo import ZOO, export
    from ember.config import cache_dir

    out = os.path.join(cache_dir(), "zoo-tests")
    for name in ZOO:
        _assembles(_quick_export(name, out, export))
    assert _matches_the_cpu_kernels(_quick_export("bert", out, export)) >= 10


def _quick_export(name: str, out: str, export) -> str:
    """Zoo model ``name`` as an ONNX file of static shapes: from the TorchScript exporter, 5-8x
    faster than the dynamo one (most of this test's time was exports), or from the dynamo one
    where TorchScript cannot write the model (ViT's fused attention). The kernels under test
    are the architecture's either way."""
    try:
        return export(name, out, torchscript=True)
    except Exception:  # noqa: BLE001 - an op TorchScript's exporter lacks
        return export(name, out)
